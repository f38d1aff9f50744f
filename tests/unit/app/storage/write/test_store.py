"""The request store (app/storage/write/store): dedupe across batches, gateways and restarts."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from app.storage import schema
from app.storage.batches import Batch, WriteResult
from app.storage.write.journal import Journal
from app.storage.write.keys import key_hashes
from app.storage.write.store import RequestStore
from ingest.formats.native import parse
from tests.support.database import copy_database, open_migrated
from tests.support.records import request_rows


def test_store_dedupes_across_batches_gateways_and_restarts(db_template, tmp_path):
    path = copy_database(db_template, tmp_path / "s.duckdb")
    now = datetime.now(UTC)
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor())
        results = store.write(
            [
                Batch("g", "t", now, request_rows(["a", "b", "a"])),
                Batch("g", "t", now, request_rows(["b", "c"])),
                Batch("h", "t", now, request_rows(["a"], gateway="h")),
            ]
        )
        assert [(r.accepted, r.duplicates) for r in results] == [(2, 1), (1, 1), (1, 0)]
    with open_migrated(path) as db:  # the index is rebuilt from the file
        store = RequestStore(db.new_cursor())
        (r,) = store.write([Batch("g", "t", now, request_rows(["a", "c", "d"]))])
        assert (r.accepted, r.duplicates) == (1, 2)
        assert db.cursor().execute("SELECT count(*) FROM requests").fetchone()[0] == 5


def test_failed_flush_rolls_back_everything(fresh_db, tmp_path):
    now = datetime.now(UTC)
    with fresh_db(tmp_path / "f.duckdb") as db:
        store = RequestStore(db.new_cursor())
        broken = request_rows(["x"]).drop_columns(["model"])  # the insert will fail
        try:
            store.write([Batch("g", "t", now, request_rows(["ok"])), Batch("g", "t", now, broken)])
        except Exception:
            pass
        else:
            raise AssertionError("the broken batch should fail the flush")
        assert db.cursor().execute("SELECT count(*) FROM requests").fetchone()[0] == 0
        (r,) = store.write([Batch("g", "t", now, request_rows(["ok"]))])
        assert r.accepted == 1  # the rolled-back key was not remembered as stored


def test_screen_passes_only_flushes_whose_rows_are_all_new(fresh_db, tmp_path):
    """The writer's event-loop check: all_new when nothing can be a duplicate (else write()
    checks row by row, with the same answers as without the screen)."""
    now = datetime.now(UTC)
    with fresh_db(tmp_path / "sc.duckdb") as db:
        store = RequestStore(db.new_cursor())
        fresh = [
            Batch("g", "t", now, request_rows(["a", "b"])),
            Batch("g", "t", now, request_rows(["c"])),
        ]
        new = store.screen(fresh)
        assert new.all_new and [len(h) for h in new.hashes] == [2, 1]
        assert [r.accepted for r in store.write(fresh, new)] == [2, 1]
        # A key stored before, a key twice in one flush, a key in two batches: no pass.
        assert not store.screen([Batch("g", "t", now, request_rows(["b", "z"]))]).all_new
        assert not store.screen([Batch("g", "t", now, request_rows(["y", "y"]))]).all_new
        twice = [
            Batch("g", "t", now, request_rows(["x"])),
            Batch("g", "t", now, request_rows(["x"])),
        ]
        assert not store.screen(twice).all_new
        assert [(r.accepted, r.duplicates) for r in store.write(twice)] == [(1, 0), (0, 1)]
        # Only rejects, no rows: nothing to hash, and the screen passes.
        only_rejects = store.screen([Batch("g", "t", now, None)])
        assert only_rejects.all_new and only_rejects.hashes == [None]


def test_the_parser_hands_the_writer_the_same_key_hashes_it_would_compute(fresh_db, tmp_path):
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
    with fresh_db(tmp_path / "ph.duckdb") as db:
        store = RequestStore(db.new_cursor())
        batch = Batch("gw", "native", now, parsed.rows, [], parsed.hashes)
        assert store.write([batch]) == [WriteResult(3, 0, 0)]
        again = parse(body, ndjson=True, gateway="gw", received_at=now, max_items=100)
        batch = Batch("gw", "native", now, again.rows, [], again.hashes)
        assert store.write([batch]) == [WriteResult(0, 3, 0)]
        # Hashes that do not fit the rows (a caller's mistake) are not trusted.
        wrong = Batch("gw", "native", now, request_rows(["x", "y"], gateway="gw"), [], again.hashes)
        assert store.write([wrong]) == [WriteResult(2, 0, 0)]


def test_keys_indexed_later_still_dedupe_before_and_after_they_are_indexed(fresh_db, tmp_path):
    """The server answers a flush before its keys reach the dedupe index. Until they do, the
    screen must not call a flush all-new, and a write must index them before it dedupes."""
    now = datetime.now(UTC)
    with fresh_db(tmp_path / "il.duckdb") as db:
        journal = Journal(tmp_path / "il.journal", schema.REQUESTS_SCHEMA)
        store = RequestStore(db.new_cursor(), journal=journal)
        first = [Batch("g", "t", now, request_rows(["a", "b"]))]
        assert store.write(first, index_later=True) == [WriteResult(2, 0, 0)]
        assert len(store.keys) == 0  # durable in the journal, not indexed yet
        again = [Batch("g", "t", now, request_rows(["b", "c"]))]
        assert not store.screen(again).all_new  # "b" is unindexed: not sure it is new
        assert store.write(again, store.screen(again)) == [WriteResult(1, 1, 0)]
        assert len(store.keys) == 3  # the write indexed "a", "b" first, then "c"
        store.write([Batch("g", "t", now, request_rows(["d"]))], index_later=True)
        store.index_pending()
        assert len(store.keys) == 4
        fresh = [Batch("g", "t", now, request_rows(["e"]))]
        assert store.screen(fresh).all_new
        assert not store.screen([Batch("g", "t", now, request_rows(["d"]))]).all_new
        journal.close()
