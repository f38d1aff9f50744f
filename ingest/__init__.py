"""Log shipping: wire formats, validation into canonical records, and the ingest routes."""
