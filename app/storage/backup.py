"""Backups while the server runs: one consistent snapshot of the open database into a new file.

DuckDB lets no second process open the file, so the copy is made by the process that holds it:
ATTACH a fresh file, `COPY FROM DATABASE` inside one transaction (a snapshot of every table at
one moment; the writer keeps committing meanwhile), DETACH, fsync, then rename into place and
fsync the directory, so a backup file is either complete or absent, and durable once written.
Backups hold the password hashes and the cookie-signing key: the folder is 0700, files 0600.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import duckdb

from app.storage.files import PRIVATE_FILE, fsync_dir, fsync_file, private_dir
from app.storage.rows import first_row

ALIAS = "tokenshape_backup"
_RUNNING = threading.Lock()  # one backup at a time per process


class BackupBusy(RuntimeError):
    """Another backup is being written right now."""


@dataclass(frozen=True)
class BackupResult:
    """Where the backup went and what it holds."""

    path: Path
    bytes: int
    requests: int
    seconds: float


def backup_dir(db_path: Path) -> Path:
    """Where backups of a database file go: `backups/` beside it."""
    return Path(db_path).resolve().parent / "backups"


def backup_name(db_path: Path, now: datetime) -> Path:
    """A new backup file's path, named for the database and the UTC time (-2, -3… when a
    backup of the same second exists)."""
    stem = f"{Path(db_path).stem}-{now:%Y%m%dT%H%M%SZ}"
    path, n = backup_dir(db_path) / f"{stem}.duckdb", 1
    while path.exists():
        n += 1
        path = path.with_name(f"{stem}-{n}.duckdb")
    return path


def _literal(text: str) -> str:
    # ATTACH takes no bound parameters; the path is ours (backup_name), quoted all the same.
    return "'" + text.replace("'", "''") + "'"


def _identifier(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def backup_to(con: duckdb.DuckDBPyConnection, target: Path) -> BackupResult:
    """Copy every table of the open database into the new file `target`, consistently."""
    target = Path(target)
    if target.exists():
        raise FileExistsError(f"{target} exists already; backups never overwrite a file")
    if not _RUNNING.acquire(blocking=False):
        raise BackupBusy("a backup is being written right now; wait for it to finish")
    started = time.perf_counter()
    partial = target.with_name(target.name + ".partial")
    try:
        private_dir(target.parent)
        partial.unlink(missing_ok=True)
        row = first_row(con, "SELECT current_database()")
        source = str(row[0]) if row else "main"
        con.execute(f"ATTACH {_literal(str(partial))} AS {ALIAS}")
        try:
            con.execute("BEGIN TRANSACTION")
            try:
                con.execute(f"COPY FROM DATABASE {_identifier(source)} TO {ALIAS}")
                row = first_row(con, f"SELECT count(*) FROM {ALIAS}.requests")
                con.execute("COMMIT")
            except BaseException:
                con.execute("ROLLBACK")
                raise
        finally:
            con.execute(f"DETACH {ALIAS}")  # closes the file: checkpointed, no .wal left
        requests = int(row[0]) if row else 0
        os.chmod(partial, PRIVATE_FILE)  # DuckDB made it; the umask is ours only after open()
        fsync_file(partial)
        os.replace(partial, target)
        fsync_dir(target.parent)
    except BaseException:
        partial.unlink(missing_ok=True)
        partial.with_name(partial.name + ".wal").unlink(missing_ok=True)
        raise
    finally:
        _RUNNING.release()
    return BackupResult(target, target.stat().st_size, requests, time.perf_counter() - started)
