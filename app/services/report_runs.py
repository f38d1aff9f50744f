"""The weekly email's send history: what the email, the Reports page and health read and
write (each attempt a row, so a week is never sent twice)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from app.storage import report_runs
from app.storage.database import Database
from app.storage.report_runs import POSSIBLY_SENT

__all__ = [
    "POSSIBLY_SENT",
    "claim",
    "finish",
    "history",
    "in_doubt",
    "record",
    "release_doubt",
    "sent",
]


def record(db: Database, **attempt: Any) -> str:
    """Record one attempt (week, recipients, status, attempt, started_at, ...); its id."""
    return report_runs.record(db.cursor(), **attempt)


def claim(db: Database, *, week: str, **attempt: Any) -> str | None:
    """Open a 'sending' attempt unless the week is sent or being sent (atomic between the
    scheduler, the API and the page in this process); its id, or None."""
    return report_runs.claim(db.cursor(), week=week, **attempt)


def finish(db: Database, run_id: str, **outcome: Any) -> None:
    """Close an attempt with its status, finish time and error (if any)."""
    report_runs.finish(db.cursor(), run_id, **outcome)


def sent(db: Database, week: str) -> bool:
    """Whether the week's email went out already (or may have)."""
    return report_runs.sent(db.cursor(), week)


def history(db: Database, limit: int = 50) -> list[dict]:
    """The latest attempts, newest first."""
    return report_runs.history(db.cursor(), limit=limit)


# A 'sending' attempt older than this had its process die mid-send: in doubt, like a timeout
# after DATA (a real send takes seconds; three attempts with backoff, under two minutes).
STALE_SENDING = timedelta(minutes=10)


def in_doubt(db: Database, now: datetime) -> list[dict]:
    """Weeks that may have been sent (possibly-sent, or a send a crash interrupted)."""
    return report_runs.in_doubt(db.cursor(), now - STALE_SENDING)


def release_doubt(db: Database, week: str, now: datetime) -> int:
    """Let an admin send a week in doubt again; how many doubtful attempts were released."""
    return report_runs.release_doubt(db.cursor(), week, now - STALE_SENDING)
