"""One module per wire or file format: bytes in, canonical records and per-item errors out."""
