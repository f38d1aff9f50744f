"""The Overview's latency series: one quantile of TTFT and ITL (and, for the fleet, E2E) per
time bucket, per engine.

`app/analytics/latency.trend` has p50/p90/p99 only; the Overview draws latency at each
engine's SLO percentile (p95 unless a profile says otherwise), so it asks for that quantile
through the same machinery: hourly and daily buckets of a window of a day or more read the
hourly rollups (quantiles within RELATIVE_ERROR, `frame.attrs["relative_error"]`), the rest
reads raw rows (exact; weighted by 1/sample_rate when the window holds sampled rows)."""

from __future__ import annotations

from dataclasses import replace

import duckdb
import pandas as pd

from app.analytics import rollups, weighted
from app.analytics.filters import WEIGHT, Filter
from app.analytics.windows import BUCKETS, bucket_sql
from app.storage.rollups import RELATIVE_ERROR

MEASURES = ("ttft_ms", "itl_ms")
# The fleet's latency chart adds the whole request (E2E, "total") to TTFT and ITL.
FLEET_MEASURES = ("ttft_ms", "itl_ms", "e2e_ms")


def quantile_over_time(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    bucket: str,
    tz: str,
    q: float = 0.95,
    *,
    exact: bool = False,
    measures: tuple[str, ...] = MEASURES,
) -> pd.DataFrame:
    """Per time bucket (`windows.BUCKETS`, local to `tz`): `bucket`, `requests` (weighted) and
    the `q` quantile of each of `measures` (TTFT and ITL unless asked; columns named after
    them, NaN: none measured)."""
    if not set(measures) <= set(FLEET_MEASURES):  # names go into the SQL: fixed ones only
        raise ValueError(f"measures {measures!r}: choose from {', '.join(FLEET_MEASURES)}")
    seconds = BUCKETS[bucket]
    sp = None if exact else rollups.local_split(cur, flt, tz, seconds)
    if sp is not None:
        found = rollups.values_over_time(cur, flt, sp, seconds, tz, measures, (q,))
        if found is not None:
            frame, stats = found
            for m in measures:
                frame[m] = stats[m][:, 0]
            frame["requests"] = frame["requests"].astype(float)
            frame.attrs["relative_error"] = RELATIVE_ERROR
            return frame
    where, params = flt.where()
    local, lead = bucket_sql("started_at", seconds, tz)
    if weighted.is_sampled(cur, flt):
        source = f"(SELECT {local} AS bucket, * FROM requests WHERE {where})"
        frame = cur.execute(
            f"SELECT bucket, sum({WEIGHT}) AS requests FROM {source} GROUP BY 1 ORDER BY 1",
            [*lead, *params],
        ).df()
        found_q = weighted.quantiles(cur, source, [*lead, *params], ("bucket",), measures, (q,))
        # DuckDB hands the keys back as Python datetimes: match them as Timestamps.
        by_time = {(pd.Timestamp(k[0]), k[1]): v[0] for k, v in found_q.items()}
        for m in measures:
            frame[m] = [by_time.get((pd.Timestamp(b), m)) for b in frame["bucket"]]
    else:
        cols = ", ".join(f"quantile_cont({m}, ?) AS {m}" for m in measures)
        frame = cur.execute(
            f"SELECT {local} AS bucket, "
            f"count(*)::DOUBLE AS requests, {cols} FROM requests WHERE {where} "
            "GROUP BY 1 ORDER BY 1",
            [*lead, *([q] * len(measures)), *params],
        ).df()
    for m in measures:
        frame[m] = pd.to_numeric(frame[m], errors="coerce").astype(float)
    frame["requests"] = frame["requests"].astype(float)
    frame.attrs["relative_error"] = 0.0
    return frame


def engines_in(cur: duckdb.DuckDBPyConnection, flt: Filter, limit: int = 12) -> list[str]:
    """The named engines of the window, busiest first (at most `limit`), counting the hours
    whose raw rows are gone (pruned, or imported from the lake) from the rollups."""
    if (sp := rollups.split(cur, flt)) is not None:
        found = rollups.busiest(cur, flt, sp, "engine", limit)
        if found is not None:
            return found
    where, params = flt.where()
    rows = cur.execute(
        f"SELECT engine FROM requests WHERE {where} AND engine IS NOT NULL "
        f"GROUP BY engine ORDER BY sum({WEIGHT}) DESC, engine LIMIT ?",
        [*params, limit],
    ).fetchall()
    return [r[0] for r in rows]


def quantile_by_engine(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    percentiles: dict[str, float],
    bucket: str,
    tz: str,
) -> dict[str, pd.DataFrame] | None:
    """`quantile_over_time` for each engine of `percentiles` (engine -> its quantile, 0-1)
    from one scan of the rollups; None when the window is not read from them (then ask
    `quantile_over_time` per engine)."""
    seconds = BUCKETS[bucket]
    narrowed = replace(flt, engines=tuple(percentiles))
    sp = rollups.local_split(cur, narrowed, tz, seconds)
    if sp is None or not percentiles:
        return None
    qs = tuple(sorted(set(percentiles.values())))
    found = rollups.values_over_time_by(
        cur, narrowed, sp, seconds, tz, MEASURES, qs, "engine", tuple(percentiles)
    )
    if found is None:
        return None
    out: dict[str, pd.DataFrame] = {}
    for engine, q in percentiles.items():
        if engine not in found:
            frame = pd.DataFrame({"bucket": [], "requests": []}).astype({"requests": float})
            for m in MEASURES:
                frame[m] = pd.Series([], dtype=float)
        else:
            frame, stats = found[engine]
            for m in MEASURES:
                frame[m] = stats[m][:, qs.index(q)]
            frame["requests"] = frame["requests"].astype(float)
        frame.attrs["relative_error"] = RELATIVE_ERROR
        out[engine] = frame
    return out


def for_engine(flt: Filter, engine: str) -> Filter:
    """The filter narrowed to one engine (already within the filter's engines)."""
    return replace(flt, engines=(engine,))
