"""Recovering the database file and its WAL at start (app/storage/recovery and wal): what is
damaged is quarantined with a note, what reads is kept, a backup fills in the rest, and a file
that is only newer, or not writable, is refused in one line and left as it was."""

from __future__ import annotations

import sqlite3
import struct
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from app.storage import migrate, quarantine, users
from app.storage.backup import backup_name, backup_to
from app.storage.database import Database, DatabaseReadOnly, DatabaseTooNew
from app.storage.recovery import recover
from app.storage.wal import checksum, layout_of, read_header
from tests.support.database import copy_database
from tests.support.records import batch, store

PASSWORD = "correct horse battery"

# -- the WAL's framing ---------------------------------------------------------------------------

HEADER = b"\x64\x00\x62\x65\x00\x02\x66\x00\x10" + b"\x01" * 16 + b"\x67\x00\x02\xff\xff"


def _entry(payload: bytes) -> bytes:
    return struct.pack("<QQ", len(payload), checksum(payload)) + payload


# Each payload begins as DuckDB's do: field 100, the entry's type.
ENTRIES = [_entry(b"\x64\x00\x19" + bytes([i + 1]) * (40 + i)) for i in range(6)]
WAL = HEADER + b"".join(ENTRIES)


def test_an_intact_wal_is_read_entry_by_entry():
    layout = layout_of(WAL)
    assert layout.problem is None and layout.cuts[-1] == len(WAL) and len(layout.cuts) == 6


@pytest.mark.parametrize(
    "tail",
    [WAL[:-10], WAL[: -len(ENTRIES[-1]) + 5], WAL + bytes(3000)],
    ids=["torn-payload", "torn-size", "zeroed-tail"],
)
def test_a_torn_tail_is_a_crash_not_damage(tail):
    layout = layout_of(tail)
    assert layout.problem is None and len(layout.cuts) in (5, 6)


@pytest.mark.parametrize("size", [0, 1 << 50], ids=["zero", "absurd"])
def test_a_damaged_entry_size_is_damage_duckdb_would_pass_over(size):
    at = len(HEADER) + len(ENTRIES[0]) + len(ENTRIES[1])
    damaged = WAL[:at] + struct.pack("<Q", size) + WAL[at + 8 :]
    layout = layout_of(damaged)
    assert layout.problem == f"the entry at byte {at:,} states a size of {size:,} bytes"
    assert layout.cuts == layout_of(WAL).cuts[:2]  # the entries before it are kept


def test_a_size_damaged_to_run_past_the_end_is_told_from_a_torn_tail():
    # DuckDB reads such a size as a torn last write and drops the rest in silence; the whole
    # entries after it show it is damage.
    at = len(HEADER) + len(ENTRIES[0])
    damaged = WAL[:at] + b"\xff\xff" + WAL[at + 2 :]  # the size's low bytes
    layout = layout_of(damaged)
    assert layout.problem is not None and "past the end of the file" in layout.problem
    assert f"a whole entry follows at byte {at + len(ENTRIES[1]):,}" in layout.problem
    assert layout.cuts == layout_of(WAL).cuts[:1]


def test_duckdbs_checksum_is_computed_as_duckdb_does(tmp_path):
    path = tmp_path / "c.duckdb"
    con = duckdb.connect(str(path))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    con.execute("CREATE TABLE t AS SELECT range AS a, 'x' || range AS b FROM range(1000)")
    con.execute("INSERT INTO t VALUES (1, 'a payload of an odd length')")
    data = path.with_name(path.name + ".wal").read_bytes()  # committed: on disk already
    con.close()
    pos, _ = read_header(data)
    layout = layout_of(data)
    assert layout.problem is None and layout.cuts[-1] == len(data) and len(layout.cuts) >= 3
    for end in layout.cuts:
        stored = int.from_bytes(data[pos + 8 : pos + 16], "little")
        assert checksum(data[pos + 16 : end]) == stored
        pos = end


