"""Long windows read from the hourly rollups, their edges and dirty hours from raw rows.

A window [start, end) of at least MIN_HOURS whole hours is split into whole UTC hours whose
rollups are clean (from `rollup_shapes` / `rollup_values`) and the rest (partial hours at the
ends, hours marked dirty by a recent write) scanned raw and binned the same way, so every
request of the window is counted exactly once. See app/storage/rollups.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np

from app.analytics.filters import Filter
from app.storage.rollups import (
    GAMMA,
    HALF_OCTAVE_EDGES,
    MEASURES,
    ZERO_BUCKET,
    bucket_sql,
    half_octave_sql,
)

MIN_HOURS = 24  # shorter windows read raw rows: exact quantiles, and fast enough
HOUR = timedelta(hours=1)
# [lo, hi) of hours, either end open when its parameter is NULL.
_IN_RANGE = (
    "hour >= coalesce(?, '-infinity'::TIMESTAMPTZ) AND hour < coalesce(?, 'infinity'::TIMESTAMPTZ)"
)


@dataclass(frozen=True)
class Split:
    """Whole clean hours [lo, hi) from rollups (None: unbounded) and raw intervals."""

    lo: datetime | None
    hi: datetime | None
    dirty: list[datetime]
    raw: list[tuple[datetime | None, datetime | None]]


def _aware(t: datetime | None) -> datetime | None:
    """UTC-aware (a naive time is taken as UTC, as the API does)."""
    return None if t is None else t.replace(tzinfo=UTC) if t.tzinfo is None else t


def _floor(t: datetime) -> datetime:
    # Rollup hours are UTC hours: an offset like +05:30 must not shift them.
    return t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _ceil(t: datetime) -> datetime:
    floor = _floor(t)
    return floor if floor == t else floor + HOUR


def split(cur: duckdb.DuckDBPyConnection, flt: Filter) -> Split | None:
    """How to read this filter's window, or None when it should be read raw."""
    if flt.hours or flt.weekdays:  # local-time slices do not align with UTC hours
        return None
    start, end = _aware(flt.start), _aware(flt.end)
    lo = _ceil(start) if start is not None else None
    hi = _floor(end) if end is not None else None
    # An open end runs to now: "the last hour" is short however it is written.
    last = hi if hi is not None else _floor(datetime.now(UTC)) + HOUR
    if lo is not None and last - lo < MIN_HOURS * HOUR:
        return None
    rows = cur.execute(
        f"SELECT DISTINCT hour FROM rollup_dirty WHERE {_IN_RANGE} ORDER BY hour",
        [lo, hi],
    ).fetchall()
    dirty = [r[0] for r in rows]
    raw: list[tuple[datetime | None, datetime | None]] = []
    if start is not None and lo is not None and start < lo:
        raw.append((start, lo))
    for hour in dirty:  # contiguous dirty hours become one interval
        if raw and raw[-1][1] == hour:
            raw[-1] = (raw[-1][0], hour + HOUR)
        else:
            raw.append((hour, hour + HOUR))
    if end is not None and hi is not None and hi < end:
        if raw and raw[-1][1] == hi:
            raw[-1] = (raw[-1][0], end)
        else:
            raw.append((hi, end))
    return Split(lo, hi, dirty, raw)


def _rollup_where(flt: Filter, sp: Split) -> tuple[str, list]:
    dims, params = flt.dims_where()
    where = f"{_IN_RANGE} AND NOT list_contains(?, hour) AND {dims}"
    return where, [sp.lo, sp.hi, sp.dirty, *params]


def _raw_selects(flt: Filter, sp: Split, template: str) -> tuple[list[str], list]:
    """`template` once per raw interval, its `{src}` the interval's rows (so each SELECT can
    skip row groups by time)."""
    dims, dim_params = flt.dims_where()
    src = f"(SELECT * FROM requests WHERE started_at >= ? AND started_at < ? AND {dims})"
    parts, params = [], []
    for start, end in sp.raw:
        parts.append(template.replace("{src}", src))
        params += [start, end, *dim_params]
    return parts, params


