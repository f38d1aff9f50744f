"""Latency views: percentile trends, TTFT vs ISL, ITL vs token position, time to completion."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from app.analytics import rollups, weighted
from app.analytics.bins import LOG2_EDGES, case_sql
from app.analytics.filters import WEIGHT, Filter
from app.analytics.windows import BUCKETS, width
from app.storage.rollups import POSITION_EDGES, RELATIVE_ERROR
from app.storage.rows import first_row

E2E_EDGES_MS: tuple[int, ...] = (
    0,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    60_000,
    120_000,
    300_000,
)


TREND_MEASURES = ("ttft_ms", "itl_ms", "e2e_ms")
TREND_QUANTILES = (0.5, 0.9, 0.99)
TREND_NAMES = ("p50", "p90", "p99")


def trend(
    cur: duckdb.DuckDBPyConnection, flt: Filter, bucket: str, tz: str, *, exact: bool = False
) -> pd.DataFrame:
    """p50/p90/p99 of TTFT, ITL and E2E and the request count per time bucket.

    Hourly and daily buckets of a window of a day or more read the hourly rollups when `tz`
    keeps whole-hour offsets over it (else a UTC hour would straddle two local buckets): the
    percentiles are then within RELATIVE_ERROR, as `frame.attrs["relative_error"]` says."""
    seconds = BUCKETS[bucket]
    sp = None if exact else rollups.local_split(cur, flt, tz, seconds)
    if sp is not None:
        found = rollups.values_over_time(cur, flt, sp, seconds, tz, TREND_MEASURES, TREND_QUANTILES)
        if found is not None:
            frame, stats = found
            for m in TREND_MEASURES:
                for k, name in enumerate(TREND_NAMES):
                    frame[f"{m}_{name}"] = stats[m][:, k]
            frame.attrs["relative_error"] = RELATIVE_ERROR
            return frame
    where, params = flt.where()
    if weighted.is_sampled(cur, flt):
        return _weighted_trend(cur, where, [width(seconds), tz, *params])
    cols = ", ".join(f"quantile_cont({m}, {list(TREND_QUANTILES)}) AS {m}" for m in TREND_MEASURES)
    frame = cur.execute(
        f"SELECT time_bucket(?::INTERVAL, started_at, ?) AS bucket, count(*) AS requests, "
        f"{cols} FROM requests WHERE {where} GROUP BY 1 ORDER BY 1",
        [width(seconds), tz, *params],
    ).df()
    for m in TREND_MEASURES:
        values = frame.pop(m)
        for k, name in enumerate(TREND_NAMES):
            frame[f"{m}_{name}"] = [None if v is None else v[k] for v in values]
    frame.attrs["relative_error"] = 0.0
    return frame


def _weighted_trend(cur: duckdb.DuckDBPyConnection, where: str, params: list) -> pd.DataFrame:
    """trend's raw path over sampled rows: weighted counts and quantiles per bucket."""
    source = (
        f"(SELECT time_bucket(?::INTERVAL, started_at, ?) AS bucket, * FROM requests WHERE {where})"
    )
    frame = cur.execute(
        f"SELECT bucket, {weighted.count_sql(True)} AS requests FROM {source} "
        "GROUP BY 1 ORDER BY 1",
        params,
    ).df()
    found = weighted.quantiles(cur, source, params, ("bucket",), TREND_MEASURES, TREND_QUANTILES)
    # The keys come back as DuckDB's Python values; match them on the frame's as Timestamps.
    by_time = {(pd.Timestamp(k[0]).tz_convert("UTC"), k[1]): v for k, v in found.items()}
    for m in TREND_MEASURES:
        for k, name in enumerate(TREND_NAMES):
            frame[f"{m}_{name}"] = [
                (by_time.get((pd.Timestamp(b).tz_convert("UTC"), m)) or [None] * 3)[k]
                for b in frame["bucket"]
            ]
    frame.attrs["relative_error"] = 0.0
    return frame


def ttft_vs_isl(
    cur: duckdb.DuckDBPyConnection, flt: Filter, *, exact: bool = False
) -> tuple[pd.DataFrame, float | None]:
    """Median and p90 TTFT per ISL bin, and the fitted slope in ms per 1,000 input tokens.

    A window of a day or more reads the hourly TTFT rollup: medians and p90s within
    RELATIVE_ERROR (`frame.attrs["relative_error"]`), counts and the slope exact."""
    sp = None if exact else rollups.split(cur, flt)
    rolled = rollups.ttft_by_isl(cur, flt, sp, (0.5, 0.9)) if sp is not None else None
    if rolled is not None:
        bins, slope = rolled
        frame = pd.DataFrame(
            [(k, n, q[0], q[1]) for k, (n, q) in sorted(bins.items())],
            columns=["bin", "requests", "ttft_p50", "ttft_p90"],
        )
        frame["isl_from"] = [LOG2_EDGES[int(b)] for b in frame["bin"]]
        frame.attrs["relative_error"] = RELATIVE_ERROR
        return frame, None if slope is None else slope * 1000
    where, params = flt.where()
    isl_case, edge_params = case_sql("isl", LOG2_EDGES)
    if weighted.is_sampled(cur, flt):
        source = (
            f"(SELECT {isl_case} AS bin, * FROM requests WHERE {where} AND ttft_ms IS NOT NULL)"
        )
        frame = cur.execute(
            f"SELECT bin, {weighted.count_sql(True)} AS requests FROM {source} "
            "GROUP BY 1 ORDER BY 1",
            edge_params + params,
        ).df()
        found = weighted.quantiles(
            cur, source, edge_params + params, ("bin",), ("ttft_ms",), (0.5, 0.9)
        )
        for k, name in enumerate(("ttft_p50", "ttft_p90")):
            frame[name] = [(found.get((b, "ttft_ms")) or [None, None])[k] for b in frame["bin"]]
        # The weighted least-squares slope: each row counts 1/sample_rate times.
        slope_sql = (
            f"(sum({WEIGHT}) * sum({WEIGHT} * isl * ttft_ms) - sum({WEIGHT} * isl) * "
            f"sum({WEIGHT} * ttft_ms)) / nullif(sum({WEIGHT}) * sum({WEIGHT} * isl * isl) - "
            f"sum({WEIGHT} * isl) ^ 2, 0)"
        )
    else:
        frame = cur.execute(
            f"SELECT {isl_case} AS bin, count(*) AS requests, median(ttft_ms) AS ttft_p50, "
            f"quantile_cont(ttft_ms, 0.9) AS ttft_p90 FROM requests "
            f"WHERE {where} AND ttft_ms IS NOT NULL GROUP BY 1 ORDER BY 1",
            edge_params + params,
        ).df()
        slope_sql = "regr_slope(ttft_ms, isl)"
    frame["isl_from"] = [LOG2_EDGES[int(b)] for b in frame["bin"]]
    frame.attrs["relative_error"] = 0.0
    row = first_row(
        cur,
        f"SELECT {slope_sql} FROM requests WHERE {where} AND ttft_ms IS NOT NULL",
        params,
    )
    slope = None if row is None or row[0] is None else float(row[0]) * 1000
    return frame, slope