def test_a_damaged_header_is_replaced_by_a_bare_one_before_the_same_entries():
    damaged = b"\x00\x99" + WAL[2:]
    layout = layout_of(damaged)
    assert layout.problem is not None and "header is unreadable" in layout.problem
    assert layout.body == b"\x64\x00\x62\x65\x00\x02\xff\xff" + b"".join(ENTRIES)
    assert layout.cuts[-1] == len(layout.body) and len(layout.cuts) == 6


def test_a_wal_torn_in_its_first_write_is_no_damage():
    assert layout_of(HEADER[:20]).problem is None


# -- the file ------------------------------------------------------------------------------------


@pytest.fixture
def database(tmp_path, db_template) -> Path:
    """A real database with a user and 3,000 requests, and a backup of it with 1,000."""
    path = copy_database(db_template, tmp_path / "t.duckdb")
    with Database(path).open() as db:
        users.add(db.cursor(), "ada", PASSWORD, "admin")
        store(db, batch(1000, prefix="early"))
        backup_to(db.connection, backup_name(path, datetime(2026, 11, 1, tzinfo=UTC)))
        store(db, batch(2000, prefix="late"))
    return path


def _count(path: Path, sql: str = "SELECT count(*) FROM requests") -> int:
    with Database(path).open() as db:
        return db.cursor().execute(sql).fetchone()[0]


def test_a_healthy_file_is_only_read(database):
    before, stamp = database.read_bytes(), database.stat().st_mtime_ns
    assert recover(database) == []
    assert database.read_bytes() == before and database.stat().st_mtime_ns == stamp
    assert not quarantine.folder_for(database).exists()
    assert sorted(p.name for p in database.parent.iterdir()) == ["backups", "t.duckdb"]


def _block_of(path: Path, table: str) -> int:
    """The file offset of a data block of `table` (DuckDB: 3 headers of 4 KiB, 256 KiB blocks)."""
    con = duckdb.connect(str(path), read_only=True)
    try:
        (block,) = con.execute(
            "SELECT max(block_id) FROM pragma_storage_info(?) WHERE block_id >= 0", [table]
        ).fetchone()
    finally:
        con.close()
    return 3 * 4096 + block * 262_144


def test_a_damaged_data_block_costs_its_rows_and_every_other_table_is_kept(database):
    data = bytearray(database.read_bytes())
    at = _block_of(database, "requests")
    data[at + 100 : at + 164] = b"\x07" * 64
    database.write_bytes(bytes(data))
    (damage,) = recover(database)
    assert damage.kind == "database file" and damage.original == str(database)
    assert "table requests cannot be read (Corrupt database file" in damage.problem
    assert "the backup t-20261101T000000Z.duckdb was restored under it" in damage.problem
    stored = _count(database)
    assert 1000 <= stored < 3000  # the backup's thousand at least, and what read
    assert damage.recovered_rows == stored
    assert damage.lost_rows is not None and stored + damage.lost_rows >= 3000
    with Database(database).open() as db:
        assert [u.name for u in users.list_users(db.cursor())] == ["ada"]  # read from the file
        assert db.revision == migrate.head_revision()
        dirty = db.cursor().execute("SELECT count(*) FROM rollup_dirty").fetchone()[0]
    assert dirty  # the rollups are rebuilt from the raw rows now stored
    kept = quarantine.folder_for(database) / damage.name
    assert kept.read_bytes() == bytes(data)


def test_the_newest_backup_that_reads_is_restored_and_the_others_are_named(database):
    backups = database.parent / "backups"
    (older,) = backups.glob("*.duckdb")
    newer = backups / "t-20261102T000000Z.duckdb"
    newer.write_bytes(b"\0" * 8192)  # the newest backup is damaged
    database.write_bytes(b"")  # and the database file empty
    (damage,) = recover(database)
    assert "the file is empty" in damage.problem and "nothing in it could be read" in damage.problem
    assert f"the backup {older.name} was restored under it (1,000 requests" in damage.problem
    assert f"backups not usable: {newer.name} (" in damage.problem
    assert damage.lost_rows is None  # what came after the backup cannot be counted
    assert _count(database) == 1000
    assert newer.exists() and older.exists()  # backups are never moved or changed


