"""Reading results so that a shared per-thread cursor is always left clean."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any, TypeVar

import duckdb


def first_row(
    con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None
) -> tuple[Any, ...] | None:
    """The first row of a query, or None; fetches the whole result.

    DuckDB refuses new work on a connection whose last result was not read to the end, and
    per-thread cursors are reused by later requests on the same thread."""
    rows = con.execute(sql, params or []).fetchall()
    return rows[0] if rows else None


def rollback(con: duckdb.DuckDBPyConnection) -> None:
    """Roll back, quietly when the transaction has already ended.

    A COMMIT that failed (disk full, a conflict) ends the transaction itself; a ROLLBACK then
    raises "no transaction is active", which would hide the error that matters."""
    try:
        con.execute("ROLLBACK")
    except duckdb.TransactionException:
        pass


T = TypeVar("T")


def transaction(
    con: duckdb.DuckDBPyConnection,
    work: Callable[[duckdb.DuckDBPyConnection], T],
    attempts: int = 16,
    *,
    retry_duplicates: bool = False,
) -> T:
    """Run `work` as one transaction, again from the start when DuckDB reports a write-write
    conflict (another transaction changed the same rows first): `work` states its conditions
    in its statements (UPDATE … WHERE revoked_at IS NULL RETURNING), so a retry sees the
    winner's result and answers accordingly, never a 500 and never both. With
    `retry_duplicates`, a duplicate key is such a conflict too (two writers inserting the
    same new row: the retry finds the winner's and updates it); without, it is the caller's
    answer (a user name taken)."""
    for attempt in range(attempts):
        con.execute("BEGIN TRANSACTION")
        try:
            result = work(con)
            con.execute("COMMIT")
            return result
        except (duckdb.TransactionException, duckdb.ConstraintException) as exc:
            rollback(con)
            text = str(exc).lower()
            # A duplicate key shows at the INSERT, or at COMMIT when the other writer's row
            # was not visible yet ("Failed to commit: … constraint violation").
            duplicate = isinstance(exc, duckdb.ConstraintException) or "constraint" in text
            conflict = not duplicate and "conflict" in text
            if not (conflict or (duplicate and retry_duplicates)) or attempt == attempts - 1:
                if duplicate and not isinstance(exc, duckdb.ConstraintException):
                    raise duckdb.ConstraintException(str(exc)) from exc  # one kind for callers
                raise
            # Jittered backoff: the racers spread out instead of colliding again.
            time.sleep(random.uniform(0, min(0.2, 0.002 * 2**attempt)))
        except BaseException:
            rollback(con)
            raise
    raise AssertionError("unreachable")  # the last attempt returns or raises
