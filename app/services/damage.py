"""Damaged files in the quarantine folder: what health and /metrics show, and the operator's
acknowledgement that clears them (the files stay until the operator removes them)."""

from __future__ import annotations

from app.storage import quarantine
from app.storage.database import Database
from app.storage.quarantine import Damage

__all__ = ["Damage", "acknowledge", "open_damage"]


def open_damage(db: Database) -> list[Damage]:
    """Quarantined units of this database no operator has acknowledged."""
    return quarantine.open_damage(quarantine.folder_for(db.path))


def acknowledge(db: Database, name: str | None = None) -> int:
    """Acknowledge one quarantined unit by name, or all; how many were acknowledged."""
    return quarantine.acknowledge(quarantine.folder_for(db.path), name)