@pytest.mark.parametrize("kind", ["sqlite", "csv"])
def test_a_file_of_another_format_is_moved_aside_for_an_empty_database(tmp_path, kind):
    path = tmp_path / "t.duckdb"
    if kind == "sqlite":
        con = sqlite3.connect(path)
        con.execute("CREATE TABLE t (a)")
        con.commit()
        con.close()
    else:
        path.write_bytes(b"name,isl\nx,1\n" * 400)
    before = path.read_bytes()
    (damage,) = recover(path)
    assert ("it is a SQLite file" if kind == "sqlite" else "without DuckDB's header") in (
        damage.problem
    )
    assert "no readable backup in backups/" in damage.problem
    assert _count(path) == 0
    assert (quarantine.folder_for(path) / damage.name).read_bytes() == before
    assert [d.name for d in quarantine.open_damage(quarantine.folder_for(path))] == [damage.name]


def test_a_newer_schema_is_refused_and_left_as_it_is(database):
    con = duckdb.connect(str(database))
    con.execute("UPDATE alembic_version SET version_num = 'zzzz_newer'")
    con.close()
    before = database.read_bytes()
    for attempt in (lambda: recover(database), lambda: Database(database).open()):
        with pytest.raises(DatabaseTooNew) as err:
            attempt()
        message = str(err.value)
        assert "schema revision 'zzzz_newer'" in message and migrate.head_revision() in message
        assert "\n" not in message
    with pytest.raises(DatabaseTooNew):
        Database(database, read_only=True).open(run_migrations=False)
    assert database.read_bytes() == before and not quarantine.folder_for(database).exists()


def test_a_repair_cut_short_by_a_crash_is_finished(database):
    ready = database.with_name(database.name + ".restored")
    database.rename(ready)  # the new file was ready and the damaged one already moved aside
    assert recover(database) == []
    assert database.exists() and not ready.exists() and _count(database) == 3000


def test_a_file_it_may_not_write_is_refused_in_one_line(database):
    if subprocess.run(["chattr", "+i", str(database)], capture_output=True).returncode:
        pytest.skip("chattr +i is not available here")
    try:
        for attempt in (lambda: recover(database), lambda: Database(database).open()):
            with pytest.raises(DatabaseReadOnly) as err:
                attempt()
            assert str(err.value).startswith(f"{database} cannot be written: {database} is ")
        Database(database, read_only=True).open(run_migrations=False).close()  # reads do
    finally:
        subprocess.run(["chattr", "-i", str(database)], check=True)


def test_damage_at_every_byte_range_of_the_wal_is_recovered_or_reported(database):
    con = duckdb.connect(str(database))
    con.execute("PRAGMA disable_checkpoint_on_shutdown")
    for k in range(5):  # five transactions of 100 rows each, only in the WAL
        con.execute(
            "INSERT INTO requests SELECT * REPLACE ('wal' AS gateway, "
            f"'w{k}-' || request_id AS request_id) FROM requests WHERE gateway <> 'wal' LIMIT 100"
        )
    con.close()
    wal = database.with_name(database.name + ".wal")
    original, pristine = wal.read_bytes(), database.read_bytes()
    ranges = 16
    for i in range(ranges):
        start = i * len(original) // ranges
        data = bytearray(original)
        data[start : start + 16] = bytes((b * 7 + i + 1) % 256 for b in range(16))
        database.write_bytes(pristine)
        wal.write_bytes(bytes(data))
        found = recover(database)
        rows = _count(database, "SELECT count(*) FROM requests WHERE gateway = 'wal'")
        assert rows % 100 == 0  # whole transactions only
        if rows < 500:  # never a silent loss
            (damage,) = found
            assert damage.kind == "database WAL" and damage.recovered_rows == rows, (i, found)
        for note in quarantine.folder_for(database).iterdir():
            note.unlink()
