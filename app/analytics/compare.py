"""Production beside a benchmark run: which gateways each side holds, what a benchmark gateway's
rows name, TTFT and ITL quantiles per ISL × OSL cell, and each side's means and load.

Raw rows only (the per-cell quantiles have no rollup); every count and quantile is weighted by
`WEIGHT` (weighted quantiles as app/analytics/weighted.py computes them when a side holds
sampled rows, DuckDB's exact quantile_cont otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb
import numpy as np
import pandas as pd

from app.analytics import weighted
from app.analytics.bins import case_sql
from app.analytics.filters import WEIGHT, Filter
from app.storage import tiers
from app.storage.rows import first_row

CELL_MEASURES = ("ttft_ms", "itl_ms")
CELL_QUANTILES = (0.5, 0.9, 0.99)
CELL_NAMES = ("p50", "p90", "p99")
CELL_COLUMNS = [
    "i",
    "j",
    "requests",
    "ttft_n",
    "itl_n",
    *(f"{m.removesuffix('_ms')}_{q}" for m in CELL_MEASURES for q in CELL_NAMES),
]
# The daily shapes rollup names every gateway of an engine, also of hours without raw rows.
_DAILY_SHAPES = tiers.table("daily", "shapes")


@dataclass(frozen=True)
class GatewayRows:
    """What one gateway's raw rows hold in a window: how many, their time span, the engines
    and models they name (None: rows naming no engine), rows per status."""

    gateway: str
    rows: int
    first: datetime | None  # the earliest started_at
    last: datetime | None  # the latest started_at
    engines: dict[str | None, int]
    models: dict[str, int]


def gateway_rows(
    cur: duckdb.DuckDBPyConnection,
    gateway: str,
    start: datetime | None = None,
    end: datetime | None = None,
) -> GatewayRows:
    """The raw rows of `gateway` in [start, end) (open ends: all of them)."""
    where, params = Filter(start=start, end=end, gateways=(gateway,)).where()
    span = first_row(
        cur,
        f"SELECT count(*), min(started_at), max(started_at) FROM requests WHERE {where}",
        params,
    )
    rows, first, last = span or (0, None, None)
    engines = cur.execute(
        f"SELECT engine, count(*) FROM requests WHERE {where} GROUP BY 1 ORDER BY 2 DESC", params
    ).fetchall()
    models = cur.execute(
        f"SELECT model, count(*) FROM requests WHERE {where} GROUP BY 1 ORDER BY 2 DESC", params
    ).fetchall()
    return GatewayRows(
        gateway,
        int(rows),
        first,
        last,
        {e: int(n) for e, n in engines},
        {m: int(n) for m, n in models},
    )


def engine_gateways(
    cur: duckdb.DuckDBPyConnection, engine: str, start: datetime | None, end: datetime | None
) -> list[str]:
    """The gateways whose requests name `engine` in the window, from raw rows and the daily
    rollups (hours whose raw rows retention pruned still count), in name order."""
    # A daily row's hour is the start of its day: the day before the window's start may hold it.
    lo = start - timedelta(days=1) if start is not None and start.year > 1 else None
    rows = cur.execute(
        "SELECT gateway FROM requests WHERE engine = ? "
        "AND started_at >= coalesce(?, '-infinity'::TIMESTAMPTZ) "
        "AND started_at < coalesce(?, 'infinity'::TIMESTAMPTZ) "
        f"UNION SELECT gateway FROM {_DAILY_SHAPES} WHERE engine = ? "
        "AND hour > coalesce(?, '-infinity'::TIMESTAMPTZ) "
        "AND hour < coalesce(?, 'infinity'::TIMESTAMPTZ) ORDER BY 1",
        [engine, start, end, engine, lo, end],
    ).fetchall()
    return [r[0] for r in rows]


def engine_names(cur: duckdb.DuckDBPyConnection) -> list[str]:
    """Every engine the raw rows name, the most rows first (at most 100)."""
    rows = cur.execute(
        "SELECT engine FROM requests WHERE engine IS NOT NULL GROUP BY 1 "
        "ORDER BY count(*) DESC, 1 LIMIT 100"
    ).fetchall()
    return [r[0] for r in rows]


def engine_models(cur: duckdb.DuckDBPyConnection, flt: Filter) -> list[str]:
    """The models a filter's raw rows name, the most rows first."""
    where, params = flt.where()
    rows = cur.execute(
        f"SELECT model FROM requests WHERE {where} GROUP BY 1 ORDER BY count(*) DESC, 1", params
    ).fetchall()
    return [r[0] for r in rows]


