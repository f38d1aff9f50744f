"""An engine's traffic by local hour of day (DST-correct), for seasonal engine plans."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from typing import TypedDict
from zoneinfo import ZoneInfo

import duckdb
import numpy as np

from app.analytics import weighted
from app.analytics.filters import Filter

HOUR_QUANTILES = (0.5, 0.99, 0.999)


class HourlyLoad(TypedDict):
    """What `hourly_load` returns."""

    cells: list[tuple[str, int, int, float, float, int]]
    hist: dict[str, np.ndarray]
    footprint_sum: np.ndarray
    count: np.ndarray
    quantiles: dict[int, dict[str, list[float]]]


def local_hour_seconds(start: datetime, end: datetime, tz: str) -> dict[tuple[str, int], int]:
    """Real seconds in each (local date, local hour) of [start, end): 7,200 for the hour a DST
    change repeats, none for the hour it skips. Quarter-hour steps, so zones with half- and
    quarter-hour offsets (Asia/Kolkata, Asia/Kathmandu) are counted right too."""
    zone = ZoneInfo(tz)
    out: dict[tuple[str, int], int] = defaultdict(int)
    t = start.astimezone(UTC)
    while t < end:
        local = t.astimezone(zone)
        out[(local.date().isoformat(), local.hour)] += 900
        t += timedelta(minutes=15)
    return dict(out)


def hourly_load(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    tz: str,
    granularity: int,
    max_tokens: int = 1 << 20,
    with_quantiles: bool = True,
) -> HourlyLoad:
    """Per (local date, hour): requests, KV token-seconds and held-time sums (E2E less
    queue_ms); per hour: g-wide ISL, OSL and ISL + OSL histograms, the KV footprint sum (for
    E[ISL + OSL/2]) and (`with_quantiles`) ISL and OSL quantiles. Sampled rows count
    1/sample_rate requests each (counts rounded to whole requests)."""
    where, params = flt.where()
    sampled = weighted.is_sampled(cur, flt)
    count = weighted.count_sql(sampled)
    local = "(started_at AT TIME ZONE ?)"
    # The time a request holds the engine's KV cache: its total time less the wait for a slot
    # the gateway measured (queue_ms). A request queued for a slot holds none, and counting that
    # wait would size replicas to an overload instead of to the work.
    held = "greatest(e2e_ms - coalesce(queue_ms, 0), 0) / 1000.0"
    kv_sum = weighted.total_sql(f"{held} * (isl + osl / 2.0)", sampled)
    e2e_sum = weighted.total_sql(held, sampled)
    n_e2e = weighted.count_sql(sampled, "e2e_ms IS NOT NULL")
    cells = cur.execute(
        f"SELECT strftime({local}, '%Y-%m-%d') AS d, hour({local}) AS h, {count} AS n, "
        f"coalesce({kv_sum}, 0) AS kv_token_seconds, "
        f"coalesce({e2e_sum}, 0) AS e2e_s, {n_e2e} AS n_e2e "
        f"FROM requests WHERE {where} GROUP BY ALL",
        [tz, tz, *params],
    ).fetchall()
    # One scan for the three g-wide histograms and the footprint sums (GROUPING SETS), each
    # set told apart by which bucket columns are NULL. Buckets beyond the model's context all
    # mean "too long": one bucket keeps the histograms small whatever an outlier's length.
    top_bucket = max_tokens // granularity + 1
    footprint_sum = weighted.total_sql("isl + osl / 2.0", sampled)
    rows = cur.execute(
        f"SELECT h, bi, bo, bs, {count}, {footprint_sum} FROM ("
        f"SELECT *, hour({local}) AS h, least(isl // ?, ?) AS bi, least(osl // ?, ?) AS bo, "
        f"least((isl + osl) // ?, ?) AS bs FROM requests WHERE {where}) "
        "GROUP BY GROUPING SETS ((h, bi), (h, bo), (h, bs), (h))",
        [tz, granularity, top_bucket, granularity, top_bucket, granularity, top_bucket, *params],
    ).fetchall()
    footprint = np.zeros(24)
    counts = np.zeros(24)
    cells_by: dict[str, list[tuple[int, int, int]]] = {"isl": [], "osl": [], "seq": []}
    for h, bi, bo, bs, n, total in rows:
        if bi is not None:
            cells_by["isl"].append((int(h), int(bi), int(n)))
        elif bo is not None:
            cells_by["osl"].append((int(h), int(bo), int(n)))
        elif bs is not None:
            cells_by["seq"].append((int(h), int(bs), int(n)))
        else:
            footprint[int(h)], counts[int(h)] = float(total), float(n)
    hist: dict[str, np.ndarray] = {}
    for name, found in cells_by.items():
        top = max((b for _, b, _ in found), default=0)
        grid = np.zeros((24, top + 1), dtype=np.int64)
        for h, b, n in found:
            grid[h, b] += n
        hist[name] = grid
    quantiles: dict[int, dict[str, list[float]]] = {}
    if not with_quantiles:
        pass
    elif sampled:
        source = f"(SELECT hour({local}) AS h, * FROM requests WHERE {where})"
        by_hour = weighted.quantiles(
            cur, source, [tz, *params], ("h",), ("isl", "osl"), HOUR_QUANTILES
        )
        for (h, measure), values in by_hour.items():
            quantiles.setdefault(int(h), {})[measure] = [v for v in values if v is not None]
    else:
        quantiles = _hour_quantiles(cur, where, params, tz)
    return {
        "cells": cells,
        "hist": hist,
        "footprint_sum": footprint,
        "count": counts,
        "quantiles": quantiles,
    }


def _hour_quantiles(
    cur: duckdb.DuckDBPyConnection, where: str, params: list, tz: str
) -> dict[int, dict[str, list[float]]]:
    local = "(started_at AT TIME ZONE ?)"
    return {
        int(h): {"isl": list(isl_q), "osl": list(osl_q)}
        for h, isl_q, osl_q in cur.execute(
            f"SELECT hour({local}) AS h, quantile_cont(isl, {list(HOUR_QUANTILES)}), "
            f"quantile_cont(osl, {list(HOUR_QUANTILES)}) FROM requests WHERE {where} GROUP BY ALL",
            [tz, *params],
        ).fetchall()
    }
