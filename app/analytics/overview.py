"""The overview numbers: totals per model and the time span of the stored traffic."""

from __future__ import annotations

import duckdb
import pandas as pd

from app.analytics.filters import Filter
from app.storage.rows import first_row
from app.storage.schema import AZURE_GATEWAY


def per_model(cur: duckdb.DuckDBPyConnection, flt: Filter | None = None) -> pd.DataFrame:
    """Requests, token quantiles, TTFT p50/p99 and error share per model, busiest first."""
    where, params = (flt or Filter()).where()
    return cur.execute(
        f"""
        SELECT model,
               count(*) AS requests,
               quantile_cont(isl, 0.5) AS isl_p50,
               quantile_cont(isl, 0.99) AS isl_p99,
               quantile_cont(osl, 0.5) AS osl_p50,
               quantile_cont(osl, 0.99) AS osl_p99,
               quantile_cont(ttft_ms, 0.5) AS ttft_p50_ms,
               quantile_cont(ttft_ms, 0.99) AS ttft_p99_ms,
               avg(CASE WHEN status = 'ok' THEN 0 ELSE 1 END) AS error_share
        FROM requests WHERE {where} GROUP BY model ORDER BY requests DESC, model
        """,
        params,
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


def kpis(cur: duckdb.DuckDBPyConnection, flt: Filter) -> dict[str, float | None]:
    """Requests, tokens, error rate and TTFT/ITL/E2E p50/p95/p99 of a window."""
    where, params = flt.where()
    parts = ", ".join(
        f"quantile_cont({m}, [0.5, 0.95, 0.99])" for m in ("ttft_ms", "itl_ms", "e2e_ms")
    )
    row = first_row(
        cur,
        "SELECT count(*), coalesce(sum(isl), 0), coalesce(sum(osl), 0), "
        f"avg(CASE WHEN status = 'ok' THEN 0 ELSE 1 END), {parts} FROM requests WHERE {where}",
        params,
    )
    assert row is not None
    out: dict[str, float | None] = {
        "requests": int(row[0]),
        "input_tokens": int(row[1]),
        "output_tokens": int(row[2]),
        "error_rate": None if row[3] is None else float(row[3]),
    }
    for k, m in enumerate(("ttft_ms", "itl_ms", "e2e_ms")):
        values = row[4 + k] or [None, None, None]
        for name, v in zip(("p50", "p95", "p99"), values, strict=True):
            out[f"{m}_{name}"] = None if v is None else float(v)
    return out
