"""What the database holds, in counts: for /api/health, /metrics and the filter bar."""

from __future__ import annotations

from dataclasses import dataclass

from app.services import report_runs
from app.storage import rollups, tiers
from app.storage.database import Database
from app.storage.write.store import count_rows


@dataclass(frozen=True)
class Counts:
    """Rows stored and hours rolled up (raises duckdb.Error when the database fails)."""

    requests: int
    rejects: int
    rollup_hours: int
    stale_rollup_hours: int
    rollup_tiers: dict[str, int]


def counts(db: Database) -> Counts:
    """Requests, rejects and rollup hours, as stored now."""
    cur = db.cursor()
    rolled, stale = rollups.hour_counts(cur)
    return Counts(
        count_rows(cur, "requests"),
        count_rows(cur, "rejects"),
        rolled,
        stale,
        tiers.hours_by_tier(cur),
    )


def request_count(db: Database) -> int:
    """Stored requests (a count(*): about a millisecond at 10M rows)."""
    return count_rows(db.cursor(), "requests")


def last_report(db: Database) -> dict | None:
    """The latest weekly-email attempt, or None."""
    last = report_runs.history(db, limit=1)
    return last[0] if last else None
