"""Window planning: which whole UTC hours of a window the rollups answer, and which parts
(partial hours at the ends, hours a recent write marked dirty) are read raw."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import duckdb

from app.analytics.filters import Filter

MIN_HOURS = 24  # shorter windows read raw rows: exact quantiles, and fast enough
HOUR = timedelta(hours=1)
# [lo, hi) of hours, either end open when its parameter is NULL.
IN_RANGE = (
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
        f"SELECT DISTINCT hour FROM rollup_dirty WHERE {IN_RANGE} ORDER BY hour",
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


def local_split(cur: duckdb.DuckDBPyConnection, flt: Filter, tz: str) -> Split | None:
    """`split`, when every rolled-up hour of the window lies inside one local hour of `tz`
    (its UTC offset is whole hours then), so hours can be summed into local hours and days;
    else None (read raw: at +05:30 a UTC hour straddles two local hours)."""
    sp = split(cur, flt)
    if sp is None:
        return None
    zone = ZoneInfo(tz)
    hours = cur.execute(
        f"SELECT DISTINCT hour FROM rollup_shapes WHERE {IN_RANGE}", [sp.lo, sp.hi]
    ).fetchall()
    # astimezone: ZoneInfo.utcoffset(dt) would read dt's wall clock as local time.
    whole = all(h[0].astimezone(zone).utcoffset().total_seconds() % 3600 == 0 for h in hours)
    return sp if whole else None
