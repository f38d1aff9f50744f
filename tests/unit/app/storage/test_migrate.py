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


def _at_revision(path, revision: str) -> None:
    """A database file migrated only as far as `revision`, as an older release left it."""
    from alembic import command
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    cfg = migrate._config()
    engine = create_engine(f"duckdb:///{path}", poolclass=NullPool)
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        command.upgrade(cfg, revision)
    engine.dispose()


def test_an_older_file_is_migrated_and_a_current_one_opened_as_it_is(tmp_path):
    path = tmp_path / "old.duckdb"
    _at_revision(path, "0003")
    with Database(path).open() as db:  # not at head: Alembic runs
        assert db.revision == migrate.head_revision()
        rows = db.cursor().execute("SELECT table_name FROM duckdb_tables()").fetchall()
        tables = {r[0] for r in rows}
        assert {"rollup_ttft", "rollup_gaps"} <= tables  # what 0004 adds
    with Database(path).open() as db:  # at head: opened without a migration, same revision
        assert db.revision == migrate.head_revision()
