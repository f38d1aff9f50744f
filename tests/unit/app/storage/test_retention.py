"""Retention (app/storage/retention): exactly the rows past their age are deleted, a day per
transaction, and the writer's dedupe index forgets them."""

from __future__ import annotations

import asyncio
import logging
import threading
from datetime import UTC, datetime, timedelta

import pytest

from app.storage import retention
from app.storage.batches import Batch
from app.storage.database import Database
from app.storage.write.store import RequestStore
from tests.support.retention import prefixes, put, received_rows

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


@pytest.fixture
def db(database: Database) -> Database:
    return database


AGES = {  # group → age when NOW is the clock's time
    "fresh": timedelta(hours=1),
    "edge": timedelta(days=7),  # exactly the retention: not older, kept
    # Past it, an hour earlier: requests go by whole UTC hours (test_an_hour_goes_whole).
    "week": timedelta(days=7, hours=1, seconds=1),
    "month": timedelta(days=30),
    "ancient": timedelta(days=900),  # a gap of years between the old rows costs one chunk
}


def test_exactly_the_rows_past_retention_are_deleted(db):
    for i, (group, age) in enumerate(AGES.items()):
        put(db, group, 10 + i, NOW - age, rejects=2)
    dry = retention.prune(db.connection, NOW, request_days=7, reject_days=20, dry_run=True)
    assert dry.deleted == {"requests": 12 + 13 + 14, "rejects": 4} and dry.chunks == 0
    assert prefixes(db) == set(AGES)  # a dry run deletes nothing

    result = retention.prune(db.connection, NOW, request_days=7, reject_days=20)
    assert result.deleted == dry.deleted
    assert result.cutoffs == {"requests": NOW - timedelta(days=7), "rejects": NOW - timedelta(20)}
    assert prefixes(db) == {"fresh", "edge"}
    assert prefixes(db, "rejects") == {"fresh", "edge", "week"}
    # One chunk per day that held old rows, not one per day of the 900-day span.
    assert result.chunks == 3 + 2 and result.checkpointed
    again = retention.prune(db.connection, NOW, request_days=7, reject_days=20)
    assert again.deleted == {"requests": 0, "rejects": 0} and again.chunks == 0


def test_an_hour_goes_whole_and_its_rollups_keep_counting_it(db):
    put(db, "edge", 10, NOW - timedelta(days=7))  # not past retention, but in the same hour
    put(db, "week", 5, NOW - timedelta(days=7, seconds=1))
    put(db, "fresh", 3, NOW - timedelta(hours=1))
    dry = retention.prune(db.connection, NOW, request_days=7, reject_days=7, dry_run=True)
    assert dry.deleted["requests"] == 15
    result = retention.prune(db.connection, NOW, request_days=7, reject_days=7)
    assert result.deleted["requests"] == 15 and prefixes(db) == {"fresh"}
    cur = db.cursor()
    # The pruned hour was rebuilt first, then sealed: its 15 requests are still counted.
    assert cur.execute("SELECT source FROM rollup_hours ORDER BY hour").fetchall()[0] == ("sealed",)
    sealed = "SELECT sum(n) FROM {} WHERE hour < ?"
    old = [NOW - timedelta(days=6)]
    assert cur.execute(sealed.format("rollup_shapes"), old).fetchone()[0] == 15
    assert cur.execute(sealed.format("rollup_day_shapes"), old).fetchone()[0] == 15


def test_zero_days_keeps_a_table_forever(db):
    put(db, "ancient", 5, NOW - timedelta(days=900), rejects=1)
    result = retention.prune(db.connection, NOW, request_days=0, reject_days=1)
    assert "requests" not in result.deleted and result.deleted["rejects"] == 1
    assert prefixes(db) == {"ancient"}


