"""Retention: exactly the rows past their age are deleted, a day per transaction, while ingest
goes on; the daily job keeps its schedule on a fake clock; `tokenshape prune` offline."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import msgspec
import pytest

from app.jobs.retention import NAP_S, RetentionJob
from app.storage import retention
from app.storage.batches import Batch, Reject
from app.storage.database import Database
from app.storage.write.store import RequestStore
from ingest.records import RecordIn, to_rows
from tests.conftest import serve
from tests.fixtures import batch, record

ROOT = Path(__file__).resolve().parents[1]
NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def put(db: Database, prefix: str, n: int, received_at: datetime, rejects: int = 0) -> None:
    """n requests (ids prefix-0..) and `rejects` rejects received at one moment."""
    started = (received_at - timedelta(minutes=1)).isoformat()
    recs = [msgspec.convert(record(i, prefix, started_at=started), RecordIn) for i in range(n)]
    rows, bad = to_rows(recs, list(range(n)), gateway="gw", received_at=received_at)
    assert not bad
    quarantined = [Reject(i, "isl", f"{prefix} bad", None) for i in range(rejects)]
    con = db.new_cursor()
    try:
        RequestStore(con).write([Batch("gw", "test", received_at, rows, quarantined)])
    finally:
        con.close()


def prefixes(db: Database, table: str = "requests") -> set[str]:
    """Which groups of rows are left, by request_id (or reject reason) prefix."""
    column, sep = ("request_id", "-") if table == "requests" else ("reason", " ")
    sql = f"SELECT DISTINCT split_part({column}, ?, 1) FROM {table}"
    return {r[0] for r in db.cursor().execute(sql, [sep]).fetchall()}


@pytest.fixture
def db(tmp_path: Path):
    with Database(tmp_path / "r.duckdb").open() as database:
        yield database


AGES = {  # group → age when NOW is the clock's time
    "fresh": timedelta(hours=1),
    "edge": timedelta(days=7),  # exactly the retention: not older, kept
    "week": timedelta(days=7, seconds=1),
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


def test_the_job_prunes_daily_on_a_fake_clock(db):
    put(db, "a", 4, NOW - timedelta(days=2, minutes=1))  # due at the first run
    put(db, "b", 3, NOW - timedelta(days=1, hours=1))  # due at the second
    put(db, "c", 2, NOW - timedelta(hours=1))  # due at the third
    put(db, "d", 1, NOW + timedelta(hours=1))  # never within three runs
    clock = [NOW]
    seen: list[tuple[datetime, frozenset[str]]] = []

    async def sleep(seconds: float) -> None:
        assert 0 < seconds <= NAP_S  # naps of at most an hour
        seen.append((clock[0], frozenset(prefixes(db))))
        clock[0] += timedelta(seconds=seconds)

    job = RetentionJob(
        db, request_days=2, reject_days=1, clock=lambda: clock[0], sleep=sleep, first_delay_s=60
    )
    asyncio.run(job.run(rounds=3))
    first = NOW + timedelta(seconds=60)
    assert clock[0] == first + timedelta(days=2)  # ran at +60 s, +1 day, +2 days: no drift
    assert job.runs == 3 and job.next == first + timedelta(days=3)
    left = {when: groups for when, groups in seen}
    assert left[NOW] == {"a", "b", "c", "d"}  # nothing before the first run
    assert left[first] == {"b", "c", "d"}
    assert left[first + timedelta(days=1)] == {"c", "d"}
    assert prefixes(db) == {"d"}
    assert isinstance(job.last, retention.PruneResult) and job.last.deleted["requests"] == 2


def test_ingest_answers_200_while_a_prune_deletes_a_large_table(settings):
    """The mover's inserts and the prune's deletes commit side by side (optimistic
    concurrency): no conflict reaches a client, no acknowledged row is lost."""
    from app.services.demo import generate

    now = datetime.now(UTC)
    with Database(settings.db).open() as db:
        store = RequestStore(db.new_cursor())
        for k in range(6):  # 1.2M rows received over the last 60 days
            rows = generate(200_000, days=60, seed=k + 1, end=now)
            store.write([Batch(f"old{k}", "demo", now, rows)])
        store.con.close()
        old = db.cursor().execute("SELECT count(*) FROM requests").fetchone()[0]
        due = retention.count_due(db.cursor(), "requests", now - timedelta(days=7))
    assert due > 900_000
    # The app's clock is pinned to `now`, so the prune's cut-off is the one counted above.
    gen = serve(settings.model_copy(update={"retention_days": 7}), clock=lambda: now)
    live = next(gen)
    try:
        token = live.token()
        codes: list[int] = []
        done = threading.Event()
        pruned: list[retention.PruneResult] = []

        def prune() -> None:
            try:
                pruned.append(live.app.state.runtime.retention.prune_now())
            finally:
                done.set()

        with live.client(token) as c:
            assert c.post("/v1/requests", json=batch(200, "new-first")).status_code == 200
            thread = threading.Thread(target=prune)
            thread.start()
            k = 0
            while not done.is_set() or k < 5:  # during the prune, then a few more
                r = c.post("/v1/requests", json=batch(200, f"new{k}"))
                codes.append(r.status_code)
                k += 1
            thread.join()
        assert set(codes) == {200} and pruned
        assert pruned[0].deleted["requests"] == due
        live.settle()
        assert live.scalar("SELECT count(*) FROM requests WHERE request_id LIKE 'new%'") == 200 * (
            k + 1
        )
        assert live.scalar("SELECT count(*) FROM requests") == old - due + 200 * (k + 1)
        assert live.scalar("SELECT min(received_at) FROM requests") >= now - timedelta(days=7)
        assert live.app.state.runtime.writer.state()["last_move_error"] is None
    finally:
        gen.close()


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSHAPE_")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_prune_cli_dry_run_then_for_real(tmp_path):
    path = tmp_path / "p.duckdb"
    now = datetime.now(UTC)
    with Database(path).open() as db:
        put(db, "new", 3, now - timedelta(days=1), rejects=1)
        put(db, "old", 5, now - timedelta(days=40), rejects=2)
    env = {"TOKENSHAPE_RETENTION_DAYS": "30", "TOKENSHAPE_REJECT_RETENTION_DAYS": "0"}
    dry = _cli("prune", "--dry-run", "--db", str(path), env=env)
    assert dry.returncode == 0, dry.stderr
    assert "requests: would delete 5 received before" in dry.stdout
    assert "(TOKENSHAPE_RETENTION_DAYS=30)" in dry.stdout
    assert "rejects: kept forever (TOKENSHAPE_REJECT_RETENTION_DAYS=0)" in dry.stdout
    done = _cli("prune", "--db", str(path), env=env)
    assert done.returncode == 0, done.stderr
    assert "requests: deleted 5 received before" in done.stdout and "MB after" in done.stdout
    with Database(path).open() as db:
        assert prefixes(db) == {"new"} and prefixes(db, "rejects") == {"new", "old"}
    off = _cli("prune", "--db", str(path), env={**env, "TOKENSHAPE_RETENTION_DAYS": "0"})
    assert off.returncode == 0 and "retention is off" in off.stdout


def test_prune_cli_while_the_server_holds_the_file_says_what_to_do(live):
    out = _cli("prune", "--db", str(live.database.path), env={})
    assert out.returncode == 2
    assert "is in use by" in out.stderr and "Stop it first" in out.stderr


def _rows(prefix: str, n: int, received_at: datetime):
    started = (received_at - timedelta(minutes=1)).isoformat()
    recs = [msgspec.convert(record(i, prefix, started_at=started), RecordIn) for i in range(n)]
    rows, bad = to_rows(recs, list(range(n)), gateway="gw", received_at=received_at)
    assert not bad
    return rows


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
            await writer.submit(Batch("gw", "test", NOW, _rows("journaled", 500, NOW)))
            result = await asyncio.to_thread(
                lambda: retention.prune(db.new_cursor(), NOW, request_days=7, reject_days=7)
            )
            assert result.deleted["requests"] == 3000
            # Batches land while the index is rebuilt, and must be remembered by it.
            during = asyncio.gather(
                *[
                    writer.submit(Batch("gw", "test", NOW, _rows(f"during{k}", 100, NOW)))
                    for k in range(5)
                ]
            )
            size = await writer.reindex()
            await during
            again = {
                name: (await writer.submit(Batch("gw", "test", NOW, _rows(name, n, at)))).accepted
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
    store.write([Batch("gw", "test", NOW, _rows("journaled", 50, NOW))])
    retention.prune(db.new_cursor(), NOW, request_days=7, reject_days=7)
    store.begin_reindex()
    hashes = store.live_hashes(db.new_cursor())
    store.write([Batch("gw", "test", NOW, _rows("late", 20, NOW))])  # after the table was read
    assert store.finish_reindex(hashes) == 200 + 50 + 20
    for name, n, at in (
        ("kept", 200, NOW - timedelta(hours=1)),
        ("journaled", 50, NOW),
        ("late", 20, NOW),
    ):
        assert store.write([Batch("gw", "test", NOW, _rows(name, n, at))])[0].accepted == 0, name
    assert store.write([Batch("gw", "test", NOW, _rows("old", 300, NOW))])[0].accepted == 300
