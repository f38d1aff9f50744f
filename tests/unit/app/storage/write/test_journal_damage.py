"""A damaged journal segment (app/storage/write/journal.salvage and the store's recovery):
every readable row is stored, the file is moved to the quarantine folder with a note of what
was lost, an ERROR names it, and the start never fails, whatever bytes are damaged."""

from __future__ import annotations

import itertools
import json
import logging

import pyarrow as pa
import pytest

from app.storage import quarantine
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.journal import Journal
from app.storage.write.store import RequestStore
from tests.support.database import copy_database, open_migrated
from tests.support.records import request_rows

BATCHES, ROWS = 4, 5


def _segment(jdir):
    """One closed segment of BATCHES appends of ROWS rows each (ids b<k>-r<i>)."""
    journal = Journal(jdir, REQUESTS_SCHEMA)
    for k in range(BATCHES):
        journal.append(request_rows([f"b{k}-r{i}" for i in range(ROWS)]))
    (segment,) = journal.rotate()
    return segment


def _ids(table: pa.Table | None) -> set[str]:
    return set() if table is None else set(table.column("request_id").to_pylist())


def test_an_intact_segment_and_a_torn_tail_are_no_damage(tmp_path):
    segment = _segment(tmp_path / "j")
    whole = Journal.salvage(segment, REQUESTS_SCHEMA)
    assert whole.problems == [] and len(_ids(whole.table)) == BATCHES * ROWS
    data = segment.read_bytes()
    segment.write_bytes(data[: len(data) - 60])  # a crash in the last append (no end marker)
    torn = Journal.salvage(segment, REQUESTS_SCHEMA)
    assert torn.problems == [] and len(_ids(torn.table)) == (BATCHES - 1) * ROWS


def test_invalid_utf8_in_one_row_costs_that_row_only(tmp_path):
    segment = _segment(tmp_path / "j")
    data = bytearray(segment.read_bytes())
    at = data.find(b"b2-r3")
    data[at : at + 2] = b"\xff\xfe"  # two bytes of a request id turned into invalid UTF-8
    segment.write_bytes(bytes(data))
    found = Journal.salvage(segment, REQUESTS_SCHEMA)
    assert found.lost_rows == 1 and len(_ids(found.table)) == BATCHES * ROWS - 1
    assert "1 of a batch's 5 rows are damaged" in found.problems[0]


def test_a_damaged_header_is_read_past_with_the_journals_schema(tmp_path):
    segment = _segment(tmp_path / "j")
    data = bytearray(segment.read_bytes())
    data[10:14] = b"\x00\xff\x00\xff"  # inside the schema message
    segment.write_bytes(bytes(data))
    found = Journal.salvage(segment, REQUESTS_SCHEMA)
    assert "header is unreadable" in found.problems[0]
    assert len(_ids(found.table)) == BATCHES * ROWS and found.lost_rows == 0


def test_damage_at_every_byte_range_costs_at_most_the_batch_it_hits(tmp_path):
    segment = _segment(tmp_path / "j")
    clean = segment.read_bytes()
    every = range(BATCHES * ROWS)
    silent_losses = []
    for at, flip in itertools.product(range(len(clean)), (0xFF, 0x01)):
        data = bytearray(clean)
        data[at] ^= flip  # every byte, as a whole byte and as one bit
        segment.write_bytes(bytes(data))
        found = Journal.salvage(segment, REQUESTS_SCHEMA)  # never raises
        rows = 0 if found.table is None else found.table.num_rows
        # A damaged byte costs at most the batch it is in (a damaged header costs nothing:
        # the batches are read with the journal's own schema).
        assert rows >= len(every) - ROWS, (at, flip, found.problems)
        if not found.problems and rows < len(every):
            silent_losses.append((at, flip))
    # A loss is always reported: rows never vanish with the segment called intact. (A flipped
    # bit inside a value can change it undetected: Arrow IPC carries no checksum.)
    assert silent_losses == []


def test_the_store_recovers_a_damaged_segment_quarantines_it_and_logs_an_error(
    db_template, tmp_path, caplog
):
    path = copy_database(db_template, tmp_path / "q.duckdb")
    jdir = tmp_path / "q.duckdb.journal"
    segment = _segment(jdir)
    data = bytearray(segment.read_bytes())
    at = data.find(b"b1-r0")
    data[at : at + 2] = b"\xc3\x28"  # invalid UTF-8: the example, in a request id
    segment.write_bytes(bytes(data))
    with caplog.at_level(logging.ERROR), open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=Journal(jdir, REQUESTS_SCHEMA))
        assert store.recovered == BATCHES * ROWS - 1
        stored = db.cursor().execute("SELECT count(*) FROM requests").fetchall()[0][0]
        assert stored == BATCHES * ROWS - 1
    assert not segment.exists()  # moved, not deleted
    folder = quarantine.folder_for(path)
    (damage,) = quarantine.open_damage(folder)
    assert (damage.recovered_rows, damage.lost_rows) == (BATCHES * ROWS - 1, 1)
    assert (folder / damage.name).read_bytes() == bytes(data)  # kept exactly as found
    assert json.loads((folder / f"{damage.name}.json").read_text())["acknowledged"] is False
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any(str(segment) in e and "1 rows lost" in e for e in errors)
    assert quarantine.acknowledge(folder) == 1 and quarantine.open_damage(folder) == []


@pytest.mark.parametrize("cut", ["empty", "garbage", "header-only"])
def test_a_segment_that_is_no_arrow_at_all_never_stops_the_start(db_template, tmp_path, cut):
    path = copy_database(db_template, tmp_path / "g.duckdb")
    jdir = tmp_path / "g.duckdb.journal"
    segment = _segment(jdir)
    head = segment.read_bytes()[:200]
    segment.write_bytes({"empty": b"", "garbage": b"not arrow\n" * 300, "header-only": head}[cut])
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=Journal(jdir, REQUESTS_SCHEMA))
        assert store.recovered == 0
    damaged = quarantine.open_damage(quarantine.folder_for(path))
    # Garbage is damage, kept and reported; an empty or header-only file is a segment cut
    # short before its first rows were acknowledged, and goes as before.
    assert len(damaged) == (1 if cut == "garbage" else 0)
    assert not segment.exists()
