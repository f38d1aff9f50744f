"""Retention on demand (`tokenshape prune`): the storage prune on the open database."""

from __future__ import annotations

from datetime import datetime

from app.storage import retention
from app.storage.database import Database
from app.storage.retention import PruneResult

__all__ = ["PruneResult", "prune"]


def prune(
    db: Database,
    now: datetime,
    *,
    request_days: int,
    reject_days: int,
    dry_run: bool = False,
    tz: str = "UTC",
    tier_days: tuple[int, int, int] | None = None,
) -> PruneResult:
    """Delete (or with dry_run, count) what is past retention, on the root connection."""
    return retention.prune(
        db.connection,
        now,
        request_days=request_days,
        reject_days=reject_days,
        dry_run=dry_run,
        tz=tz,
        tier_days=tier_days,
    )
