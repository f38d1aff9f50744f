"""Migrated database files built once and copied: Alembic runs into a template, tests get copies.

A closed DuckDB file is self-contained (closing checkpoints its WAL), so a copy made with shutil
is the same database. Opening a copy that is already at the newest revision skips Alembic.
"""

from __future__ import annotations

import shutil
from functools import cache
from pathlib import Path

from app.storage import migrate
from app.storage.database import Database


@cache
def head_revision() -> str:
    """The newest migration revision (read once per session)."""
    return migrate.head_revision()


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


def _revision(db: Database) -> str | None:
    try:
        rows = db.cursor().execute("SELECT version_num FROM alembic_version").fetchall()
    except Exception:  # no alembic_version table: never migrated
        return None
    return rows[0][0] if rows else None


def open_if_current(db: Database) -> Database:
    """Open `db` without Alembic when its file is already at the newest revision (as a copy of
    a template is), setting its revision as a migration would; otherwise leave it closed, for
    whoever opens it next to migrate it."""
    if not db.is_open and db.path.exists():
        db.open(run_migrations=False)
        revision = _revision(db)
        if revision == head_revision():
            db.revision = revision
        else:
            db.close()
    return db


def open_migrated(path: Path) -> Database:
    """Open `path` migrated to the newest revision, running Alembic only if it is not there yet."""
    db = open_if_current(Database(path))
    return db if db.is_open else db.open()
