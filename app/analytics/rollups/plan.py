"""Window planning: which tier of the rollups answers which part of a window, and which parts
(partial hours at the ends, hours a recent write marked dirty) are read raw.

The tiers (app/storage/tiers.py): `hourly` (UTC hours, full grain), `hourly_nt` (without
tenant, kept longer) and `daily` (local days, without tenant, kept longest). The coarsest tier
that can answer is used: a whole day of the window from `daily` when the query needs no finer
time (or its time buckets hold whole days), other hours from `hourly_nt`, or from `hourly`
when the filter names tenants. What no tier can answer at the grain asked (a tenant filter
older than the full-grain tier, hours of a day only the daily tier still holds) is left out
and said in `Split.note`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import duckdb

from app.analytics.filters import Filter
from app.analytics.rollups import memo
from app.analytics.windows import width

MIN_HOURS = 24  # shorter windows read raw rows: exact quantiles, and fast enough
HOUR = timedelta(hours=1)
# [lo, hi) of hours, either end open when its parameter is NULL.
IN_RANGE = (
    "hour >= coalesce(?, '-infinity'::TIMESTAMPTZ) AND hour < coalesce(?, 'infinity'::TIMESTAMPTZ)"
)
TIER_WORDS = {
    "hourly": "hourly rollups (full grain)",
    "hourly_nt": "hourly rollups (without tenant)",
    "daily": "daily rollups",
    "raw": "raw rows",
}


@dataclass(frozen=True)
class Part:
    """Rows of one tier whose `hour` is in [lo, hi)."""

    tier: str
    lo: datetime
    hi: datetime
    # Daily parts: the exact day keys (keys fixed when first built may interleave with days of
    # another zone, so a range could take in a day outside the window).
    keys: tuple[datetime, ...] = ()
    # Daily parts: every day's derived rows (tiers.derive) are as new as its hours, so a query
    # that needs no gateway, status or tenant may read them instead (app/analytics/rollups/sql).
    derived: bool = False


@dataclass(frozen=True)
class Split:
    """Rollup parts and raw intervals that cover the window, each request exactly once."""

    lo: datetime | None
    hi: datetime | None
    dirty: list[datetime]
    raw: list[tuple[datetime | None, datetime | None]]
    parts: list[Part] = field(default_factory=list)
    note: str | None = None  # what the window could not count at the grain asked, in words

    @property
    def tiers(self) -> list[str]:
        """The tiers that answered, finest first (raw rows included when read)."""
        used = {p.tier for p in self.parts} | ({"raw"} if self.raw else set())
        return [t for t in ("raw", "hourly", "hourly_nt", "daily") if t in used]

    def source(self) -> str:
        """Which tiers answered, in words (for a page's caption and the API)."""
        words = ", ".join(TIER_WORDS[t] for t in self.tiers) or "no stored rows"
        return f"from {words}" + (f"; {self.note}" if self.note else "")


def _aware(t: datetime | None) -> datetime | None:
    """UTC-aware (a naive time is taken as UTC, as the API does)."""
    return None if t is None else t.replace(tzinfo=UTC) if t.tzinfo is None else t


def _floor(t: datetime) -> datetime:
    # Rollup hours are UTC hours: an offset like +05:30 must not shift them.
    return t.astimezone(UTC).replace(minute=0, second=0, microsecond=0)


def _ceil(t: datetime) -> datetime:
    floor = _floor(t)
    return floor if floor == t else floor + HOUR


def _sealed_in(cur: duckdb.DuckDBPyConnection, lo: datetime | None, hi: datetime | None) -> bool:
    """Whether an hour of [lo, hi) has lost its raw rows (sealed, or imported)."""
    row = cur.execute(
        f"SELECT count(*) FROM rollup_hours WHERE source <> 'raw' AND {IN_RANGE}", [lo, hi]
    ).fetchone()
    return bool(row and row[0])


def _aligned_days(
    cur: duckdb.DuckDBPyConnection,
    lo: datetime | None,
    hi: datetime | None,
    seconds: int | None,
    tz: str | None,
) -> set[datetime]:
    """Days whose hours all lie in one time bucket of `seconds` in `tz` with the day's own
    start (so a day's row falls in the bucket its hours would); every day when no bucket."""
    if seconds is None:
        rows = cur.execute(
            f"SELECT DISTINCT day FROM rollup_hours WHERE {IN_RANGE}", [lo, hi]
        ).fetchall()
        return {r[0] for r in rows}
    if seconds < 86400:
        return set()
    rows = cur.execute(
        "SELECT day FROM rollup_hours WHERE "
        f"{IN_RANGE} GROUP BY day HAVING "
        "time_bucket(?::INTERVAL, min(hour), ?) = time_bucket(?::INTERVAL, max(hour), ?) "
        "AND time_bucket(?::INTERVAL, min(hour), ?) = time_bucket(?::INTERVAL, day, ?)",
        [lo, hi, *[width(seconds), tz] * 4],
    ).fetchall()
    return {r[0] for r in rows}


def _note(missing: tuple[int, datetime, datetime] | None, tenant: bool, hourly: bool) -> str | None:
    if missing is None:
        return None
    count, first, last = missing
    span = f"{first:%Y-%m-%d %H:00} to {last + HOUR:%Y-%m-%d %H:00} UTC"
    if tenant:
        why = (
            "tenants are kept only in the hourly rollups at full grain "
            "(TOKENSHAPE_ROLLUP_HOURLY_DAYS)"
        )
    elif hourly:
        why = "only whole days are kept that far back (the daily rollups)"
    else:
        why = "only whole days are kept that far back, and the window cuts those days"
    return f"{count} hours ({span}) are not counted: {why}"


def plan(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    seconds: int | None = None,
    tz: str | None = None,
) -> Split | None:
    """How to read this filter's window (time buckets of `seconds` in `tz`, or none), or None
    when it should be read raw."""
    if flt.hours or flt.weekdays:  # local-time slices do not align with UTC hours
        return None
    # Only the window, a tenant filter, the buckets and the zone change the plan: a page that
    # plans the same window for 20 engines plans it once (memo.shared).
    key = ("plan", flt.start, flt.end, bool(flt.tenants), seconds, tz)
    return memo.once(key, lambda: _plan(cur, flt, seconds, tz))


def _plan(
    cur: duckdb.DuckDBPyConnection, flt: Filter, seconds: int | None, tz: str | None
) -> Split | None:
    start, end = _aware(flt.start), _aware(flt.end)
    lo = _ceil(start) if start is not None else None
    hi = _floor(end) if end is not None else None
    # An open end runs to now: "the last hour" is short however it is written.
    last = hi if hi is not None else _floor(datetime.now(UTC)) + HOUR
    if lo is not None and last - lo < MIN_HOURS * HOUR and not _sealed_in(cur, lo, hi):
        return None  # unless raw rows of the window are gone: then only the rollups hold it
    dirty = [
        r[0]
        for r in cur.execute(
            f"SELECT DISTINCT hour FROM rollup_dirty WHERE {IN_RANGE} ORDER BY hour", [lo, hi]
        ).fetchall()
    ]
    tenant = bool(flt.tenants)
    # A dirty sealed hour (late rows for an hour whose raw rows were pruned) is read from both:
    # its tier rows are the record, its raw rows are only the late ones (disjoint until the
    # rebuild adds them and deletes their raw copies).
    sealed = {
        r[0]
        for r in cur.execute(
            f"SELECT hour FROM rollup_hours WHERE source = 'sealed' AND {IN_RANGE} "
            "AND list_contains(?, hour)",
            [lo, hi, dirty],
        ).fetchall()
    }
    dirty_set = set(dirty) - sealed
    # Days wholly inside the window, clean, held by the daily tier and aligned to the buckets.
    days: set[datetime] = set()
    all_days: list[datetime] = []
    if not tenant:
        aligned = _aligned_days(cur, lo, hi, seconds, tz)
        # Every hour of a day (not only those in the window) must be clean, held and inside.
        for day, first, final, held, has_dirty in cur.execute(
            "SELECT day, min(hour), max(hour), bool_and(in_day), "
            "bool_or(d.hour IS NOT NULL AND r.source <> 'sealed') "
            "FROM rollup_hours r LEFT JOIN (SELECT DISTINCT hour FROM rollup_dirty) d "
            "USING (hour) WHERE day IN (SELECT DISTINCT day FROM rollup_hours WHERE "
            f"{IN_RANGE}) GROUP BY day ORDER BY day",
            [lo, hi],
        ).fetchall():
            all_days.append(day)
            if day not in aligned or not held or has_dirty:
                continue
            if (lo is None or first >= lo) and (hi is None or final + HOUR <= hi):
                days.add(day)
    parts, missing = _hour_parts(cur, lo, hi, tenant, sorted(dirty_set), sorted(days))
    parts += _day_ranges(cur, all_days, days)
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
    hourly_needed = seconds is not None and seconds < 86400
    return Split(lo, hi, dirty, raw, parts, _note(missing, tenant, hourly_needed))


def _hour_parts(
    cur: duckdb.DuckDBPyConnection,
    lo: datetime | None,
    hi: datetime | None,
    tenant: bool,
    skip_hours: list[datetime],
    skip_days: list[datetime],
) -> tuple[list[Part], tuple[int, datetime, datetime] | None]:
    """The window's hours outside `skip_hours` and `skip_days`, each from the coarsest hourly
    tier that holds it, as runs of consecutive hours of one tier (gaps and islands, in SQL: a
    year is 8,760 hours); and (count, first, last) of the hours no hourly tier holds."""
    rows = cur.execute(
        "SELECT tier, min(hour), max(hour), count(*) FROM (SELECT hour, tier, "
        "epoch(hour) // 3600 - row_number() OVER (PARTITION BY tier ORDER BY hour) AS run "
        "FROM (SELECT hour, CASE WHEN NOT ? AND in_nt THEN 'hourly_nt' WHEN in_full "
        "THEN 'hourly' ELSE 'missing' END AS tier FROM rollup_hours WHERE "
        f"{IN_RANGE} AND NOT list_contains(?, hour) AND NOT list_contains(?, day))) "
        "GROUP BY tier, run ORDER BY 2",
        [tenant, lo, hi, skip_hours, skip_days],
    ).fetchall()
    parts = [Part(tier, first, last + HOUR) for tier, first, last, _ in rows if tier != "missing"]
    gone = [(n, first, last) for tier, first, last, n in rows if tier == "missing"]
    missing = (sum(g[0] for g in gone), gone[0][1], gone[-1][2]) if gone else None
    return parts, missing


def _day_ranges(
    cur: duckdb.DuckDBPyConnection, all_days: list[datetime], chosen: set[datetime]
) -> list[Part]:
    """The chosen days as one daily part; with their exact keys only when another day key
    lies between them (a per-row list filter costs 3-4x on a year of daily rows)."""
    keys = tuple(d for d in all_days if d in chosen)
    if not keys:
        return []
    row = cur.execute(
        "SELECT count(DISTINCT day) FROM rollup_hours WHERE in_day AND day >= ? AND day <= ?",
        [keys[0], keys[-1]],
    ).fetchone()
    exact = keys if not row or row[0] != len(keys) else ()
    stale = cur.execute(
        "SELECT count(*) FROM (SELECT day, max(built_at) AS built FROM rollup_hours "
        "WHERE day >= ? AND day <= ? AND list_contains(?, day) GROUP BY day) h "
        "LEFT JOIN rollup_derived d USING (day) WHERE d.built_at IS NULL OR d.built_at < h.built",
        [keys[0], keys[-1], list(keys)],
    ).fetchone()
    fresh = stale is not None and stale[0] == 0
    return [Part("daily", keys[0], keys[-1] + timedelta(microseconds=1), exact, fresh)]


def coverage(
    cur: duckdb.DuckDBPyConnection, flt: Filter, seconds: int | None = None, tz: str = "UTC"
) -> str | None:
    """Which rollup tiers (and raw rows) answer this window at this bucket width, and what
    they could not count, in words; None when it is read from raw rows alone."""
    sp = plan(cur, flt) if seconds is None else local_split(cur, flt, tz, seconds)
    if sp is None or not sp.parts:
        return None
    return f"Answered {sp.source()}."


def split(cur: duckdb.DuckDBPyConnection, flt: Filter) -> Split | None:
    """`plan` for totals over the window (no time buckets)."""
    return plan(cur, flt)


def local_split(
    cur: duckdb.DuckDBPyConnection, flt: Filter, tz: str, seconds: int = 3600
) -> Split | None:
    """`plan` for time buckets of `seconds` in `tz`, when every hour the hourly tiers answer
    lies inside one local hour of `tz` (its UTC offset is whole hours then), so hours can be
    summed into local hours and days; else None (read raw: at +05:30 a UTC hour straddles two
    local hours). Buckets under an hour are always read raw: the rollups hold whole hours."""
    if seconds < 3600:
        return None
    sp = plan(cur, flt, seconds, tz)
    if sp is None:
        return None
    # Hours whose offset in `tz` is not whole hours (UTC+05:30); timezone() gives local time.
    row = cur.execute(
        "SELECT count(*) FROM rollup_hours WHERE "
        f"{IN_RANGE} AND (epoch(timezone(?, hour)) - epoch(hour)) % 3600 <> 0",
        [sp.lo, sp.hi, tz],
    ).fetchone()
    return sp if not (row and row[0]) else None
