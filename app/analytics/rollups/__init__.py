"""Long windows read from the hourly rollups, their edges and dirty hours from raw rows.

A window [start, end) of at least MIN_HOURS whole hours is split into whole UTC hours whose
rollups are clean (from `rollup_shapes` / `rollup_values`) and the rest (partial hours at the
ends, hours marked dirty by a recent write) scanned raw and binned the same way, so every
request of the window is counted exactly once: `plan` plans the split, `sql` runs the
queries, `sketch` turns bucketed counts into quantile estimates. See app/storage/rollups.py.
"""

from app.analytics.rollups.plan import (
    MIN_HOURS,
    Part,
    Split,
    coverage,
    local_split,
    plan,
    split,
)
from app.analytics.rollups.sketch import GroupStats, MeasureStats
from app.analytics.rollups.sql import (
    SERIES_BY,
    busiest,
    gap_quantiles,
    half_octave_counts,
    local_hour_counts,
    request_count,
    sums_over_time,
    totals,
    ttft_by_isl,
    value_stats,
    values_over_time,
    values_over_time_by,
)

__all__ = [
    "MIN_HOURS",
    "SERIES_BY",
    "GroupStats",
    "MeasureStats",
    "Part",
    "Split",
    "busiest",
    "coverage",
    "gap_quantiles",
    "half_octave_counts",
    "local_hour_counts",
    "local_split",
    "plan",
    "request_count",
    "split",
    "sums_over_time",
    "totals",
    "ttft_by_isl",
    "value_stats",
    "values_over_time",
    "values_over_time_by",
]