def test_a_chunk_that_conflicts_with_another_delete_is_retried(db):
    put(db, "old", 20, NOW - timedelta(days=30))
    other = db.new_cursor()
    other.execute("BEGIN TRANSACTION")
    other.execute("DELETE FROM requests WHERE request_id = 'old-3'")  # not committed yet
    conflicted = threading.Event()

    class Seen(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if "conflicted" in record.getMessage():
                conflicted.set()

    handler, logger = Seen(), logging.getLogger("tokenshape.retention")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    out: list[tuple[int, int]] = []
    try:
        con = db.new_cursor()
        worker = threading.Thread(
            target=lambda: out.append(retention.prune_table(con, "requests", NOW))
        )
        worker.start()
        assert conflicted.wait(30)  # DuckDB refused the chunk while the other delete is open
        other.execute("ROLLBACK")
        worker.join(30)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        other.close()
    assert out == [(20, 1)]  # the retry took the whole day, the conflicting row included
    assert prefixes(db) == set()


def test_after_a_prune_the_dedupe_index_forgets_deleted_keys_and_keeps_the_rest(db):
    """The writer's in-memory key index is rebuilt while batches keep arriving: deleted keys
    leave it, stored and journaled ones (and those stored meanwhile) stay duplicates."""
    from app.storage.write.writer import Writer

    old, kept = NOW - timedelta(days=30), NOW - timedelta(hours=1)
    put(db, "old", 3000, old)
    put(db, "kept", 2000, kept)

    async def scenario() -> dict[str, int]:
        writer = Writer(db, flush_ms=0)
        await writer.start()
        try:
            assert len(writer._store.keys) == 5000
            await writer.submit(Batch("gw", "test", NOW, received_rows("journaled", 500, NOW)))
            result = await asyncio.to_thread(
                lambda: retention.prune(db.new_cursor(), NOW, request_days=7, reject_days=7)
            )
            assert result.deleted["requests"] == 3000
            # Batches land while the index is rebuilt, and must be remembered by it.
            during = asyncio.gather(
                *[
                    writer.submit(Batch("gw", "test", NOW, received_rows(f"during{k}", 100, NOW)))
                    for k in range(5)
                ]
            )
            size = await writer.reindex()
            await during
            again = {
                name: (
                    await writer.submit(Batch("gw", "test", NOW, received_rows(name, n, at)))
                ).accepted
                for name, n, at in (
                    ("kept", 2000, kept),
                    ("journaled", 500, NOW),
                    ("during0", 100, NOW),
                    ("during4", 100, NOW),
                    ("old", 3000, old),
                )
            }
            return {"size": size, **again}
        finally:
            await writer.stop()

    out = asyncio.run(scenario())
    # 2000 kept + 500 journaled + 500 written during the rebuild; the 3000 deleted are gone.
    assert out["size"] == 3000
    assert out["kept"] == out["journaled"] == out["during0"] == out["during4"] == 0
    assert out["old"] == 3000  # deleted keys are new again: the sender's re-send is stored


def test_the_rebuilt_index_keeps_journaled_rows_and_rows_stored_during_the_rebuild(db, tmp_path):
    """Step by step, with no mover running: rows still only in the journal, and rows written
    after the table was read, must both stay in the rebuilt index."""
    from app.storage.schema import REQUESTS_SCHEMA
    from app.storage.write.journal import Journal

    put(db, "old", 300, NOW - timedelta(days=30))
    put(db, "kept", 200, NOW - timedelta(hours=1))
    store = RequestStore(db.new_cursor(), journal=Journal(tmp_path / "j", REQUESTS_SCHEMA))
    store.write([Batch("gw", "test", NOW, received_rows("journaled", 50, NOW))])
    retention.prune(db.new_cursor(), NOW, request_days=7, reject_days=7)
    store.begin_reindex()
    hashes = store.live_hashes(db.new_cursor())
    store.write(
        [Batch("gw", "test", NOW, received_rows("late", 20, NOW))]
    )  # after the table was read
    assert store.finish_reindex(hashes) == 200 + 50 + 20
    for name, n, at in (
        ("kept", 200, NOW - timedelta(hours=1)),
        ("journaled", 50, NOW),
        ("late", 20, NOW),
    ):
        assert (
            store.write([Batch("gw", "test", NOW, received_rows(name, n, at))])[0].accepted == 0
        ), name
    assert (
        store.write([Batch("gw", "test", NOW, received_rows("old", 300, NOW))])[0].accepted == 300
    )
