"""Reading results so that a shared per-thread cursor is always left clean."""

from __future__ import annotations

from typing import Any

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
