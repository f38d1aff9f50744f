"""Read-only queries that return frames; all SQL of the views lives here."""
