"""The send history of the weekly email: one row per attempt, so a week is never sent twice."""

from __future__ import annotations

import uuid
from datetime import datetime

import duckdb

from app.storage.rows import first_row


def record(
    cur: duckdb.DuckDBPyConnection,
    *,
    week: str,
    recipients: list[str],
    status: str,
    attempt: int,
    started_at: datetime,
    finished_at: datetime | None,
    message_id: str | None = None,
    error: str | None = None,
) -> None:
    """Store one attempt (status: sent, failed, skipped)."""
    cur.execute(
        "INSERT INTO report_runs (id, week, engine, recipients, status, attempt, message_id, "
        "error, started_at, finished_at) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)",
        [
            uuid.uuid4().hex,
            week,
            ", ".join(recipients),
            status,
            attempt,
            message_id,
            error,
            started_at,
            finished_at,
        ],
    ).fetchall()


def sent(cur: duckdb.DuckDBPyConnection, week: str) -> bool:
    """True when the week's email went out already."""
    row = first_row(
        cur, "SELECT count(*) FROM report_runs WHERE week = ? AND status = 'sent'", [week]
    )
    return bool(row and row[0])


def history(cur: duckdb.DuckDBPyConnection, limit: int = 50) -> list[dict]:
    """The latest attempts, newest first."""
    rows = cur.execute(
        "SELECT week, recipients, status, attempt, message_id, error, started_at, finished_at "
        "FROM report_runs ORDER BY started_at DESC, attempt DESC LIMIT ?",
        [limit],
    ).fetchall()
    names = ("week", "recipients", "status", "attempt", "message_id", "error", "started_at")
    return [dict(zip((*names, "finished_at"), row, strict=True)) for row in rows]
