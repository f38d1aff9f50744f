"""Deleting rows past their retention: `requests` and `rejects`, a day at a time.

Age counts from `received_at`, the server's own time of ingest: an imported old trace stays
for the whole retention period after its import, and a gateway's clock cannot cut it short.
Requests go by whole UTC hours (an hour holding a row past retention goes with all its rows),
sealed into the rollups first: the rollup tiers keep counting them for their own retention.
Each chunk is its own short transaction, so the writer (which only appends) is never held up
for long; DuckDB's optimistic concurrency lets appends and deletes of other rows commit side by
side, and a chunk that does conflict is tried again.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import duckdb

from app.storage import rollups, tiers
from app.storage.rows import first_row, rollback

log = logging.getLogger("tokenshape.retention")

# Table → its age column; names come only from here, values are bound parameters.
TABLES = {"requests": "received_at", "rejects": "received_at"}
CHUNK = timedelta(days=1)
CONFLICT_RETRIES = 8  # 6 s of back-off in all


@dataclass
class PruneResult:
    """Rows deleted (or, in a dry run, that would be) per table, and the cut-offs used."""

    deleted: dict[str, int] = field(default_factory=dict)
    cutoffs: dict[str, datetime] = field(default_factory=dict)
    chunks: int = 0
    checkpointed: bool = False
    tiers: dict[str, int] = field(default_factory=dict)  # hours (days) dropped per rollup tier


def cutoff(now: datetime, days: int) -> datetime | None:
    """Rows received before this are due; None when `days` is 0 (keep forever)."""
    return now - timedelta(days=days) if days > 0 else None


# The UTC hours of the requests received before the bound time: retention takes whole hours.
# A dirty hour is left for the mover to rebuild first: it goes at the next prune.
_DUE_HOURS = (
    f"SELECT DISTINCT {rollups.UTC_HOUR} AS hour FROM requests WHERE received_at < ? "
    "EXCEPT SELECT hour FROM rollup_dirty"
)
_IN_HOURS = f"started_at >= ? AND started_at < ? AND list_contains(?, {rollups.UTC_HOUR})"


def _due_hours(con: duckdb.DuckDBPyConnection, before: datetime) -> list[datetime]:
    return [r[0] for r in con.execute(_DUE_HOURS, [before]).fetchall()]


def _hours_params(hours: list[datetime]) -> list:
    return [min(hours), max(hours) + timedelta(hours=1), hours]


def count_due(con: duckdb.DuckDBPyConnection, table: str, before: datetime) -> int:
    """Rows of `table` a prune at `before` deletes: for `requests`, every row of a clean hour
    that holds a row received before it (hours go whole, see `_delete_requests`)."""
    if table == "requests":
        hours = _due_hours(con, before)
        if not hours:
            return 0
        row = first_row(
            con, f"SELECT count(*) FROM requests WHERE {_IN_HOURS}", _hours_params(hours)
        )
        return int(row[0]) if row else 0
    column = TABLES[table]
    row = first_row(con, f"SELECT count(*) FROM {table} WHERE {column} < ?", [before])
    return int(row[0]) if row else 0


def _oldest(
    con: duckdb.DuckDBPyConnection, table: str, before: datetime, after: datetime | None = None
) -> datetime | None:
    column = TABLES[table]
    row = first_row(
        con,
        f"SELECT min({column}) FROM {table} WHERE {column} < ? "
        f"AND {column} >= coalesce(?, '-infinity'::TIMESTAMPTZ)",
        [before, after],
    )
    return row[0] if row else None


def _delete_requests(con: duckdb.DuckDBPyConnection, upto: datetime, tz: str) -> int:
    """Delete the requests of every clean UTC hour holding one received before `upto`, whole
    hours, and seal those hours: the rollups (which outlive raw rows in their tiers) count every
    request, and a late row for a sealed hour is added to them, never counted twice
    (app/storage/tiers.py). A dirty hour waits for the mover's rebuild (only the mover
    rebuilds, so rebuilds never race) and goes at the next prune."""
    hours = _due_hours(con, upto)
    if not hours:
        return 0
    tiers.seal(con, hours, tz)
    row = first_row(con, f"DELETE FROM requests WHERE {_IN_HOURS}", _hours_params(hours))
    return int(row[0]) if row else 0


def _delete(con: duckdb.DuckDBPyConnection, table: str, upto: datetime, tz: str = "UTC") -> int:
    """One chunk in its own transaction, retried when a concurrent change conflicts with it."""
    column = TABLES[table]
    for attempt in range(CONFLICT_RETRIES):
        try:
            con.execute("BEGIN TRANSACTION")
            if table == "requests":
                deleted = _delete_requests(con, upto, tz)
                con.execute("COMMIT")
                return deleted
            row = first_row(con, f"DELETE FROM {table} WHERE {column} < ?", [upto])
            con.execute("COMMIT")
            return int(row[0]) if row else 0
        # A concurrent write to the same rows or hours (a rebuild sealing race: DuckDB reports
        # some as a constraint error on rollup_hours' key) is tried again.
        except (duckdb.TransactionException, duckdb.ConstraintException) as exc:
            rollback(con)
            if attempt == CONFLICT_RETRIES - 1:
                raise
            log.info("retention: %s chunk conflicted (%s); trying again", table, exc)
            time.sleep(0.05 * 2**attempt)
        except BaseException:
            rollback(con)
            raise
    return 0  # unreachable: the last attempt returns or raises


def prune_table(
    con: duckdb.DuckDBPyConnection,
    table: str,
    before: datetime,
    *,
    stop: threading.Event | None = None,
    tz: str = "UTC",
) -> tuple[int, int]:
    """Delete rows of `table` received before `before`, oldest day first: (rows, chunks).

    Each step deletes everything older than the end of the oldest remaining day, so gaps in
    the data cost nothing and a row that arrives late with an old time is caught too."""
    deleted = chunks = 0
    after: datetime | None = None  # rows left behind (requests of dirty hours) are not retried
    while stop is None or not stop.is_set():
        oldest = _oldest(con, table, before, after)
        if oldest is None:
            break
        after = min(oldest + CHUNK, before)
        deleted += _delete(con, table, after, tz)
        chunks += 1
    return deleted, chunks


def checkpoint(con: duckdb.DuckDBPyConnection) -> bool:
    """Write the WAL into the file so freed blocks are reused; False if DuckDB declined."""
    try:
        con.execute("CHECKPOINT")
        return True
    except duckdb.Error as exc:  # e.g. another transaction in the way: the next run tries again
        log.info("retention: checkpoint skipped (%s)", exc)
        return False


def prune(
    con: duckdb.DuckDBPyConnection,
    now: datetime,
    *,
    request_days: int,
    reject_days: int,
    dry_run: bool = False,
    stop: threading.Event | None = None,
    tz: str = "UTC",
    tier_days: tuple[int, int, int] | None = None,
) -> PruneResult:
    """Delete (or with dry_run, count) what is past retention in every table and, given
    `tier_days` (hourly, hourly without tenant, daily), in each rollup tier; then checkpoint.
    `tz`: the day of a sealed hour new to the rollups."""
    result = PruneResult()
    for table, days in (("requests", request_days), ("rejects", reject_days)):
        before = cutoff(now, days)
        if before is None:
            continue
        result.cutoffs[table] = before
        if dry_run:
            result.deleted[table] = count_due(con, table, before)
            continue
        result.deleted[table], chunks = prune_table(con, table, before, stop=stop, tz=tz)
        result.chunks += chunks
    if tier_days is not None and not dry_run:
        hourly, hourly_nt, daily = tier_days
        result.tiers = tiers.prune(
            con, now, hourly_days=hourly, hourly_nt_days=hourly_nt, daily_days=daily
        )
        result.chunks += bool(any(result.tiers.values()))
    if result.chunks:
        result.checkpointed = checkpoint(con)
    return result
