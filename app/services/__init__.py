"""The floor where storage, analytics and sizing meet; API, pages, CLI and email call only this."""
