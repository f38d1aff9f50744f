"""One module per page; each registers itself from `register(db)`."""
