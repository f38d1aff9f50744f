"""Backups while the server runs or from the file: one function for the API and the CLI."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from app.storage.backup import BackupBusy, BackupResult, backup_name, backup_to
from app.storage.database import Database

__all__ = ["BackupBusy", "BackupResult", "backup", "target_for"]


def target_for(db: Database, now: datetime) -> Path:
    """Where a backup taken now goes (backups/ beside the database)."""
    return backup_name(db.path, now)


def backup(db: Database, target: Path) -> BackupResult:
    """Copy every table as of one moment into the new file `target` (on a cursor of its own)."""
    con = db.new_cursor()
    try:
        return backup_to(con, target)
    finally:
        con.close()
