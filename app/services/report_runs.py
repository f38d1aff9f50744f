"""The weekly email's send history: what the email, the Reports page and health read and
write (each attempt a row, so a week is never sent twice)."""

from __future__ import annotations

from typing import Any

from app.storage import report_runs
from app.storage.database import Database


def record(db: Database, **attempt: Any) -> str:
    """Record one attempt (week, recipients, status, attempt, started_at, ...); its id."""
    return report_runs.record(db.cursor(), **attempt)


def finish(db: Database, run_id: str, **outcome: Any) -> None:
    """Close an attempt with its status, finish time and error (if any)."""
    report_runs.finish(db.cursor(), run_id, **outcome)


def sent(db: Database, week: str) -> bool:
    """Whether the week's email went out already (or may have)."""
    return report_runs.sent(db.cursor(), week)


def history(db: Database, limit: int = 50) -> list[dict]:
    """The latest attempts, newest first."""
    return report_runs.history(db.cursor(), limit=limit)
