"""The filter bar (app/dashboard/filterbar): URL query parsing into a view and a filter."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from app.dashboard import filterbar

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_query_to_view_and_filter():
    view = filterbar.parse_query({"window": "24h", "model": "m1", "engine": ""}, NOW)
    assert view.start == NOW - timedelta(hours=24) and view.end is None
    flt = view.filter()
    assert flt.models == ("m1",) and flt.engines == ()
    assert filterbar.parse_query({}, NOW).window == "7d"
    assert filterbar.parse_query({"window": "forever"}, NOW).window == "7d"
    assert filterbar.parse_query({"window": "all"}, NOW).start is None
    custom = filterbar.parse_query(
        {"window": "custom", "start": "2026-11-21T00:00", "end": "2026-11-20T00:00"}, NOW
    )
    assert custom.start < custom.end  # swapped, not an error
    broken = filterbar.parse_query({"window": "custom", "start": "soon"}, NOW)
    assert broken.start is None
    assert "'soon' is not a time" in broken.problems[0]  # said on the page, not swallowed
    form = filterbar.render(broken, {})
    assert any(getattr(c, "className", "") == "field-error" for c in form.children)


def test_the_bar_says_when_the_window_was_sampled(database):
    from app.dashboard import ids
    from tests.support.records import batch, store

    def notes(form) -> list[str]:
        return [c.children for c in form.children if getattr(c, "id", None) == ids.SAMPLING_NOTE]

    query = {"window": "custom", "start": "2026-11-20T00:00", "end": "2026-11-21T00:00"}
    store(database, batch(3))
    assert notes(filterbar.prepare(database, query, NOW)[2]) == []  # unsampled: no note
    store(database, [{**r, "sample_rate": 0.01} for r in batch(2, "s")])
    view, flt, bar = filterbar.prepare(database, query, NOW)
    assert notes(bar) == ["estimated from a 1%–100% sample of 203 requests (5 stored)"]
    assert notes(filterbar.prepare(database, {"window": "1h"}, NOW)[2]) == []  # none in it


def test_choices_follow_the_rollups_when_no_raw_row_changes(database):
    from datetime import UTC, datetime

    from app.dashboard.filterbar import choices
    from app.storage import tiers

    assert "lake-only-model" not in choices(database)["model"]
    hour = datetime(2026, 11, 2, 10, tzinfo=UTC)
    cur = database.cursor()
    # What a lake import leaves: rollup rows and their hour, not one raw row.
    cur.execute(
        "INSERT INTO rollup_day_shapes VALUES (?, 'lake-only-model', 'e', 'g', 'ok', 1, 1, 5, 5.0)",
        [hour.replace(hour=0)],
    )
    tiers.note_hours(cur, [hour], "lake", "UTC", origin="test")
    assert "lake-only-model" in choices(database)["model"]
