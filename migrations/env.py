"""Alembic environment: runs migrations on the connection app.storage.migrate hands over."""

from alembic import context

from app.storage.schema import metadata

connection = context.config.attributes.get("connection")
if connection is None:
    raise RuntimeError("run migrations through `tokenshape migrate`, which opens the database")

context.configure(connection=connection, target_metadata=metadata)
with context.begin_transaction():
    context.run_migrations()
