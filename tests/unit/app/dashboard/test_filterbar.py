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
