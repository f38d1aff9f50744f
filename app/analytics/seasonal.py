"""An engine's traffic by local hour of day (DST-correct), for seasonal engine plans."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import duckdb
import numpy as np

from app.analytics.filters import Filter


def local_hour_seconds(start: datetime, end: datetime, tz: str) -> dict[tuple[str, int], int]:
    """Real seconds in each (local date, local hour) of [start, end): 7,200 for the hour a DST
    change repeats, none for the hour it skips. start and end are whole UTC hours."""
    zone = ZoneInfo(tz)
    out: dict[tuple[str, int], int] = defaultdict(int)
    t = start.astimezone(UTC)
    while t < end:
        local = t.astimezone(zone)
        out[(local.date().isoformat(), local.hour)] += 3600
        t += timedelta(hours=1)
    return dict(out)


def hourly_load(
    cur: duckdb.DuckDBPyConnection, flt: Filter, tz: str, granularity: int
) -> dict[str, object]:
    """Per (local date, hour): requests, KV token-seconds and E2E sums; per hour: g-wide ISL,
    OSL and ISL + OSL histograms and the KV footprint sum (for E[ISL + OSL/2])."""
    where, params = flt.where()
    local = "(started_at AT TIME ZONE ?)"
    cells = cur.execute(
        f"SELECT strftime({local}, '%Y-%m-%d') AS d, hour({local}) AS h, count(*) AS n, "
        "coalesce(sum(e2e_ms / 1000.0 * (isl + osl / 2.0)), 0) AS kv_token_seconds, "
        "coalesce(sum(e2e_ms / 1000.0), 0) AS e2e_s, count(e2e_ms) AS n_e2e "
        f"FROM requests WHERE {where} GROUP BY ALL",
        [tz, tz, *params],
    ).fetchall()
    hist: dict[str, np.ndarray] = {}
    for name, expr in (("isl", "isl"), ("osl", "osl"), ("seq", "isl + osl")):
        rows = cur.execute(
            f"SELECT hour({local}) AS h, ({expr}) // ? AS b, count(*) FROM requests "
            f"WHERE {where} GROUP BY ALL",
            [tz, granularity, *params],
        ).fetchall()
        top = max((int(b) for _, b, _ in rows), default=0)
        grid = np.zeros((24, top + 1), dtype=np.int64)
        for h, b, n in rows:
            grid[int(h), int(b)] += int(n)
        hist[name] = grid
    kv = cur.execute(
        f"SELECT hour({local}) AS h, sum(isl + osl / 2.0), count(*) FROM requests "
        f"WHERE {where} GROUP BY ALL",
        [tz, *params],
    ).fetchall()
    footprint = np.zeros(24)
    counts = np.zeros(24)
    for h, total, n in kv:
        footprint[int(h)], counts[int(h)] = float(total), float(n)
    return {"cells": cells, "hist": hist, "footprint_sum": footprint, "count": counts}
