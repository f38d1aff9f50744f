"""Migrations (app/storage/migrate) on a real DuckDB file."""

from __future__ import annotations

from datetime import UTC, datetime

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


def test_a_file_at_0004_with_rows_gains_sample_rates_and_weighted_rollups(tmp_path):
    """0005 on a file an older release filled: old rows weigh 1, the rollups stay clean."""
    import duckdb

    from app.analytics import sampling, shapes
    from app.analytics.filters import Filter
    from app.storage import rollups

    path = tmp_path / "0004.duckdb"
    _at_revision(path, "0004")
    con = duckdb.connect(str(path))
    columns = [c.name for c in schema.requests.columns if c.name != "sample_rate"]
    con.execute(
        f"INSERT INTO requests ({', '.join(columns)}) SELECT 'g', 'r-' || i, "
        "TIMESTAMPTZ '2026-11-20 00:00:00+00' + to_minutes(i), "
        "TIMESTAMPTZ '2026-11-22 00:00:00+00', 'm', 'e', NULL, 100 + i, 10 + i % 7, false, "
        "50.0 + i, 500.0 + i, 5.0, NULL, [1.0, 2.0], 'ok', NULL, true, NULL FROM range(3000) t(i)"
    )
    # 0004's rollups of those rows, as its rebuild wrote them (no `w`).
    hour, dims = rollups.UTC_HOUR, rollups.DIMS
    con.execute(
        f"INSERT INTO rollup_shapes SELECT {hour}, {dims}, {rollups.half_octave_sql('isl')}, "
        f"{rollups.half_octave_sql('osl')}, count(*) FROM requests GROUP BY ALL"
    )
    con.execute(
        f"INSERT INTO rollup_values SELECT {hour}, {dims}, 0, {rollups.bucket_sql('isl')}, "
        "count(*), max(isl), sum(isl) FROM requests GROUP BY ALL"
    )
    con.execute(
        f"INSERT INTO rollup_gaps SELECT {hour}, {dims}, 0, {rollups.bucket_sql('itl_ms')}, "
        "count(*), max(itl_ms) FROM requests GROUP BY ALL"
    )
    con.execute(
        f"INSERT INTO rollup_ttft SELECT {hour}, {dims}, {rollups.half_octave_sql('isl')}, "
        f"{rollups.bucket_sql('ttft_ms')}, count(*), max(ttft_ms), sum(isl), sum(ttft_ms), "
        "sum(isl * ttft_ms), sum(isl * isl) FROM requests GROUP BY ALL"
    )
    con.close()
    with Database(path).open() as db:
        assert db.revision == migrate.head_revision()
        cur = db.cursor()
        cols = [
            r[0]
            for r in cur.execute(
                "SELECT column_name FROM information_schema.columns "
                "WHERE table_name = 'requests' ORDER BY ordinal_position"
            ).fetchall()
        ]
        assert cols[-1] == "sample_rate"
        assert (
            cur.execute("SELECT count(*) FROM requests WHERE sample_rate IS NULL").fetchone()[0]
            == 3000
        )
        for table in ("rollup_shapes", "rollup_values", "rollup_gaps", "rollup_ttft"):
            assert cur.execute(f"SELECT count(*) FROM {table} WHERE w <> n").fetchone()[0] == 0
            assert cur.execute(f"SELECT count(*) FROM {table}").fetchone()[0] > 0
        assert cur.execute("SELECT count(*) FROM rollup_dirty").fetchone()[0] == 0
        window = Filter(
            end=datetime(2026, 11, 23, tzinfo=UTC), start=datetime(2026, 11, 20, tzinfo=UTC)
        )
        assert shapes.heatmap(cur, window).total == 3000
        info = sampling.sampling(cur, window)
        assert (info.rows, info.estimated_requests, info.sampled) == (3000, 3000, False)
