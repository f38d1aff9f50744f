"""The send history of the weekly email: one row per attempt, so a week is never sent twice."""

from __future__ import annotations

import threading
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
) -> str:
    """Store one attempt (status: sending, sent, failed); returns its id."""
    run_id = uuid.uuid4().hex
    cur.execute(
        "INSERT INTO report_runs (id, week, engine, recipients, status, attempt, message_id, "
        "error, started_at, finished_at) VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, ?)",
        [
            run_id,
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
    return run_id


# One process owns the database (DuckDB's file lock), so a process-wide lock makes "not sent
# yet, so claim it" atomic between the scheduler and a request from the dashboard or CLI.
_claims = threading.Lock()


def claim(cur: duckdb.DuckDBPyConnection, *, week: str, **attempt) -> str | None:
    """Open a 'sending' attempt for a week unless it is sent or being sent; its id, or None."""
    with _claims:
        if sent(cur, week):
            return None
        return record(cur, week=week, status="sending", **attempt)


def finish(
    cur: duckdb.DuckDBPyConnection,
    run_id: str,
    *,
    status: str,
    finished_at: datetime,
    error: str | None = None,
) -> None:
    """Close an attempt with its outcome."""
    cur.execute(
        "UPDATE report_runs SET status = ?, finished_at = ?, error = ? WHERE id = ?",
        [status, finished_at, error, run_id],
    ).fetchall()


def sent(cur: duckdb.DuckDBPyConnection, week: str) -> bool:
    """True when the week's email went out already, or may have: an attempt left 'sending'
    by a crash is never repeated automatically (a duplicate is worse than a gap)."""
    row = first_row(
        cur,
        "SELECT count(*) FROM report_runs WHERE week = ? AND status IN ('sent', 'sending')",
        [week],
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


def count_by_status(cur: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Attempts per status (sending, sent, failed), for /metrics."""
    rows = cur.execute("SELECT status, count(*) FROM report_runs GROUP BY status").fetchall()
    return {status: int(n) for status, n in rows}
