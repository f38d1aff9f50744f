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
    forever = filterbar.parse_query({"window": "forever"}, NOW)
    assert forever.window == "7d" and forever.start == NOW - timedelta(days=7)
    assert "'forever' is not one of 1h, 24h, 7d, 30d, all or custom" in forever.problems[0]
    assert filterbar.parse_query({"window": "all"}, NOW).start is None
    custom = filterbar.parse_query(
        {"window": "custom", "start": "2026-11-21T00:00", "end": "2026-11-20T00:00"}, NOW
    )
    assert custom.start < custom.end  # swapped, and said
    assert (
        "“from” was after “to”: showing 2026-11-20 00:00 to 2026-11-21 00:00"
        in (custom.problems[0])
    )
    broken = filterbar.parse_query({"window": "custom", "start": "soon"}, NOW)
    assert broken.start is None
    assert "'soon' is not a time" in broken.problems[0]  # said on the page, not swallowed
    for edge in ("0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00"):
        far = filterbar.parse_query({"window": "custom", "end": edge}, NOW)
        assert far.end is None and "between 1970 and 2200" in far.problems[0]
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


def test_a_time_typed_under_a_preset_window_means_that_range():
    view = filterbar.parse_query({"window": "7d", "start": "2026-11-20T08:00"}, NOW)
    assert view.window == "custom" and view.problems == ()
    assert view.start == datetime(2026, 11, 20, 8, tzinfo=UTC) and view.end is None
    only_end = filterbar.parse_query({"end": "2026-11-21T08:00"}, NOW)
    assert only_end.window == "custom" and only_end.start is None


def test_the_range_is_said_in_words():
    def words(query: dict) -> str:
        return filterbar.range_words(filterbar.parse_query(query, NOW), NOW)

    assert words({}) == "Showing 2026-11-22 12:00 to now (2026-11-29 12:00) UTC (7 days)."
    assert words({"window": "1h"}) == (
        "Showing 2026-11-29 11:00 to now (2026-11-29 12:00) UTC (1 hour)."
    )
    assert words({"window": "all"}) == "Showing all stored requests (all time)."
    custom = {"start": "2026-11-20T08:00", "end": "2026-11-21T20:00+00:00"}
    assert words(custom) == "Showing 2026-11-20 08:00 to 2026-11-21 20:00 UTC (36 hours)."
    assert words({"end": "2026-11-21T08:00"}) == (
        "Showing the first request to 2026-11-21 08:00 UTC."
    )
    form = filterbar.render(filterbar.parse_query({}, NOW), {}, now=NOW)
    ranges = [c for c in form.children if getattr(c, "id", None) == "filter-range"]
    assert ranges and ranges[0].children[0].startswith("Showing 2026-11-22 12:00")


def test_zoom_out_doubles_the_window_around_its_middle_and_keeps_the_rest():
    from urllib.parse import parse_qs

    query = {"window": "custom", "start": "2026-11-20T00:00", "end": "2026-11-21T00:00"}
    query |= {"engine": "chat-8b", "layer": "goodput"}
    href = filterbar.zoom_out(filterbar.parse_query(query, NOW), query, NOW)
    assert parse_qs(href[1:]) == {
        "window": ["custom"],
        "start": ["2026-11-19T12:00"],
        "end": ["2026-11-21T12:00"],
        "engine": ["chat-8b"],
        "layer": ["goodput"],
    }
    # Never past now: the last 24 hours zoom out to the last 48.
    day = filterbar.zoom_out(filterbar.parse_query({"window": "24h"}, NOW), {}, NOW)
    assert parse_qs(day[1:])["end"] == ["2026-11-29T12:00"]
    assert parse_qs(day[1:])["start"] == ["2026-11-27T12:00"]
    assert filterbar.zoom_out(filterbar.parse_query({"window": "all"}, NOW), {}, NOW) is None
    bad = filterbar.parse_query({"refresh": "5"}, NOW)
    assert bad.refresh == "" and "'5' is not one of 30, 60 or 300 seconds" in bad.problems[0]


def test_the_urls_zone_reads_its_zone_less_times_and_shows_every_time_in_it():
    query = {"tz": "Europe/Berlin", "window": "custom", "start": "2026-06-01T00:30"}
    view = filterbar.parse_query(query | {"end": "2026-06-02T00:30"}, NOW, "UTC")
    assert (view.tz, view.tz_asked, view.problems) == ("Europe/Berlin", True, ())
    assert view.start == datetime(2026, 5, 31, 22, 30, tzinfo=UTC)  # CEST is UTC+2
    assert "2026-06-01 00:30 to 2026-06-02 00:30 Europe/Berlin (24 hours)" in (
        filterbar.range_words(view, NOW)
    )
    # A zoom out stays in the URL's zone: the same wall clock the user reads.
    href = filterbar.zoom_out(view, query | {"end": "2026-06-02T00:30"}, NOW)
    assert "start=2026-05-31T12%3A30" in href and "tz=Europe%2FBerlin" in href


def test_without_a_zone_in_the_url_times_stay_utc_and_show_in_the_servers_zone():
    view = filterbar.parse_query(
        {"window": "custom", "start": "2026-01-10T12:00", "end": "2026-01-10T18:00"},
        NOW,
        "America/Sao_Paulo",
    )
    assert view.start == datetime(2026, 1, 10, 12, tzinfo=UTC) and not view.tz_asked
    assert "2026-01-10 09:00 to 2026-01-10 15:00 America/Sao_Paulo" in (
        filterbar.range_words(view, NOW)
    )


def test_a_zone_the_database_would_refuse_is_named_and_the_servers_is_used():
    for bad in ("localtime", "posixrules", "right/UTC", "Mars/Olympus", "../../etc/passwd"):
        view = filterbar.parse_query({"tz": bad}, NOW, "Asia/Kolkata")
        assert view.tz == "Asia/Kolkata" and not view.tz_asked
        assert len(view.problems) == 1 and "“tz”" in view.problems[0]


def test_the_bar_offers_the_servers_zone_and_utc_and_labels_the_times_with_the_shown_zone():
    view = filterbar.parse_query({"tz": "Australia/Lord_Howe", "window": "24h"}, NOW, "UTC")
    form = filterbar.render(view, {}, now=NOW, tz="Europe/Berlin")
    text = str(form.to_plotly_json())
    assert "Europe/Berlin (server)" in text and "Australia/Lord_Howe" in text
    assert "from (Australia/Lord_Howe)" in text
    assert form.to_plotly_json()["props"]["data-tz"] == "Australia/Lord_Howe"
