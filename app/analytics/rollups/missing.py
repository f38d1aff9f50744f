"""What a view that reads raw rows only cannot see: the window's hours whose raw rows are gone
(sealed by retention, imported from the lake) and the requests the rollups count in them, said
in one sentence for the page's caption and the API's `raw_only_note`."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import duckdb

from app.analytics.filters import WEIGHT, Filter
from app.analytics.rollups.plan import _aware, _ceil, _floor, split
from app.analytics.rollups.sql import request_count
from app.analytics.sampling import compact
from app.storage.rows import first_row

HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
# Where to look when no narrower window holds every request.
ROLLED_VIEWS = (
    "the views that read the rollups (hourly and daily buckets, quantiles without exact=true) "
    "count every hour"
)


@dataclass(frozen=True)
class Missing:
    """A window's hours without raw rows and what the rollups count in the window."""

    hours: int  # whole or partial UTC hours the window spans
    sealed: int  # of them, hours retention pruned (the rollups are their record)
    lake: int  # of them, hours imported from a lake job (never raw rows)
    seen: int  # requests the raw rows left in the window stand for (what the view counts)
    total: int | None  # requests of the window the rollups and raw rows count; None: unknown
    after: datetime  # the end of the last hour without raw rows
    end: datetime  # the window's end (now for an open end)
    ends_now: bool  # the window runs up to now
    sliced: bool  # the view keeps some local hours or weekdays (counts are over all of them)
    tier_note: str | None = None  # what the rollups could not count at the grain asked

    def sentence(self, reader: str = "this view reads") -> str:
        """The caption: which hours lack raw rows and why, what the view sees of the window's
        requests, and how to see them all."""
        gone = self.sealed + self.lake
        if self.sealed and self.lake:
            why = (
                f"{self.sealed:,} pruned by retention (TOKENSHAPE_RETENTION_DAYS), "
                f"{self.lake:,} imported from the lake"
            )
        elif self.sealed:
            why = "pruned by retention: TOKENSHAPE_RETENTION_DAYS"
        else:
            why = "imported from the lake"
        verb = "has" if gone == 1 else "have"
        unit = "hour" if self.hours == 1 else "hours"
        text = (
            f"{gone:,} of the window's {self.hours:,} {unit} {verb} no raw rows ({why}); "
            f"{reader} raw rows only, counting {compact(self.seen)}"
        )
        if self.total is not None:
            text += f" of the window's {compact(self.total)} requests"
        else:
            text += " requests"
        if self.sliced:
            text += " (over all its hours and weekdays, before picking some)"
        text += "."
        if self.tier_note:
            text += f" (In the rollups, {self.tier_note}.)"
        days = math.floor((self.end - self.after) / DAY)
        if days >= 1:
            span = f"{days} day{'s' if days != 1 else ''}"
            where = (
                f"the last {span}"
                if self.ends_now
                else f"the {span} before {self.end:%Y-%m-%d %H:%M} UTC"
            )
            text += f" Narrow the window to {where} for the full picture."
        elif not self.tier_note:  # else the rollups cannot count every hour either
            text += f" No narrower window holds them all; {ROLLED_VIEWS}."
        else:
            text += " No narrower window holds them all."
        return text


def missing(
    cur: duckdb.DuckDBPyConnection, flt: Filter, now: datetime | None = None
) -> Missing | None:
    """The filter's window's hours without raw rows and the requests they hold, or None when
    every request of the window that the filter keeps still has its raw row.

    One query on `rollup_hours` when nothing is missing; else also the window's total from the
    rollups (`request_count` over `split`) and the raw rows' own count."""
    now = _aware(now) or datetime.now(UTC)
    start, end = _aware(flt.start), _aware(flt.end)
    lo = _floor(start) if start is not None else None
    row = first_row(
        cur,
        "SELECT count(*) FILTER (WHERE source = 'sealed'), count(*) FILTER (WHERE source = 'lake'),"
        " max(hour) FILTER (WHERE source <> 'raw'), min(hour) FROM rollup_hours "
        "WHERE hour >= coalesce(?, '-infinity'::TIMESTAMPTZ) "
        "AND hour < coalesce(?, 'infinity'::TIMESTAMPTZ)",
        [lo, end],
    )
    if not row or not (row[0] or row[1]):
        return None
    sealed, lake, last, first = int(row[0]), int(row[1]), row[2], row[3]
    after = last + HOUR
    stop = end if end is not None else max(now, after)
    begin = lo if lo is not None else first
    hours = max(round((_ceil(stop) - begin) / HOUR), sealed + lake)
    # Over every local hour and weekday: the rollups cannot pick local hours in every zone.
    whole = replace(flt, hours=(), weekdays=())
    where, params = whole.where()
    seen_row = first_row(
        cur, f"SELECT coalesce(sum({WEIGHT}), 0) FROM requests WHERE {where}", params
    )
    seen = round(float(seen_row[0])) if seen_row else 0
    total: int | None = None
    sp = split(cur, whole)
    tier_note = sp.note if sp is not None else None
    if sp is not None:
        found = request_count(cur, whole, sp)
        if found is None and tier_note is None:
            return None  # the rollups hold none of the filter's requests in those hours
        # With a tier note the rollups' count leaves hours out: no total is better than a low one.
        if found is not None and tier_note is None:
            total = round(found)
            if total <= seen:
                return None  # the filter's requests in those hours: none
    return Missing(
        hours=hours,
        sealed=sealed,
        lake=lake,
        seen=seen,
        total=total,
        after=after,
        end=stop,
        ends_now=end is None or end >= now - HOUR,
        sliced=bool(flt.hours or flt.weekdays),
        tier_note=tier_note,
    )


def raw_only_note(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    now: datetime | None = None,
    *,
    reader: str = "this view reads",
) -> str | None:
    """The sentence a raw-only view shows over this filter's window (`reader`: its subject
    and verb, e.g. "goodput reads"), or None when no request of the window lost its raw row."""
    found = missing(cur, flt, now)
    return None if found is None else found.sentence(reader)