def itl_by_position(
    cur: duckdb.DuckDBPyConnection, flt: Filter, *, exact: bool = False
) -> pd.DataFrame:
    """Median and p90 inter-token gap per output-token position bucket (from token_gaps_ms).

    A window of a day or more reads the hourly gap rollup: its quantiles are within
    RELATIVE_ERROR, as `frame.attrs["relative_error"]` says (0.0 when exact)."""
    sp = None if exact else rollups.split(cur, flt)
    rolled = rollups.gap_quantiles(cur, flt, sp, (0.5, 0.9)) if sp is not None else None
    if rolled is not None:
        frame = pd.DataFrame(
            [(pb, n, q[0], q[1]) for pb, (n, q) in sorted(rolled.items())],
            columns=["bin", "gaps", "itl_p50", "itl_p90"],
        )
        frame["position_from"] = [POSITION_EDGES[int(b)] for b in frame["bin"]]
        frame.attrs["relative_error"] = RELATIVE_ERROR
        return frame
    where, params = flt.where()
    pos_case, edge_params = case_sql("pos", POSITION_EDGES)
    if weighted.is_sampled(cur, flt):
        return _weighted_itl(cur, where, pos_case, edge_params + params)
    frame = cur.execute(
        f"""SELECT {pos_case} AS bin, count(*) AS gaps, median(gap) AS itl_p50,
                   quantile_cont(gap, 0.9) AS itl_p90
            FROM (SELECT unnest(range(1, len(token_gaps_ms) + 1)) AS pos,
                         unnest(token_gaps_ms) AS gap
                  FROM requests WHERE {where} AND token_gaps_ms IS NOT NULL)
            GROUP BY 1 ORDER BY 1""",
        edge_params + params,
    ).df()
    frame["position_from"] = [POSITION_EDGES[int(b)] for b in frame["bin"]]
    frame.attrs["relative_error"] = 0.0
    return frame


def _weighted_itl(
    cur: duckdb.DuckDBPyConnection, where: str, pos_case: str, params: list
) -> pd.DataFrame:
    """itl_by_position's raw path over sampled rows: each gap weighs its request's weight."""
    source = (
        f"(SELECT {pos_case} AS bin, gap, sample_rate FROM (SELECT sample_rate, "
        "unnest(range(1, len(token_gaps_ms) + 1)) AS pos, unnest(token_gaps_ms) AS gap "
        f"FROM requests WHERE {where} AND token_gaps_ms IS NOT NULL))"
    )
    frame = cur.execute(
        f"SELECT bin, {weighted.count_sql(True)} AS gaps FROM {source} GROUP BY 1 ORDER BY 1",
        params,
    ).df()
    found = weighted.quantiles(cur, source, params, ("bin",), ("gap",), (0.5, 0.9))
    for k, name in enumerate(("itl_p50", "itl_p90")):
        frame[name] = [(found.get((b, "gap")) or [None, None])[k] for b in frame["bin"]]
    frame["position_from"] = [POSITION_EDGES[int(b)] for b in frame["bin"]]
    frame.attrs["relative_error"] = 0.0
    return frame


def e2e_distribution(cur: duckdb.DuckDBPyConnection, flt: Filter) -> pd.DataFrame:
    """Requests per time-to-completion bin (E2E, ms; half-open bins, the last open-ended)."""
    where, params = flt.where()
    e2e_case, edge_params = case_sql("e2e_ms", E2E_EDGES_MS)
    n = weighted.count_sql(weighted.is_sampled(cur, flt))
    rows = cur.execute(
        f"SELECT {e2e_case} AS bin, {n} AS n FROM requests "
        f"WHERE {where} AND e2e_ms IS NOT NULL GROUP BY 1",
        edge_params + params,
    ).fetchnumpy()
    counts = np.zeros(len(E2E_EDGES_MS), dtype=np.int64)
    counts[rows["bin"].astype(int)] = rows["n"]
    return pd.DataFrame({"e2e_from_ms": E2E_EDGES_MS, "requests": counts})
