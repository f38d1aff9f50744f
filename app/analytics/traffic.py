"""Traffic views: requests and tokens per second over time (whole or split by a dimension), the
prefix-cache hit rate per engine, the hour-of-day x weekday matrix."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from app.analytics import rollups, split, weighted
from app.analytics.filters import Filter
from app.analytics.windows import BUCKETS, bucket_sql


def rates(cur: duckdb.DuckDBPyConnection, flt: Filter, bucket: str, tz: str) -> pd.DataFrame:
    """Requests/s, input tokens/s and output tokens/s per time bucket (estimated: weighted
    by 1/sample_rate).

    Hourly and daily buckets of a window of a day or more sum the hourly rollups (exact) when
    `tz` keeps whole-hour offsets over it."""
    seconds = BUCKETS[bucket]
    sp = rollups.local_split(cur, flt, tz, seconds)
    frame = rollups.sums_over_time(cur, flt, sp, seconds, tz) if sp else None
    if frame is None:
        where, params = flt.where()
        sampled = weighted.is_sampled(cur, flt)
        local, local_params = bucket_sql("started_at", seconds, tz)
        frame = cur.execute(
            f"SELECT {local} AS bucket, "
            f"{weighted.count_sql(sampled)} AS requests, "
            f"{weighted.sum_sql('isl', sampled)} AS input_tokens, "
            f"{weighted.sum_sql('osl', sampled)} AS output_tokens FROM requests WHERE {where} "
            "GROUP BY 1 ORDER BY 1",
            [*local_params, *params],
        ).df()
    frame["requests_per_s"] = frame["requests"] / seconds
    frame["input_tokens_per_s"] = frame["input_tokens"] / seconds
    frame["output_tokens_per_s"] = frame["output_tokens"] / seconds
    return frame


def hour_weekday(cur: duckdb.DuckDBPyConnection, flt: Filter, tz: str) -> np.ndarray:
    """7 x 24 request counts: row 0 is Monday, column h is hour h of the day, both in tz
    (from the hourly rollups, exact, for a window of a day or more in a whole-hour zone)."""
    sp = rollups.local_split(cur, flt, tz)
    if sp is not None and (matrix := rollups.local_hour_counts(cur, flt, sp, tz)) is not None:
        return matrix
    where, params = flt.where()
    n = weighted.count_sql(weighted.is_sampled(cur, flt))
    rows = cur.execute(
        "SELECT isodow(started_at AT TIME ZONE ?) - 1 AS d, hour(started_at AT TIME ZONE ?) AS h, "
        f"{n} AS n FROM requests WHERE {where} GROUP BY ALL",
        [tz, tz, *params],
    ).fetchnumpy()
    matrix = np.zeros((7, 24), dtype=np.int64)
    matrix[rows["d"].astype(int), rows["h"].astype(int)] = rows["n"]
    return matrix


def requests_by(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    bucket: str,
    tz: str,
    by: str,
    *,
    limit: int = split.TOP_N,
) -> split.Breakdown:
    """Requests and requests/s per time bucket for each of the `limit` busiest values of `by`
    (one of split.SPLITS) and one series of the rest (split.OTHER); exact (weighted by
    1/sample_rate), from the hourly rollups where `rates` reads them (not for tenant)."""
    split.check(by)
    seconds = BUCKETS[bucket]
    top = split.top_values(cur, flt, by, limit)
    sp = rollups.local_split(cur, flt, tz, seconds) if by in split.ROLLED else None
    found = split.rolled_series(cur, flt, sp, seconds, tz, by, top) if sp is not None else None
    sampled = False
    if found is None:
        found, sampled = split.raw_series(cur, flt, seconds, tz, by, top)
    for frame in found.values():
        frame["requests_per_s"] = frame["requests"] / seconds
    return split.Breakdown(by, split.named(found, by, top), raw=sp is None, sampled=sampled)


def cache_hits(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    bucket: str,
    tz: str,
    *,
    limit: int = split.TOP_N,
) -> split.Breakdown:
    """The prefix-cache hit rate (cached input tokens / input tokens) per time bucket for each
    of the `limit` busiest engines among the requests that report `cached_tokens`, and one
    series of the rest; only those requests count (`requests`, `sum_isl`,
    `sum_cached_tokens`, `hit_rate`). From raw rows: no rollup keeps cached_tokens."""
    seconds = BUCKETS[bucket]
    top = split.top_values(cur, flt, "engine", limit, reported="cached_tokens")
    found, sampled = split.raw_series(
        cur,
        flt,
        seconds,
        tz,
        "engine",
        top,
        sums=("isl", "cached_tokens"),
        reported="cached_tokens",
    )
    for frame in found.values():
        frame["hit_rate"] = frame["sum_cached_tokens"] / frame["sum_isl"].where(
            frame["sum_isl"] > 0
        )
    return split.Breakdown("engine", split.named(found, "engine", top), sampled=sampled)
