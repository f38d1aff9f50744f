"""The ingest journal: acknowledged rows survive until DuckDB has them, and only once."""

from __future__ import annotations

from datetime import UTC, datetime

from app.storage.batches import Batch
from app.storage.database import Database
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.journal import Journal
from app.storage.write.store import RequestStore
from tests.support.database import copy_database, open_migrated
from tests.support.records import request_rows


def _count(db: Database) -> int:
    return db.cursor().execute("SELECT count(*) FROM requests").fetchall()[0][0]


def test_unmoved_rows_are_recovered_once_after_a_crash(db_template, tmp_path):
    path = copy_database(db_template, tmp_path / "j.duckdb")
    jdir = tmp_path / "j.duckdb.journal"
    now = datetime.now(UTC)
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=Journal(jdir, REQUESTS_SCHEMA))
        store.write([Batch("g", "t", now, request_rows(["a", "b"]))])
        store.move(db.new_cursor())  # a, b reach DuckDB ...
        assert _count(db) == 2
        store.write([Batch("g", "t", now, request_rows(["c", "d"]))])
        assert store.unmoved_rows == 2 and _count(db) == 2  # ... c, d only the journal
        # A crash now: the open segment is never closed or moved.
    segments = Journal(jdir, REQUESTS_SCHEMA).segments()
    assert len(segments) == 1
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=Journal(jdir, REQUESTS_SCHEMA))
        assert store.recovered == 2 and _count(db) == 4
        assert Journal(jdir, REQUESTS_SCHEMA).segments() == []
        # The recovered keys are known to the dedupe index.
        (r,) = store.write([Batch("g", "t", now, request_rows(["c", "e"]))])
        assert (r.accepted, r.duplicates) == (1, 1)


def test_a_segment_already_moved_is_not_stored_twice(db_template, tmp_path):
    path, jdir = copy_database(db_template, tmp_path / "m.duckdb"), tmp_path / "m.journal"
    now = datetime.now(UTC)
    with open_migrated(path) as db:
        journal = Journal(jdir, REQUESTS_SCHEMA)
        store = RequestStore(db.new_cursor(), journal=journal)
        store.write([Batch("g", "t", now, request_rows(["a", "b"]))])
        (segment,) = journal.rotate()
        # Crash between the move's COMMIT and the segment's deletion: rows in both places.
        db.cursor().register("staged", Journal.read(segment))
        db.cursor().execute("INSERT INTO requests SELECT * FROM staged")
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=Journal(jdir, REQUESTS_SCHEMA))
        assert store.recovered == 0 and _count(db) == 2


def test_a_torn_last_append_is_skipped(tmp_path):
    jdir = tmp_path / "t.journal"
    journal = Journal(jdir, REQUESTS_SCHEMA)
    journal.append(request_rows(["a", "b"]))
    journal.append(request_rows(["c"]))
    (segment,) = journal.segments()
    journal.close()
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 40])  # the crash hit mid-way through the last append
    rows = Journal.read(segment)
    assert rows is not None and rows.column("request_id").to_pylist() == ["a", "b"]


def test_journaled_rows_count_as_duplicates_before_they_are_moved(fresh_db, tmp_path):
    now = datetime.now(UTC)
    with fresh_db(tmp_path / "d.duckdb") as db:
        store = RequestStore(db.new_cursor(), journal=Journal(tmp_path / "d.j", REQUESTS_SCHEMA))
        store.write([Batch("g", "t", now, request_rows(["a"]))])
        (r,) = store.write([Batch("g", "t", now, request_rows(["a", "z"]))])
        assert (r.accepted, r.duplicates) == (1, 1)
        store.move(db.new_cursor())
        assert _count(db) == 2
