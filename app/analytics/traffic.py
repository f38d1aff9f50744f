"""Traffic views: requests and tokens per second over time, the hour-of-day x weekday matrix."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from app.analytics import rollups, weighted
from app.analytics.filters import Filter
from app.analytics.windows import BUCKETS, width


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
        frame = cur.execute(
            "SELECT time_bucket(?::INTERVAL, started_at, ?) AS bucket, "
            f"{weighted.count_sql(sampled)} AS requests, "
            f"{weighted.sum_sql('isl', sampled)} AS input_tokens, "
            f"{weighted.sum_sql('osl', sampled)} AS output_tokens FROM requests WHERE {where} "
            "GROUP BY 1 ORDER BY 1",
            [width(seconds), tz, *params],
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
