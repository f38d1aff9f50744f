"""Backups while the server runs or from the file: one function for the API and the CLI."""

from __future__ import annotations

from datetime import datetime

from app.storage.backup import BackupBusy, BackupResult, backup_name, backup_to
from app.storage.database import Database

__all__ = ["BackupBusy", "BackupResult", "backup", "target_for"]


def target_for(db: Database, now: datetime):
    """Where a backup taken now goes (backups/ beside the database)."""
    return backup_name(db.path, now)


def backup(db: Database, now: datetime) -> BackupResult:
    """Copy every table as of one moment into a new file (on a cursor of its own)."""
    con = db.new_cursor()
    try:
        return backup_to(con, target_for(db, now))
    finally:
        con.close()
