"""The dedupe key index and key hashes (app/storage/write/keys)."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from app.storage.batches import Batch
from app.storage.write.keys import KeyIndex, key_hashes, stored_key_hashes
from app.storage.write.store import RequestStore
from tests.support.records import request_rows


def test_key_index_agrees_with_a_python_set_and_grows():
    rng = np.random.default_rng(3)
    initial = rng.integers(0, 2**63, 1000, dtype=np.uint64)
    idx = KeyIndex(initial)
    truth = set(initial.tolist())
    # Full-range hashes, small integers and one repeated high half: every bit must count,
    # or keys crowd into a few slots; batches hold repeats and keys already stored.
    batches = [
        rng.integers(0, 2**64 - 1, 137, dtype=np.uint64),
        np.arange(0, 5000, dtype=np.uint64),
        (np.uint64(0xABCD) << np.uint64(48)) + np.arange(3000, dtype=np.uint64),
        np.arange(0, 5000, 2, dtype=np.uint64),
    ]
    for batch in batches:
        idx.add(batch)
        truth |= {1 if k == 0 else k for k in batch.tolist()}  # 0 is stored as 1
    fresh = rng.integers(2**63, 2**64 - 1, 3000, dtype=np.uint64)  # the writer's screened keys
    idx.add(fresh, known_new=True)
    truth |= set(fresh.tolist())
    assert len(idx) == len(truth)
    assert 2 * len(idx) <= len(idx._slots)  # at most half full after growing
    stored = np.array(sorted(truth), dtype=np.uint64)
    assert idx.contains(stored).all()
    absent = rng.integers(2**62, 2**63, 2000, dtype=np.uint64)  # none of the above
    absent = absent[~np.isin(absent, stored)]
    assert not idx.contains(absent).any()
    assert idx.contains(np.array([0], dtype=np.uint64)).tolist() == [True]  # a candidate
    assert not KeyIndex().any_of(np.array([5], dtype=np.uint64))
    # A reindex builds from the table's keys plus those recorded meanwhile: they overlap.
    assert len(KeyIndex(np.concatenate([initial, initial[:300]]))) == len(initial)


def test_key_hashes_match_for_rows_and_the_stored_table(fresh_db, tmp_path, monkeypatch):
    """The index is rebuilt at start from the table with the hash the writer uses on batches
    (Python's, salted per process): both must agree row for row."""
    now = datetime.now(UTC)
    rows = request_rows([f"id-{i}" for i in range(1501)])
    with fresh_db(tmp_path / "kh.duckdb") as db:
        RequestStore(db.new_cursor()).write([Batch("g", "t", now, rows)])
        cur = db.new_cursor()
        table = cur.sql("SELECT gateway, request_id FROM requests ORDER BY rowid").to_arrow_table()
        monkeypatch.setattr("app.storage.write.keys._SCAN_ROWS", 100)  # read in 16 slices
        assert sorted(stored_key_hashes(cur).tolist()) == sorted(key_hashes(table).tolist())
        assert key_hashes(rows).tolist() == key_hashes(table).tolist()
        assert len(set(key_hashes(rows).tolist())) == rows.num_rows


def test_a_key_index_that_fails_to_grow_keeps_every_key(monkeypatch):
    """Growing builds the new table aside: a failure midway (memory) must not leave an empty
    or half-filled table behind, which would let duplicates of stored keys through."""
    rng = np.random.default_rng(7)
    stored = rng.integers(1, 2**63, 30_000, dtype=np.uint64)
    index = KeyIndex(stored)
    size = len(index)

    def out_of_memory(values):
        raise MemoryError

    monkeypatch.setattr("app.storage.write.keys._run_starts", out_of_memory)
    more = rng.integers(1, 2**63, 40_000, dtype=np.uint64)
    try:
        index.add(more, known_new=True)  # past half full: it must grow
    except MemoryError:
        pass
    else:
        raise AssertionError("the grow was expected to fail")
    assert len(index) == size
    assert index.contains(stored).all()