def cell_latency(
    cur: duckdb.DuckDBPyConnection, flt: Filter, edges: tuple[int, ...]
) -> pd.DataFrame:
    """Per ISL × OSL cell of `edges` (the heat map's bins, the same on both axes): requests
    (weighted, rounded), the rows that measured TTFT and ITL (`ttft_n`, `itl_n`: what a
    quantile stands on), and the weighted p50/p90/p99 of TTFT and ITL (NaN without values).
    Columns `CELL_COLUMNS`, cells with requests only, in (i, j) order."""
    isl_case, isl_params = case_sql("isl", edges)
    osl_case, osl_params = case_sql("osl", edges)
    where, params = flt.where()
    source = (
        f"(SELECT {isl_case} AS i, {osl_case} AS j, ttft_ms, itl_ms, sample_rate "
        f"FROM requests WHERE {where})"
    )
    source_params = [*isl_params, *osl_params, *params]
    sampled = weighted.is_sampled(cur, flt)
    n = weighted.count_sql(sampled)
    if sampled:
        frame = cur.execute(
            f"SELECT i, j, {n} AS requests, count(ttft_ms) AS ttft_n, count(itl_ms) AS itl_n "
            f"FROM {source} GROUP BY ALL ORDER BY i, j",
            source_params,
        ).df()
        found = weighted.quantiles(
            cur, source, source_params, ("i", "j"), CELL_MEASURES, CELL_QUANTILES
        )
        for m in CELL_MEASURES:
            values = [
                found.get((int(i), int(j), m)) or [np.nan] * len(CELL_QUANTILES)
                for i, j in zip(frame["i"], frame["j"], strict=True)
            ]
            for k, q in enumerate(CELL_NAMES):
                frame[f"{m.removesuffix('_ms')}_{q}"] = [v[k] for v in values]
    else:
        qs = list(CELL_QUANTILES)
        frame = cur.execute(
            f"SELECT i, j, {n} AS requests, count(ttft_ms) AS ttft_n, count(itl_ms) AS itl_n, "
            f"quantile_cont(ttft_ms, {qs}) AS ttft_q, quantile_cont(itl_ms, {qs}) AS itl_q "
            f"FROM {source} GROUP BY ALL ORDER BY i, j",
            source_params,
        ).df()
        for m in ("ttft", "itl"):
            values = frame.pop(f"{m}_q")
            for k, q in enumerate(CELL_NAMES):
                # A cell without values has a null list (None or pandas' NA).
                frame[f"{m}_{q}"] = [v[k] if _listed(v) else np.nan for v in values]
    for column in ("i", "j", "requests", "ttft_n", "itl_n"):
        frame[column] = frame[column].astype("int64")
    for column in CELL_COLUMNS[5:]:
        frame[column] = frame[column].astype(float)
    return frame[CELL_COLUMNS]


def _listed(value: object) -> bool:
    """Whether a fetched quantile_cont list holds values (a null one is None or NA)."""
    return isinstance(value, list | tuple | np.ndarray)


@dataclass(frozen=True)
class SideStats:
    """One side's requests (weighted) and errors, its mean TTFT and token-weighted mean ITL
    (the model's units: time per output token), and its mean requests in flight over its own
    span (Σ E2E ÷ first start → last end)."""

    rows: int
    requests: float
    not_ok: float  # requests with status error or cancelled
    ttft_mean: float | None
    itl_mean: float | None
    in_flight: float | None


def side_stats(cur: duckdb.DuckDBPyConnection, flt: Filter) -> SideStats:
    """The SideStats of a filter's raw rows (`flt.statuses` is ignored: errors are counted)."""
    everything = Filter(flt.start, flt.end, flt.models, flt.engines, flt.gateways, flt.tenants, ())
    where, params = everything.where()
    row = first_row(
        cur,
        f"""SELECT count(*), coalesce(sum({WEIGHT}), 0),
            coalesce(sum({WEIGHT}) FILTER (WHERE status <> 'ok'), 0),
            sum(ttft_ms * {WEIGHT}) FILTER (WHERE status = 'ok')
              / sum({WEIGHT}) FILTER (WHERE status = 'ok' AND ttft_ms IS NOT NULL),
            sum(itl_ms * (osl - 1) * {WEIGHT}) FILTER (WHERE status = 'ok' AND osl > 1)
              / sum((osl - 1) * {WEIGHT})
                FILTER (WHERE status = 'ok' AND osl > 1 AND itl_ms IS NOT NULL),
            sum(e2e_ms * {WEIGHT}) FILTER (WHERE e2e_ms IS NOT NULL),
            epoch(max(started_at + to_milliseconds(coalesce(e2e_ms, 0))) - min(started_at))
        FROM requests WHERE {where}""",
        params,
    )
    if not row or not row[0]:
        return SideStats(0, 0.0, 0.0, None, None, None)
    rows, requests, not_ok, ttft, itl, busy_ms, seconds = row
    in_flight = (
        float(busy_ms) / 1000.0 / float(seconds)
        if busy_ms is not None and seconds is not None and float(seconds) > 0
        else None
    )
    return SideStats(
        int(rows),
        float(requests),
        float(not_ok),
        None if ttft is None else float(ttft),
        None if itl is None else float(itl),
        in_flight,
    )
