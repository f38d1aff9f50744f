"""Opening the database file (app/storage/database): what is not a readable DuckDB file is
named in one line, and DuckDB never reaches the network to read it."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import duckdb
import pytest

from app.storage.database import Database, DatabaseUnreadable
from app.storage.offline import connect


def _duckdb_file(path):
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE t AS SELECT range AS a FROM range(200000)")
    con.close()
    return path.read_bytes()


def _sqlite(path):
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE t (a)")
    con.commit()
    con.close()


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (lambda p: p.write_bytes(b""), "the file is empty"),
        (lambda p: p.write_bytes(b"name,isl\nx,1\n" * 400), "without DuckDB's header"),
        (_sqlite, "it is a SQLite file"),
        (lambda p: p.write_bytes(b"PAR1" + b"\0" * 4096), "it is a Parquet file"),
        (
            lambda p: p.write_bytes(_duckdb_file(p.with_name("whole.duckdb"))[:20000]),
            "damaged, truncated or from a newer DuckDB",
        ),
    ],
    ids=["empty", "csv", "sqlite", "parquet", "truncated"],
)
def test_a_file_that_is_not_a_readable_duckdb_database_is_named_in_one_line(tmp_path, make, kind):
    path = tmp_path / "tokenshape.duckdb"
    make(path)
    before = path.read_bytes()
    with pytest.raises(DatabaseUnreadable) as err:
        Database(path).open()
    message = str(err.value)
    assert str(path) in message and kind in message and "\n" not in message
    assert "backup" in message  # what to do
    assert "download" not in message.lower()  # DuckDB did not try to fetch a scanner
    assert path.read_bytes() == before  # nothing written into the file


def test_duckdb_never_installs_or_auto_loads_an_extension():
    con = connect()
    settings = dict(
        con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('autoinstall_known_extensions', 'autoload_known_extensions')"
        ).fetchall()
    )
    assert settings == {
        "autoinstall_known_extensions": "false",
        "autoload_known_extensions": "false",
    }


def test_the_cli_answers_an_unreadable_database_with_one_line_and_exit_2(tmp_path):
    path = tmp_path / "tokenshape.duckdb"
    _sqlite(path)
    done = subprocess.run(
        [sys.executable, "-m", "app.cli", "goodput", "--db", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.startswith("error: ") and "SQLite" in done.stderr
    assert "Traceback" not in done.stderr
