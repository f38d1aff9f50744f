"""Deleting rows past their retention: `requests` and `rejects`, a day at a time.

Age counts from `received_at`, the server's own time of ingest: an imported old trace stays
for the whole retention period after its import, and a gateway's clock cannot cut it short.
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

from app.storage import rollups
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


def cutoff(now: datetime, days: int) -> datetime | None:
    """Rows received before this are due; None when `days` is 0 (keep forever)."""
    return now - timedelta(days=days) if days > 0 else None


def count_due(con: duckdb.DuckDBPyConnection, table: str, before: datetime) -> int:
    """Rows of `table` received before `before`."""
    column = TABLES[table]
    row = first_row(con, f"SELECT count(*) FROM {table} WHERE {column} < ?", [before])
    return int(row[0]) if row else 0


def _oldest(con: duckdb.DuckDBPyConnection, table: str, before: datetime) -> datetime | None:
    column = TABLES[table]
    row = first_row(con, f"SELECT min({column}) FROM {table} WHERE {column} < ?", [before])
    return row[0] if row else None


def _delete(con: duckdb.DuckDBPyConnection, table: str, upto: datetime) -> int:
    """One chunk in its own transaction, retried when a concurrent change conflicts with it."""
    column = TABLES[table]
    for attempt in range(CONFLICT_RETRIES):
        try:
            con.execute("BEGIN TRANSACTION")
            if table == "requests":  # the hours they leave need their rollups rebuilt
                rollups.mark_deleted(con, f"{column} < ?", [upto])
            row = first_row(con, f"DELETE FROM {table} WHERE {column} < ?", [upto])
            con.execute("COMMIT")
            return int(row[0]) if row else 0
        except duckdb.TransactionException as exc:
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
) -> tuple[int, int]:
    """Delete rows of `table` received before `before`, oldest day first: (rows, chunks).

    Each step deletes everything older than the end of the oldest remaining day, so gaps in
    the data cost nothing and a row that arrives late with an old time is caught too."""
    deleted = chunks = 0
    while stop is None or not stop.is_set():
        oldest = _oldest(con, table, before)
        if oldest is None:
            break
        deleted += _delete(con, table, min(oldest + CHUNK, before))
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
) -> PruneResult:
    """Delete (or with dry_run, count) what is past retention in every table, then checkpoint."""
    result = PruneResult()
    for table, days in (("requests", request_days), ("rejects", reject_days)):
        before = cutoff(now, days)
        if before is None:
            continue
        result.cutoffs[table] = before
        if dry_run:
            result.deleted[table] = count_due(con, table, before)
            continue
        result.deleted[table], chunks = prune_table(con, table, before, stop=stop)
        result.chunks += chunks
    if result.chunks:
        result.checkpointed = checkpoint(con)
    return result
