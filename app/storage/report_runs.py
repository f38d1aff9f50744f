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


# Statuses that stop a week from being sent again automatically: it went out, is going out,
# or may have (the server may have taken it: a timeout or a lost connection after DATA).
BLOCKING = ("sent", "sending", "possibly-sent")
POSSIBLY_SENT = "possibly-sent"
RESENT = "possibly-sent, resent"  # an admin chose to send it again


def sent(cur: duckdb.DuckDBPyConnection, week: str) -> bool:
    """True when the week's email went out already, or may have: an attempt left 'sending'
    by a crash, or 'possibly-sent', is never repeated automatically (a duplicate is worse
    than a gap); an admin resends it (`release_doubt`)."""
    row = first_row(
        cur,
        "SELECT count(*) FROM report_runs WHERE week = ? AND status IN (?, ?, ?)",
        [week, *BLOCKING],
    )
    return bool(row and row[0])


def in_doubt(cur: duckdb.DuckDBPyConnection, stale_before: datetime) -> list[dict]:
    """Weeks that may have been sent and are not known to be: an attempt 'possibly-sent',
    or 'sending' since before `stale_before` (a crash between the send and its record);
    none of them is resent until an admin says so. Newest first."""
    rows = cur.execute(
        "SELECT week, status, started_at, error FROM report_runs r WHERE "
        "(status = ? OR (status = 'sending' AND started_at < ?)) AND NOT EXISTS "
        "(SELECT 1 FROM report_runs s WHERE s.week = r.week AND s.status = 'sent') "
        "ORDER BY started_at DESC",
        [POSSIBLY_SENT, stale_before],
    ).fetchall()
    return [dict(zip(("week", "status", "started_at", "error"), r, strict=True)) for r in rows]


def release_doubt(cur: duckdb.DuckDBPyConnection, week: str, stale_before: datetime) -> int:
    """An admin's "send it again": the week's doubtful attempts stop blocking it (kept in the
    history as 'possibly-sent, resent'); how many. A week sent for sure, or being sent now,
    is not released."""
    with _claims:
        rows = cur.execute(
            "UPDATE report_runs SET status = ? WHERE week = ? AND (status = ? OR "
            "(status = 'sending' AND started_at < ?)) AND NOT EXISTS (SELECT 1 FROM "
            "report_runs s WHERE s.week = ? AND s.status = 'sent') RETURNING id",
            [RESENT, week, POSSIBLY_SENT, stale_before, week],
        ).fetchall()
    return len(rows)


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
    """Attempts per status (sending, sent, failed, possibly-sent, …), for /metrics."""
    rows = cur.execute("SELECT status, count(*) FROM report_runs GROUP BY status").fetchall()
    return {status: int(n) for status, n in rows}
