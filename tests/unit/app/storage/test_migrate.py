"""Migrations (app/storage/migrate) on a real DuckDB file."""

from __future__ import annotations

from app.storage import migrate, schema
from app.storage.database import Database


def test_migration_builds_the_reference_schema(tmp_path):
    with Database(tmp_path / "m.duckdb").open() as db:
        assert db.revision == migrate.head_revision()
        cur = db.cursor()
        for table in schema.metadata.sorted_tables:
            cols = [
                r[0]
                for r in cur.execute(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = ? "
                    "ORDER BY ordinal_position",
                    [table.name],
                ).fetchall()
            ]
            assert cols == [c.name for c in table.columns], table.name
        types = dict(
            cur.execute(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = 'requests'"
            ).fetchall()
        )
        assert types["ttft_ms"] == "DOUBLE" and types["token_gaps_ms"] == "DOUBLE[]"
        assert types["started_at"] == "TIMESTAMP WITH TIME ZONE"
    # Migrating again is a no-op and keeps the revision.
    with Database(tmp_path / "m.duckdb").open() as db:
        assert db.revision == migrate.head_revision()