def half_octave_counts(cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split) -> np.ndarray:
    """Request counts per (half-octave ISL bin, half-octave OSL bin) over the window."""
    where, params = _rollup_where(flt, sp)
    parts = [f"SELECT ib, ob, n FROM rollup_shapes WHERE {where}"]
    raw, raw_params = _raw_selects(
        flt,
        sp,
        f"SELECT {half_octave_sql('isl')} AS ib, {half_octave_sql('osl')} AS ob, count(*) AS n "
        "FROM {src} GROUP BY ALL",
    )
    rows = cur.execute(
        f"SELECT ib, ob, sum(n)::BIGINT AS n FROM ({' UNION ALL '.join(parts + raw)}) GROUP BY ALL",
        params + raw_params,
    ).fetchnumpy()
    size = len(HALF_OCTAVE_EDGES)
    counts = np.zeros((size, size), dtype=np.int64)
    np.add.at(counts, (rows["ib"].astype(int), rows["ob"].astype(int)), rows["n"].astype(np.int64))
    return counts


def _estimate(buckets: np.ndarray, counts: np.ndarray, top: float, p: float) -> float:
    """quantile_cont's interpolation between the two ranks it uses, on their buckets'
    midpoints: each is within RELATIVE_ERROR of its value, so the result is of the truth."""
    cum = np.cumsum(counts)
    pos = p * (int(cum[-1]) - 1)
    k = int(np.floor(pos))
    frac = pos - k
    first = _mid(buckets[np.searchsorted(cum, k, side="right")])
    second = _mid(buckets[np.searchsorted(cum, min(k + 1, int(cum[-1]) - 1), side="right")])
    return min(first + frac * (second - first), top)


def _mid(bucket: int) -> float:
    return 0.0 if bucket == ZERO_BUCKET else 2 * GAMMA ** (int(bucket) + 1) / (GAMMA + 1)


@dataclass(frozen=True)
class MeasureStats:
    """One measure of one group: quantile estimates, and the exact max, count and sum."""

    quantiles: list[float]
    top: float
    n: int
    total: float


@dataclass(frozen=True)
class GroupStats:
    """Per measure stats of one group (None: no value of that measure), and its requests
    whose status is not ok."""

    measures: dict[str, MeasureStats | None]
    not_ok: int


def value_stats(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: Split,
    quantiles: tuple[float, ...],
    *,
    by_model: bool = False,
) -> dict[str | None, GroupStats] | None:
    """Stats of every measure over the window, per model or for all (key None); None when
    no clean hour of the rollups is in the window (then the caller's exact path is as fast)."""
    where, params = _rollup_where(flt, sp)
    group = "model" if by_model else "NULL::VARCHAR"
    values = ", ".join(f"{m}::DOUBLE" for m in MEASURES)
    # Every request has an ISL (measure 0), so its rows count requests and those not ok.
    raw, raw_params = _raw_selects(
        flt,
        sp,
        f"SELECT g, measure, {bucket_sql('v')} AS b, count(*) AS n, max(v) AS vmax, "
        "sum(v) AS vsum, count(*) FILTER (WHERE measure = 0 AND status <> 'ok') AS not_ok, "
        f"false AS rolled FROM (SELECT {group} AS g, status, "
        f"unnest(range({len(MEASURES)})) AS measure, unnest([{values}]) AS v FROM {{src}}) "
        "WHERE v IS NOT NULL GROUP BY g, measure, b",
    )
    rows = cur.execute(
        "SELECT g, measure, b, sum(n)::BIGINT AS n, max(vmax) AS vmax, sum(vsum) AS vsum, "
        "sum(not_ok)::BIGINT AS not_ok, bool_or(rolled) AS rolled FROM ("
        f"SELECT {group} AS g, measure, b, n, vmax, vsum, "
        "CASE WHEN measure = 0 AND status <> 'ok' THEN n ELSE 0 END AS not_ok, true AS rolled "
        f"FROM rollup_values WHERE {where}"
        + "".join(f" UNION ALL {q}" for q in raw)
        + ") GROUP BY g, measure, b ORDER BY g, measure, b",
        params + raw_params,
    ).fetchnumpy()
    if not rows["rolled"].any():
        return None
    out: dict[str | None, GroupStats] = {}
    groups = rows["g"]
    for name in dict.fromkeys(groups.tolist()):  # first-seen order, None included
        in_group = np.array([g == name for g in groups.tolist()])
        measures: dict[str, MeasureStats | None] = {}
        for index, measure in enumerate(MEASURES):
            mask = in_group & (rows["measure"] == index)
            if not mask.any():
                measures[measure] = None
                continue
            buckets, counts = rows["b"][mask], rows["n"][mask].astype(np.int64)
            top = float(rows["vmax"][mask].max())
            measures[measure] = MeasureStats(
                [_estimate(buckets, counts, top, p) for p in quantiles],
                top,
                int(counts.sum()),
                float(rows["vsum"][mask].sum()),
            )
        out[name] = GroupStats(measures, int(rows["not_ok"][in_group].sum()))
    return out
