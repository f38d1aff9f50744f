"""Choosing the time bucket of a trend from its window (5 min, 1 h or 1 d)."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import duckdb

from app.analytics.filters import Filter
from app.storage.rows import first_row

BUCKETS = {"5m": 300, "1h": 3600, "1d": 86400}


def span(
    cur: duckdb.DuckDBPyConnection, flt: Filter
) -> tuple[datetime | None, datetime | None, int]:
    """The window's bounds (falling back to its first and last request) and its stored rows
    (unweighted: enough to tell an empty window; sampling.sampling estimates requests)."""
    where, params = flt.where()
    row = first_row(
        cur,
        f"SELECT min(started_at), max(started_at), count(*) FROM requests WHERE {where}",
        params,
    )
    first, last, count = row or (None, None, 0)
    # Hours whose raw rows retention pruned (or a lake import brought) live on in the rollups:
    # they count too, as one stored row each (enough to tell the window is not empty).
    held = first_row(
        cur,
        "SELECT min(hour), max(hour) + INTERVAL 1 HOUR, count(*) FROM rollup_hours "
        "WHERE source <> 'raw' AND hour + INTERVAL 1 HOUR > coalesce(?, '-infinity'::TIMESTAMPTZ) "
        "AND hour < coalesce(?, 'infinity'::TIMESTAMPTZ)",
        [flt.start, flt.end],
    )
    if held and held[2]:
        first = held[0] if first is None else min(first, held[0])
        last = held[1] if last is None else max(last, held[1])
        count += held[2]
    return flt.start or first, flt.end or last, int(count)


def width(seconds: int) -> timedelta:
    """The bucket width as DuckDB's time_bucket needs it: whole days as days, so a "1 d"
    bucket starts at local midnight all year (a width in seconds would keep the zone's
    winter offset through summer time)."""
    return timedelta(days=seconds // 86400) if seconds % 86400 == 0 else timedelta(seconds=seconds)


@functools.cache
def _offsets(tz: str) -> frozenset[int]:
    """Every UTC offset (seconds) the zone has had or has planned, 1970-2100, from zoneinfo."""
    zone = ZoneInfo(tz)
    found = set()
    t = datetime(1970, 1, 1, tzinfo=UTC)
    while t.year < 2100:
        offset = t.astimezone(zone).utcoffset()
        found.add(int(offset.total_seconds()) if offset is not None else 0)
        t += timedelta(days=15)  # no zone has kept an offset for less than a month
    return frozenset(found)


def bucket_sql(column: str, seconds: int, tz: str, column_params: tuple = ()) -> tuple[str, list]:
    """SQL of the start of the local time bucket of `seconds` holding `column` in `tz`, and
    its parameters: local midnights for days (23- and 25-hour days included), the zone's own
    hour marks for hours.

    DuckDB's time_bucket(width, ts, zone) keeps the offset its origin had for sub-day widths,
    so where a zone's offsets differ by other than a multiple of the width (Lord Howe's
    +10:30/+11:00: hours would start at :30 half the year) the bucket is found from the local
    wall clock instead: the local floor read back in the zone, or, where that instant lies
    after the row (a repeated hour), the row's time less the local time since the floor.
    `column_params` are the column expression's own parameters (it may appear many times)."""
    w = width(seconds)
    offsets = _offsets(tz)
    fine = seconds >= 86400 or all((a - b) % seconds == 0 for a in offsets for b in offsets)
    c = list(column_params)
    if fine:
        return f"time_bucket(?::INTERVAL, {column}, ?)", [w, *c, tz]
    local = f"timezone(?, {column})"
    floor = f"time_bucket(?::INTERVAL, {local})"
    mark = f"timezone(?, {floor})"
    sql = f"(CASE WHEN {mark} <= {column} THEN {mark} ELSE {column} - ({local} - {floor}) END)"
    marks = [tz, w, tz, *c]  # in the order the placeholders appear in `sql`
    return sql, [*marks, *c, *marks, *c, tz, *c, w, tz, *c]


def bucket_for(start: datetime | None, end: datetime | None) -> str:
    """5 min up to 6 hours, 1 h up to 8 days, 1 d beyond: a few hundred points at most."""
    if start is None or end is None:
        return "1h"
    length = end - start
    if length <= timedelta(hours=6):
        return "5m"
    if length <= timedelta(days=8):
        return "1h"
    return "1d"
