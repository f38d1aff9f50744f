"""Views that read raw rows only say what they cannot see: hours sealed by retention or imported
from the lake, and the requests the rollups count in them; the filter bar's choices include
values only the rollups still hold."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from app.analytics import overview
from app.analytics.filters import Filter
from app.analytics.rollups.missing import missing, raw_only_note
from app.analytics.sampling import compact
from app.services import slo
from app.services.rightsizing import drift_note, seasonal, seasonal_dict
from app.sizing.slo import Fleet
from app.storage import lake, retention, rollups
from app.storage.database import Database
from tests.support.database import copy_database, open_migrated
from tests.support.records import record, store

END = datetime(2026, 11, 23, tzinfo=UTC)
D, H = timedelta(days=1), timedelta(hours=1)
CUT = END - 5 * D  # raw rows received before this are pruned (whole hours, sealed)
WEEK = Filter(start=END - 7 * D, end=END)


@pytest.fixture(scope="module")
def template(demo_template):
    """Ten days of demo traffic (every hour has some), rollups built, the demo profiles."""
    return demo_template(requests=6_000, days=10, end=END)


@pytest.fixture
def db(template, tmp_path) -> Iterator[Database]:
    with open_migrated(copy_database(template, tmp_path / "r.duckdb")) as database:
        yield database


def _count(db: Database, flt: Filter) -> int:
    where, params = flt.where()
    return db.cursor().execute(f"SELECT count(*) FROM requests WHERE {where}", params).fetchone()[0]


def _sealed(db: Database, flt: Filter) -> int:
    return (
        db.cursor()
        .execute(
            "SELECT count(*) FROM rollup_hours WHERE source = 'sealed' AND hour >= ? AND hour < ?",
            [flt.start, flt.end],
        )
        .fetchone()[0]
    )


def _prune(db: Database, before: datetime = CUT) -> int:
    deleted, _ = retention.prune_table(db.cursor(), "requests", before)
    assert deleted > 0
    return deleted


def test_no_note_while_every_raw_row_is_kept(db):
    cur = db.cursor()
    assert missing(cur, WEEK, END) is None
    assert raw_only_note(cur, WEEK, END) is None
    assert raw_only_note(cur, Filter(), END) is None


def test_sealed_hours_are_counted_and_said(db):
    total = _count(db, WEEK)
    _prune(db)
    seen = _count(db, WEEK)
    assert 0 < seen < total
    sealed = _sealed(db, WEEK)
    assert sealed == 48  # the window's first two days: every hour of them had traffic
    found = missing(db.cursor(), WEEK, END)
    assert found is not None
    assert (found.hours, found.sealed, found.lake) == (168, sealed, 0)
    assert (found.seen, found.total) == (seen, total)  # the rollups still count every request
    assert found.after == CUT and found.ends_now
    text = found.sentence()
    assert text.startswith(
        "48 of the window's 168 hours have no raw rows (pruned by retention: "
        "TOKENSHAPE_RETENTION_DAYS); this view reads raw rows only, counting "
        f"{compact(seen)} of the window's {compact(total)} requests."
    ), text
    assert text.endswith("Narrow the window to the last 5 days for the full picture.")
    assert raw_only_note(db.cursor(), WEEK, END, reader="goodput reads") == text.replace(
        "this view reads", "goodput reads"
    )
    # Seen from later, the window no longer ends now: the narrower window is named by its end.
    later = missing(db.cursor(), WEEK, END + 3 * D)
    assert later is not None
    assert "Narrow the window to the 5 days before 2026-11-23 00:00 UTC" in later.sentence()


def test_the_counts_follow_the_filter(db):
    engine = "llm-70b"
    flt = replace(WEEK, engines=(engine,))
    total = _count(db, flt)
    _prune(db)
    found = missing(db.cursor(), flt, END)
    assert found is not None and found.sealed == 48
    assert (found.seen, found.total) == (_count(db, flt), total)
    # A window after the pruned hours misses nothing, nor does a model with no request in them.
    assert raw_only_note(db.cursor(), Filter(start=CUT, end=END), END) is None
    assert raw_only_note(db.cursor(), replace(WEEK, models=("no-such-model",)), END) is None


def test_a_window_only_the_rollups_hold(db):
    old = Filter(start=END - 9 * D, end=END - 6 * D)
    total = _count(db, old)
    _prune(db)
    assert _count(db, old) == 0
    found = missing(db.cursor(), old, END)
    assert found is not None and (found.seen, found.total, found.sealed) == (0, total, 72)
    text = found.sentence()
    assert f"counting 0 of the window's {compact(total)} requests" in text
    assert "No narrower window holds them all" in text  # every hour of it is gone


def test_a_local_time_slice_says_its_counts_are_over_all_hours(db):
    _prune(db)
    sliced = replace(WEEK, weekdays=(1, 2, 3), tz="Europe/Berlin")
    found, whole = missing(db.cursor(), sliced, END), missing(db.cursor(), WEEK, END)
    assert found is not None and whole is not None
    assert (found.seen, found.total) == (whole.seen, whole.total) and found.sliced
    assert "(over all its hours and weekdays, before picking some)" in found.sentence()


def test_services_pass_the_note_to_goodput_seasonal_and_drift(db):
    _prune(db)
    rep = slo.report(db, WEEK, Fleet())
    assert rep is not None and rep.raw_only_note is not None
    assert rep.raw_only_note.startswith("48 of the window's 168 hours")
    assert "goodput reads raw rows only" in rep.raw_only_note
    assert slo.report_dict(rep, WEEK)["raw_only_note"] == rep.raw_only_note
    # Drift compares the two weeks before its end: five days of traffic in them are sealed.
    note = drift_note(db, "llm-70b", END, END)
    assert note is not None and note.startswith("120 of the window's 336 hours")
    # Seasonal plans over the last whole week before END + 1 day: two days of it are sealed.
    report = seasonal(db, "llm-70b", now=END + D, tz="UTC", weeks=1)
    assert report.raw_only_note is not None
    assert report.raw_only_note.startswith("24 of the window's 168 hours")
    assert seasonal_dict(report)["raw_only_note"] == report.raw_only_note


def test_dimension_values_include_values_only_the_rollups_hold(db):
    store(
        db,
        [
            record(i, "gone", started_at=(END - 8 * D + i * timedelta(minutes=1)).isoformat())
            | {"model": "rolled-only-model", "tenant": "team-rolled"}
            for i in range(5)
        ],
        gateway="gw-rolled",
    )
    rollups.rebuild_all(db.cursor())
    before = overview.dimension_values(db.cursor())
    assert "rolled-only-model" in before["model"] and "team-rolled" in before["tenant"]
    # Every raw row is pruned (received before now): the choices stay as they were.
    _prune(db, datetime.now(UTC) + D)
    assert _count(db, Filter()) == 0
    after = overview.dimension_values(db.cursor())
    assert after == before
    assert "gw-rolled" in after["gateway"] and "chat-8b" in after["engine"]
    capped = overview.dimension_values(db.cursor(), limit=2)
    assert capped["model"] == sorted(before["model"])[:2]


def test_hours_imported_from_the_lake(db, fresh_db, tmp_path):
    # A node with a model of its own exports its rollups; this one imports them (no raw rows).
    start = END - 12 * D
    recs = [
        record(i, "lake", started_at=(start + i * timedelta(minutes=7)).isoformat())
        | {"model": "lake-only-model", "tenant": "team-lake"}
        for i in range(30)  # 3.5 hours: 03:30 of the fourth hour
    ]
    with fresh_db(tmp_path / "node.duckdb") as node:
        store(node, recs, gateway="gw-lake")
        cur = node.cursor()
        rollups.rebuild_all(cur)
        hours = [h for h, _ in lake.clean_hours(cur)]
        lake.export_hours(cur, tmp_path / "layout", hours)
    assert len(hours) == 4
    lake.import_layout(db.cursor(), tmp_path / "layout", tz="UTC", origin="node")
    flt = Filter(start=start, end=start + 4 * H)
    found = missing(db.cursor(), flt, END)
    assert found is not None and (found.lake, found.sealed) == (4, 0)
    assert (found.seen, found.total) == (0, 30)
    assert "4 of the window's 4 hours have no raw rows (imported from the lake)" in (
        found.sentence()
    )
    choices = overview.dimension_values(db.cursor())
    assert "lake-only-model" in choices["model"] and "gw-lake" in choices["gateway"]
    assert "team-lake" in choices["tenant"]
