"""Moved journal segments are kept until a checkpoint has their rows in the database file
(issue 26, class 1): until then the rows are in DuckDB's WAL only, and a WAL damaged or cut
short must not lose acknowledged requests."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.storage import retention, rollups
from app.storage.batches import Batch
from app.storage.database import Database
from app.storage.recovery import recover
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.wal import layout_of
from app.storage.write.journal import Journal
from app.storage.write.store import RequestStore
from tests.support.database import copy_database, open_migrated
from tests.support.records import batch, request_rows

ROOT = Path(__file__).resolve().parents[5]
MOVES, PER_MOVE = 5, 100

# A server's writer that moves five flushes into DuckDB, one transaction each, and dies before
# any checkpoint: the rows are in the WAL and in the moved segments only.
_MOVE_AND_CRASH = f"""
import os, sys
from datetime import UTC, datetime
from pathlib import Path
sys.path.insert(0, sys.argv[2])
from app.storage.batches import Batch
from app.storage.database import Database
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.journal import Journal
from app.storage.write.store import RequestStore
from tests.support.records import request_rows
path = Path(sys.argv[1])
db = Database(path).open()
db.connection.execute("SET checkpoint_threshold = '1GB'")
journal = Journal(path.with_name(path.name + ".journal"), REQUESTS_SCHEMA)
store = RequestStore(db.new_cursor(), journal=journal)
mover = db.new_cursor()
for k in range({MOVES}):
    ids = [f"m{{k}}-{{i}}" for i in range({PER_MOVE})]
    store.write([Batch("g", "t", datetime.now(UTC), request_rows(ids))])
    store.move(mover)
