"""Local days and hours follow the zone's calendar (issue 26, class 6): midnight to midnight
(23- and 25-hour days), hours on the zone's own hour marks (half-hour zones too), on the exact
and the rollup paths, compared request by request with zoneinfo around every DST change of
Europe/Berlin and Australia/Lord_Howe (2023-2025) and America/Sao_Paulo's (2016-2019, its
last years of DST)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pandas as pd
import pytest

from app.analytics import overview_series
from app.analytics.filters import Filter
from app.storage import rollups
from app.storage.database import Database
from tests.support.records import record, store

ZONES = {
    "Europe/Berlin": (2023, 2025),
    "Australia/Lord_Howe": (2023, 2025),  # +10:30, DST +11:00: a half-hour change
    "America/Sao_Paulo": (2016, 2019),
}
NEAR = [-90, -31, -30, -1, 0, 1, 29, 30, 31, 61, 90]  # minutes from a change


def _changes(tz: str, first: int, last: int) -> list[datetime]:
    """The instants (UTC) at which the zone's offset changes, found hour by hour."""
    zone = ZoneInfo(tz)
    t = datetime(first, 1, 1, tzinfo=UTC)
    out = []
    prev = t.astimezone(zone).utcoffset()
    while t.year <= last:
        nxt = t + timedelta(minutes=30)
        off = nxt.astimezone(zone).utcoffset()
        if off != prev:
            out.append(nxt)
            prev = off
        t = nxt
    return out


def _instants(tz: str) -> list[datetime]:
    zone = ZoneInfo(tz)
    found = []
    for change in _changes(tz, *ZONES[tz]):
        found += [change + timedelta(minutes=m) for m in NEAR]
        # Local midnight of the change's day and the next, a minute either side.
        day = change.astimezone(zone).replace(hour=0, minute=0, second=0, microsecond=0)
        for d in (day, day + timedelta(days=1)):
            midnight = datetime(d.year, d.month, d.day, tzinfo=zone).astimezone(UTC)
            found += [midnight - timedelta(minutes=1), midnight, midnight + timedelta(minutes=1)]
    return sorted(set(found))


@pytest.fixture(scope="module")
def dst_db(tmp_path_factory, db_template) -> Iterator[Database]:
    """Requests at every instant around every change of the three zones, rollups built."""
    from tests.support.database import copy_database, open_migrated

    path = copy_database(db_template, tmp_path_factory.mktemp("dst") / "d.duckdb")
    with open_migrated(path) as db:
        for tz in ZONES:
            recs = [
                record(i, tz, started_at=t.isoformat().replace("+00:00", "Z"), engine=tz)
                for i, t in enumerate(_instants(tz))
            ]
            store(db, recs, gateway="dst")
        rollups.rebuild(db.new_cursor(), settle_s=0)
        yield db


def _local_floor(t: datetime, zone: ZoneInfo, bucket: str) -> datetime:
    """The instant (UTC) the local day or hour holding `t` starts, as zoneinfo says: local
    midnight, or the day's first instant where midnight does not exist (Sao Paulo's DST began
    at 00:00, so 16 Oct 2016 started at 01:00); the hour mark before `t` in local time."""
    local = t.astimezone(zone)
    if bucket == "1d":
        return datetime(local.year, local.month, local.day, tzinfo=zone).astimezone(UTC)
    floor = local.replace(minute=0, second=0, microsecond=0)
    return floor.astimezone(UTC)


def _buckets(frame: pd.DataFrame, zone: ZoneInfo) -> Counter:
    got: Counter = Counter()
    for ts, n in zip(frame["bucket"], frame["requests"], strict=True):
        stamp = pd.Timestamp(ts)
        stamp = stamp.tz_localize("UTC") if stamp.tzinfo is None else stamp
        got[stamp.to_pydatetime().astimezone(UTC)] += int(n)
    return got


@pytest.mark.parametrize("tz", ZONES)
@pytest.mark.parametrize("bucket", ["1h", "1d"])
@pytest.mark.parametrize("path", ["exact", "rollups"])
def test_buckets_start_on_the_zones_own_marks_and_count_what_zoneinfo_counts(
    dst_db, tz, bucket, path
):
    zone = ZoneInfo(tz)
    instants = _instants(tz)
    first, last = ZONES[tz]
    flt = Filter(
        start=datetime(first, 1, 1, tzinfo=UTC),
        end=datetime(last + 1, 1, 1, tzinfo=UTC),
        engines=(tz,),
    )
    cur = dst_db.cursor()
    # The fleet's series (the Overview's requests/s and p95s): the rollups where the zone's
    # hours are whole UTC hours, raw rows otherwise or when exact.
    frame = overview_series.quantile_over_time(cur, flt, bucket, tz, exact=path == "exact")
    got = _buckets(frame[frame["requests"] > 0], zone)
    want = Counter(_local_floor(t, zone, bucket) for t in instants)
    assert got == want, sorted(set(got.items()) ^ set(want.items()))[:6]


@pytest.mark.parametrize("tz", [*ZONES, "Asia/Kolkata", "Australia/Adelaide", "UTC"])
@pytest.mark.parametrize("seconds", [300, 3600, 86400])
def test_the_bucket_sql_matches_zoneinfo_at_every_quarter_hour_around_each_change(tz, seconds):
    """windows.bucket_sql itself, over every 15 minutes of two days around each change."""
    import duckdb

    from app.analytics.windows import bucket_sql

    zone = ZoneInfo(tz)
    first, last = ZONES.get(tz, (2023, 2025))
    changes = _changes(tz, first, last) or [datetime(first, 6, 1, tzinfo=UTC)]
    instants = sorted({c + timedelta(minutes=15 * k + 7) for c in changes for k in range(-96, 96)})
    sql, params = bucket_sql("t", seconds, tz)
    con = duckdb.connect()
    got = [
        row[0].astimezone(UTC)
        for row in con.execute(
            f"SELECT {sql} FROM unnest(?::TIMESTAMPTZ[]) AS s(t) ORDER BY t",
            [*params, instants],
        ).fetchall()
    ]
    unit = "1d" if seconds == 86400 else "1h"
    for t, start in zip(instants, got, strict=True):
        if seconds == 300:
            local = t.astimezone(zone)
            want = local.replace(minute=local.minute - local.minute % 5, second=0).astimezone(UTC)
        else:
            want = _local_floor(t, zone, unit)
        assert start == want, (t, t.astimezone(zone), start.astimezone(zone), want.astimezone(zone))
