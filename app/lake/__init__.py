"""Apache Spark computes tokenshape's rollups where a data lake already is (`tokenshape lake`)."""
