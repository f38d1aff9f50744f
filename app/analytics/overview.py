"""The overview numbers: totals per model and the time span of the stored traffic."""

from __future__ import annotations

import duckdb
import pandas as pd

from app.storage.rows import first_row
from app.storage.schema import AZURE_GATEWAY


def per_model(cur: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    """Requests, token quantiles, TTFT p50/p99 and error share per model, busiest first."""
    return cur.execute(
        """
        SELECT model,
               count(*) AS requests,
               quantile_cont(isl, 0.5) AS isl_p50,
               quantile_cont(isl, 0.99) AS isl_p99,
               quantile_cont(osl, 0.5) AS osl_p50,
               quantile_cont(osl, 0.99) AS osl_p99,
               quantile_cont(ttft_ms, 0.5) AS ttft_p50_ms,
               quantile_cont(ttft_ms, 0.99) AS ttft_p99_ms,
               avg(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) AS error_share
        FROM requests GROUP BY model ORDER BY requests DESC, model
        """
    ).df()


def span(cur: duckdb.DuckDBPyConnection) -> dict:
    """First and last start time, totals, gateways, and whether the Azure trace is present."""
    row = first_row(
        cur,
        "SELECT min(started_at), max(started_at), count(*), coalesce(sum(isl), 0), "
        "coalesce(sum(osl), 0), count(DISTINCT gateway), "
        "count(*) FILTER (WHERE gateway = ?) FROM requests",
        [AZURE_GATEWAY],
    )
    assert row is not None
    return {
        "first": row[0],
        "last": row[1],
        "requests": int(row[2]),
        "input_tokens": int(row[3]),
        "output_tokens": int(row[4]),
        "gateways": int(row[5]),
        "azure_rows": int(row[6]),
    }


DIMENSIONS = ("model", "engine", "gateway", "tenant")


def dimension_values(cur: duckdb.DuckDBPyConnection, limit: int = 200) -> dict[str, list[str]]:
    """Distinct values of each filterable column, for the filter bar's choices."""
    out: dict[str, list[str]] = {}
    for column in DIMENSIONS:  # names from a fixed tuple, never from the user
        rows = cur.execute(
            f"SELECT DISTINCT {column} FROM requests WHERE {column} IS NOT NULL ORDER BY 1 LIMIT ?",
            [limit],
        ).fetchall()
        out[column] = [r[0] for r in rows]
    return out