os._exit(0)
"""


def _count(db: Database, what: str = "count(*)") -> int:
    return db.cursor().execute(f"SELECT {what} FROM requests").fetchone()[0]


def _journal(path: Path) -> Journal:
    return Journal(path.with_name(path.name + ".journal"), REQUESTS_SCHEMA)


def _write(store: RequestStore, ids: list[str], **kw) -> None:
    store.write([Batch("g", "t", datetime.now(UTC), request_rows(ids, **kw))])


@pytest.mark.parametrize("damage", ["payload", "cut"])
def test_rows_moved_before_a_damaged_wal_are_all_there_after_a_restart(
    db_template, tmp_path, damage
):
    path = copy_database(db_template, tmp_path / "w.duckdb")
    subprocess.run(
        [sys.executable, "-c", _MOVE_AND_CRASH, str(path), str(ROOT)], check=True, timeout=120
    )
    assert len(_journal(path).moved()) == MOVES and _journal(path).segments() == []
    wal = path.with_name(path.name + ".wal")
    data = bytearray(wal.read_bytes())
    cuts = layout_of(bytes(data)).cuts
    if damage == "payload":  # as tests/integration/test_damaged_database.py damages one
        # The biggest entry (a move's rows) in the WAL's second half.
        i = max(range(len(cuts) // 2, len(cuts) - 1), key=lambda k: cuts[k + 1] - cuts[k])
        middle = (cuts[i] + cuts[i + 1]) // 2
        data[middle : middle + 16] = b"\x5a" * 16
    else:  # the WAL's last transactions never reached the disk: DuckDB replays the rest
        data = data[: cuts[len(cuts) // 2]]
    wal.write_bytes(bytes(data))
    notes = recover(path)
    with open_migrated(path) as db:
        before = _count(db)
        assert 0 < before < MOVES * PER_MOVE  # the damage did cost moved rows
        store = RequestStore(db.new_cursor(), journal=_journal(path))
        assert _count(db) == _count(db, "count(DISTINCT request_id)") == MOVES * PER_MOVE
        assert store.recovered == MOVES * PER_MOVE - before
        assert store.unmoved_rows == 0
        assert len(_journal(path).moved()) == MOVES  # kept: the replay is in the WAL only
    if damage == "payload":
        (note,) = notes
        assert note.kind == "database WAL" and "are lost" in note.problem
        assert "stored again from it at this start" in note.problem
    else:
        assert notes == []  # a WAL that ends early reads as a crash's: nothing to quarantine


def test_moved_segments_are_deleted_once_a_checkpoint_has_their_rows(db_template, tmp_path):
    path = copy_database(db_template, tmp_path / "c.duckdb")
    with open_migrated(path) as db:
        journal = _journal(path)
        store = RequestStore(db.new_cursor(), journal=journal)
        mover = db.new_cursor()
        _write(store, ["a", "b"])
        store.move(mover)
        first = journal.moved()
        assert len(first) == 1 and journal.segments() == []  # moved, kept
        _write(store, ["c"])
        store.move(mover)
        assert len(journal.moved()) == 2  # no checkpoint since either move
        db.cursor().execute("CHECKPOINT")  # as DuckDB's own, at 16 MB of WAL, would
        _write(store, ["d"])
        store.move(mover)
        (third,) = journal.moved()  # the two before the checkpoint are gone
        assert third not in first
        assert _count(db) == 4 and store.unmoved_rows == 0
        store.close()  # the writer stopping: its checkpoint lets the last one go too
        assert journal.moved() == [] and journal.segments() == []
        mover.close()


@pytest.mark.parametrize("bound", ["keep_bytes", "keep_s"])
def test_past_its_bound_the_mover_checkpoints_itself(db_template, tmp_path, bound):
    path = copy_database(db_template, tmp_path / "b.duckdb")
    with open_migrated(path) as db:
        journal = _journal(path)
        store = RequestStore(db.new_cursor(), journal=journal)
        mover = db.new_cursor()
        _write(store, ["a"])
        store.move(mover)
        assert len(journal.moved()) == 1  # under both bounds: kept
        setattr(store, bound, 0)
        _write(store, ["b"])
        store.move(mover)
        assert journal.moved() == [] and journal.segments() == []
        assert not path.with_name(path.name + ".wal").exists()  # checkpointed: DuckDB deleted it
        assert _count(db) == 2
        mover.close()


def test_replaying_moved_segments_stores_no_row_twice(db_template, tmp_path):
    path = copy_database(db_template, tmp_path / "r.duckdb")
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=_journal(path))
        mover = db.new_cursor()
        _write(store, ["a", "b", "c"])
        store.move(mover)
        mover.close()
    # Closed without the writer's checkpoint: DuckDB's own at close stored the rows in the
    # file, and the moved segment is still there.
    (moved,) = _journal(path).moved()
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=_journal(path))
        assert store.recovered == 0
        assert _count(db) == _count(db, "count(DISTINCT request_id)") == 3
    # A rename lost in a power cut: the segment looks never moved, and is replayed as such.
    moved.rename(moved.with_name(moved.name.replace("moved-", "segment-")))
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=_journal(path))
        assert store.recovered == 0 and _count(db) == 3
        assert _journal(path).segments() == [] and len(_journal(path).moved()) == 1


def _moved(db, path, ids: list[str]):
    """A store over `path`'s journal with rows `ids` written and moved; the mover's cursor."""
    store = RequestStore(db.new_cursor(), journal=_journal(path))
    mover = db.new_cursor()
    _write(store, ids)
    store.move(mover)
    return mover


def test_moved_rows_retention_removed_since_are_not_stored_again(db_template, tmp_path):
    """Retention deletes an hour's raw rows into its sealed rollups: a moved segment replayed
    after it must not bring them back, or the rollups would count them twice."""
    path = copy_database(db_template, tmp_path / "p.duckdb")
    with open_migrated(path) as db:
        mover = _moved(db, path, ["a", "b"])
        rollups.rebuild_all(mover)  # a dirty hour is not pruned until rebuilt
        later = datetime.now(UTC) + timedelta(days=2)
        pruned = retention.prune(mover, later, request_days=1, reject_days=0)
        assert pruned.deleted["requests"] == 2 and _count(db) == 0
        mover.close()
    assert len(_journal(path).moved()) == 1  # the prune's checkpoint came before a move
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=_journal(path))
        assert store.recovered == 0 and _count(db) == 0


def test_moved_segments_are_not_replayed_into_a_backup_restored_in_the_files_place(
    db_template, tmp_path
):
    path = copy_database(db_template, tmp_path / "b.duckdb")
    with open_migrated(path) as db:
        mover = _moved(db, path, ["a", "b"])
        mover.close()
    # The documented restore: the file moved aside, an older backup (here: empty) copied in.
    path.rename(tmp_path / "aside.duckdb")
    copy_database(db_template, path)
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=_journal(path))
        assert store.recovered == 0 and _count(db) == 0  # exactly the backup
        store.close()
        assert _journal(path).moved() == []


def test_the_backlog_figures_do_not_count_kept_segments(live, ingest):
    ingest.post("/v1/requests", json=batch(3))
    live.settle()
    journal = _journal(live.database.path)
    assert journal.moved() and journal.segments() == []  # kept until a checkpoint
    assert ingest.get("/api/health").json()["writer"]["journal_rows"] == 0
    assert "tokenshape_writer_journal_rows 0.0" in ingest.get("/metrics").text
