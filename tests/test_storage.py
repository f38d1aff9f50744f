"""Migrations, the dedupe index and the store, on a real DuckDB file."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import numpy as np

from app.storage import migrate, schema
from app.storage.batches import Batch, WriteResult
from app.storage.database import Database
from app.storage.write.journal import Journal
from app.storage.write.keys import KeyIndex, key_hashes, stored_key_hashes
from app.storage.write.store import RequestStore
from ingest.formats.native import parse
from ingest.records import RecordIn, to_rows


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


def _rows(ids: list[str], gateway: str = "g"):
    recs = [RecordIn(model="m", isl=1, osl=1, request_id=i) for i in ids]
    rows, rejects = to_rows(
        recs, list(range(len(ids))), gateway=gateway, received_at=datetime.now(UTC)
    )
    assert not rejects
    return rows


def test_store_dedupes_across_batches_gateways_and_restarts(tmp_path):
    path = tmp_path / "s.duckdb"
    now = datetime.now(UTC)
    with Database(path).open() as db:
        store = RequestStore(db.new_cursor())
        results = store.write(
            [
                Batch("g", "t", now, _rows(["a", "b", "a"])),
                Batch("g", "t", now, _rows(["b", "c"])),
                Batch("h", "t", now, _rows(["a"], gateway="h")),
            ]
        )
        assert [(r.accepted, r.duplicates) for r in results] == [(2, 1), (1, 1), (1, 0)]
    with Database(path).open() as db:  # the index is rebuilt from the file
        store = RequestStore(db.new_cursor())
        (r,) = store.write([Batch("g", "t", now, _rows(["a", "c", "d"]))])
        assert (r.accepted, r.duplicates) == (1, 2)
        assert db.cursor().execute("SELECT count(*) FROM requests").fetchone()[0] == 5


def test_failed_flush_rolls_back_everything(tmp_path):
    now = datetime.now(UTC)
    with Database(tmp_path / "f.duckdb").open() as db:
        store = RequestStore(db.new_cursor())
        broken = _rows(["x"]).drop_columns(["model"])  # the insert will fail
        try:
            store.write([Batch("g", "t", now, _rows(["ok"])), Batch("g", "t", now, broken)])
        except Exception:
            pass
        else:
            raise AssertionError("the broken batch should fail the flush")
        assert db.cursor().execute("SELECT count(*) FROM requests").fetchone()[0] == 0
        (r,) = store.write([Batch("g", "t", now, _rows(["ok"]))])
        assert r.accepted == 1  # the rolled-back key was not remembered as stored


def test_screen_passes_only_flushes_whose_rows_are_all_new(tmp_path):
    """The writer's event-loop check: all_new when nothing can be a duplicate (else write()
    checks row by row, with the same answers as without the screen)."""
    now = datetime.now(UTC)
    with Database(tmp_path / "sc.duckdb").open() as db:
        store = RequestStore(db.new_cursor())
        fresh = [Batch("g", "t", now, _rows(["a", "b"])), Batch("g", "t", now, _rows(["c"]))]
        new = store.screen(fresh)
        assert new.all_new and [len(h) for h in new.hashes] == [2, 1]
        assert [r.accepted for r in store.write(fresh, new)] == [2, 1]
        # A key stored before, a key twice in one flush, a key in two batches: no pass.
        assert not store.screen([Batch("g", "t", now, _rows(["b", "z"]))]).all_new
        assert not store.screen([Batch("g", "t", now, _rows(["y", "y"]))]).all_new
        twice = [Batch("g", "t", now, _rows(["x"])), Batch("g", "t", now, _rows(["x"]))]
        assert not store.screen(twice).all_new
        assert [(r.accepted, r.duplicates) for r in store.write(twice)] == [(1, 0), (0, 1)]
        # Only rejects, no rows: nothing to hash, and the screen passes.
        only_rejects = store.screen([Batch("g", "t", now, None)])
        assert only_rejects.all_new and only_rejects.hashes == [None]


def test_key_hashes_match_for_rows_and_the_stored_table(tmp_path, monkeypatch):
    """The index is rebuilt at start from the table with the hash the writer uses on batches
    (Python's, salted per process): both must agree row for row."""
    now = datetime.now(UTC)
    rows = _rows([f"id-{i}" for i in range(1501)])
    with Database(tmp_path / "kh.duckdb").open() as db:
        RequestStore(db.new_cursor()).write([Batch("g", "t", now, rows)])
        cur = db.new_cursor()
        table = cur.sql("SELECT gateway, request_id FROM requests ORDER BY rowid").to_arrow_table()
        monkeypatch.setattr("app.storage.write.keys._SCAN_ROWS", 100)  # read in 16 slices
        assert sorted(stored_key_hashes(cur).tolist()) == sorted(key_hashes(table).tolist())
        assert key_hashes(rows).tolist() == key_hashes(table).tolist()
        assert len(set(key_hashes(rows).tolist())) == rows.num_rows


def test_the_parser_hands_the_writer_the_same_key_hashes_it_would_compute(tmp_path):
    """The native parser hashes request ids while they are Python strings; those hashes must
    be key_hashes of its rows, in order, also when invalid records are left out, and the
    writer must dedupe by them exactly as by its own."""
    now = datetime.now(UTC)
    lines = [
        {"request_id": "a", "model": "m", "isl": 1, "osl": 1},
        {"request_id": "b", "model": "m", "isl": -1, "osl": 1},  # invalid: left out
        {"model": "m", "isl": 2, "osl": 2},  # no id: a content hash is its id
        {"request_id": "c", "model": "m", "isl": 3, "osl": 3, "ttft_ms": 9, "e2e_ms": 1},
        {"request_id": "d", "model": "m", "isl": 4, "osl": 4},
    ]
    body = "\n".join(json.dumps(x) for x in lines).encode()
    parsed = parse(body, ndjson=True, gateway="gw", received_at=now, max_items=100)
    assert parsed.rows.column("request_id").to_pylist()[::2] == ["a", "d"]
    assert parsed.rows.num_rows == 3 and len(parsed.rejects) == 2
    assert parsed.hashes is not None
    assert parsed.hashes.tolist() == key_hashes(parsed.rows).tolist()
    with Database(tmp_path / "ph.duckdb").open() as db:
        store = RequestStore(db.new_cursor())
        batch = Batch("gw", "native", now, parsed.rows, [], parsed.hashes)
        assert store.write([batch]) == [WriteResult(3, 0, 0)]
        again = parse(body, ndjson=True, gateway="gw", received_at=now, max_items=100)
        batch = Batch("gw", "native", now, again.rows, [], again.hashes)
        assert store.write([batch]) == [WriteResult(0, 3, 0)]
        # Hashes that do not fit the rows (a caller's mistake) are not trusted.
        wrong = Batch("gw", "native", now, _rows(["x", "y"], gateway="gw"), [], again.hashes)
        assert store.write([wrong]) == [WriteResult(2, 0, 0)]


def test_one_struct_conversion_builds_the_columns_a_conversion_per_field_builds():
    """The parser converts a batch's records to Arrow in one struct conversion; it must give
    exactly the columns of the conversion per field it falls back to (started_at as epoch
    seconds), for every kind of value the wire allows."""
    import msgspec

    from app.services.demo import generate
    from ingest import records

    demo = generate(300, seed=3).to_pylist()
    wire = [
        {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()} for row in demo
    ]
    wire += [
        {"model": "m", "isl": 0, "osl": 0},  # defaults, nulls, no request id
        {"model": "名前 🚀", "isl": 10_000_000, "osl": 1, "request_id": "é" * 256},
        {"model": "m", "isl": 1, "osl": 1, "token_gaps_ms": [], "stream": False},
        {"model": "m", "isl": 1, "osl": 1, "ttft_ms": 0, "e2e_ms": 1e300, "cached_tokens": 0},
        {"model": "m", "isl": 1, "osl": 1, "status": "cancelled", "error_type": "499"},
    ]
    recs = msgspec.json.decode(json.dumps(wire).encode(), type=list[RecordIn])
    whole = records._struct_columns(recs)
    assert whole is not None
    by_field = records._field_columns(recs)
    assert whole.keys() == by_field.keys()
    for name, column in whole.items():
        assert column is not None and column.equals(by_field[name]), name
    # An epoch-seconds start time cannot be text: field by field, started_at left to Python.
    mixed = recs + [RecordIn(model="m", isl=1, osl=1, started_at=1_764_000_000.5)]
    assert records._struct_columns(mixed) is None
    assert records._arrow_columns(mixed)["started_at"] is None


def test_keys_indexed_later_still_dedupe_before_and_after_they_are_indexed(tmp_path):
    """The server answers a flush before its keys reach the dedupe index. Until they do, the
    screen must not call a flush all-new, and a write must index them before it dedupes."""
    now = datetime.now(UTC)
    with Database(tmp_path / "il.duckdb").open() as db:
        journal = Journal(tmp_path / "il.journal", schema.REQUESTS_SCHEMA)
        store = RequestStore(db.new_cursor(), journal=journal)
        first = [Batch("g", "t", now, _rows(["a", "b"]))]
        assert store.write(first, index_later=True) == [WriteResult(2, 0, 0)]
        assert len(store.keys) == 0  # durable in the journal, not indexed yet
        again = [Batch("g", "t", now, _rows(["b", "c"]))]
        assert not store.screen(again).all_new  # "b" is unindexed: not sure it is new
        assert store.write(again, store.screen(again)) == [WriteResult(1, 1, 0)]
        assert len(store.keys) == 3  # the write indexed "a", "b" first, then "c"
        store.write([Batch("g", "t", now, _rows(["d"]))], index_later=True)
        store.index_pending()
        assert len(store.keys) == 4
        fresh = [Batch("g", "t", now, _rows(["e"]))]
        assert store.screen(fresh).all_new
        assert not store.screen([Batch("g", "t", now, _rows(["d"]))]).all_new
        journal.close()


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
