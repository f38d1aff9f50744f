"""Migrated database files built once and copied: Alembic runs into a template, tests get copies.

A closed DuckDB file is self-contained (closing checkpoints its WAL), so a copy made with shutil
is the same database; opening a copy already at the newest revision skips Alembic (Database.open).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from app.storage.database import Database


def build_template(path: Path) -> Path:
    """Migrate a new database file at `path` with Alembic, close it, and return the path."""
    Database(path).open().close()
    assert_closed(path)
    return path


def assert_closed(path: Path) -> None:
    """A template must be a single closed file: no WAL beside it, no journal directory."""
    for leftover in (path.with_name(path.name + ".wal"), path.with_name(path.name + ".journal")):
        assert not leftover.exists(), f"{leftover} would be left behind by a copy of {path}"


def copy_database(template: Path, dest: Path) -> Path:
    """Copy a closed template database file to `dest` (its directory is created)."""
    assert_closed(template)
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, dest)
    return dest


def open_migrated(path: Path) -> Database:
    """Open `path` migrated to the newest revision (Database.open runs Alembic only if it is
    not there yet, as for a copy of a template)."""
    return Database(path).open()
