"""The filter bar's time range in a real headless Chromium: a typed or picked time switches the
window to custom, a preset clears the times, the resolved range is always said in words, and
bad parameters get a visible message instead of a silent fallback."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import pytest

from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER


@pytest.fixture(scope="module")
def live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 3,000 demo requests in the 7 days before END, its clock at END."""
    db = copy_database(demo_template(requests=3000, days=7), tmp_path_factory.mktemp("tr") / "t.db")
    yield from serve(server_settings(db), wait=False, clock=lambda: END)


@pytest.fixture(scope="module")
def live_ny(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The same traffic served with TOKENSHAPE_TZ=America/New_York: axes in New York time."""
    db = copy_database(demo_template(requests=3000, days=7), tmp_path_factory.mktemp("ny") / "t.db")
    settings = server_settings(db, tz="America/New_York")
    yield from serve(settings, wait=False, clock=lambda: END)


def _query(url: str) -> dict[str, list[str]]:
    return parse_qs(urlsplit(url).query)


def test_a_picked_time_switches_to_custom_and_a_preset_clears_it(live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(live.url + "/latency", wait_until="load")
    start = page.wait_for_selector("#filter-start", timeout=30_000)
    assert "UTC (7 days)." in page.locator("#filter-range").inner_text()
    # A native date-time picker, empty (no placeholder that passes for a value).
    page.wait_for_function("document.getElementById('filter-start').type === 'datetime-local'")
    assert start.input_value() == ""
    assert page.locator("#filter-window").input_value() == "7d"
    page.fill("#filter-start", "2026-11-18T08:00")
    assert page.locator("#filter-window").input_value() == "custom"
    page.fill("#filter-end", "2026-11-20T20:00")
    page.click("#filter-apply")
    page.wait_for_url("**window=custom**")
    query = _query(page.url)
    assert query["start"] == ["2026-11-18T08:00"] and query["end"] == ["2026-11-20T20:00"]
    words = page.wait_for_selector("#filter-range").inner_text()
    assert words.startswith("Showing 2026-11-18 08:00 to 2026-11-20 20:00 UTC (60 hours). Zoom out")
    # The times come back into the fields, still pickers after Dash redrew the page.
    page.wait_for_function("document.getElementById('filter-start').type === 'datetime-local'")
    assert page.locator("#filter-start").input_value() == "2026-11-18T08:00"
    screenshot(page, tmp_path, "time-range-custom")
    # A preset clears the times, so the preset is what is submitted.
    page.select_option("#filter-window", "24h")
    assert page.locator("#filter-start").input_value() == ""
    page.click("#filter-apply")
    page.wait_for_url("**window=24h**")
    assert not _query(page.url).get("start")
    assert "UTC (24 hours)." in page.locator("#filter-range").inner_text()
    assert errors == []


def test_bad_parameters_are_named_on_the_page(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(live.url + "/traffic?window=bogus", wait_until="load")
    problem = page.wait_for_selector("#filter-bar .field-error", timeout=30_000).inner_text()
    assert "'bogus' is not one of 1h, 24h, 7d, 30d, all or custom" in problem
    assert "UTC (7 days)." in page.locator("#filter-range").inner_text()
    page.goto(live.url + "/reports?week=2099-W99", wait_until="load")
    problem = page.wait_for_selector(".field-error", timeout=30_000).inner_text()
    assert "'2099-W99' is not an ISO week" in problem
    page.goto(live.url + "/reports?week=2099-W10", wait_until="load")
    problem = page.wait_for_selector(".field-error", timeout=30_000).inner_text()
    assert "2099-W10 has not ended yet" in problem


# The TTFT chart's plot area in page coordinates, and its x axis range as plotly holds it.
PLOT_BOX = """() => {
    const gd = document.querySelector('#latency-ttft-trend .js-plotly-plot');
    const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
    return {left: box.left + xa._offset, width: xa._length, top: box.top + ya._offset,
            height: ya._length, range: xa.range};
}"""


def test_dragging_across_a_time_chart_sets_the_window_for_every_chart(live_ny, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(live_ny.url + "/latency?window=7d&engine=chat-8b", wait_until="load")
    page.wait_for_selector("#latency-ttft-trend .scatterlayer", timeout=60_000)
    page.wait_for_timeout(300)  # the zoom handler attaches as the graph is drawn
    page.locator("#latency-ttft-trend").scroll_into_view_if_needed()
    box = page.evaluate(PLOT_BOX)
    y = box["top"] + box["height"] / 2
    x0, x1 = box["left"] + box["width"] * 0.25, box["left"] + box["width"] * 0.5
    # What the drag will select, in the axis's own (New York wall clock) terms.
    wall = page.evaluate(
        """([x0, x1]) => {
            const gd = document.querySelector('#latency-ttft-trend .js-plotly-plot');
            const xa = gd._fullLayout.xaxis, left = gd.getBoundingClientRect().left + xa._offset;
            return [xa.p2d(x0 - left), xa.p2d(x1 - left)];
        }""",
        [x0, x1],
    )
    page.mouse.move(x0, y)
    page.mouse.down()
    page.mouse.move((x0 + x1) / 2, y, steps=5)
    page.mouse.move(x1, y, steps=5)
    page.mouse.up()
    page.wait_for_url("**window=custom**", timeout=30_000)
    query = _query(page.url)
    assert query["engine"] == ["chat-8b"]  # the rest of the view is kept
    start = datetime.fromisoformat(query["start"][0]).replace(tzinfo=UTC)
    end = datetime.fromisoformat(query["end"][0]).replace(tzinfo=UTC)
    ny = ZoneInfo("America/New_York")
    want = [datetime.fromisoformat(w[:19]).replace(tzinfo=ny).astimezone(UTC) for w in wall]
    # The URL holds UTC minutes around the New York times dragged over (within two pixels of
    # the axis: plotly starts the box where the press registered).
    pixel = (want[1] - want[0]) / (x1 - x0)
    assert abs(start - want[0]) <= 2 * pixel + timedelta(minutes=1)
    assert abs(end - want[1]) <= 2 * pixel + timedelta(minutes=1)
    page.wait_for_selector("#latency-ttft-trend .scatterlayer", timeout=60_000)
    # Said in the zone the page shows (the server's here: the URL names none).
    words = page.locator("#filter-range").inner_text()
    lo, hi = start.astimezone(ny), end.astimezone(ny)
    assert words.startswith(f"Showing {lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M} America/New_York")
    # Every time chart now spans the new window, not only the one dragged.
    spans = page.evaluate(
        """() => [...document.querySelectorAll('.js-plotly-plot')]
            .filter(gd => gd._fullLayout.xaxis && gd._fullLayout.xaxis.type === 'date')
            .map(gd => gd.data.flatMap(t => t.x || []).length)"""
    )
    assert len(spans) >= 3
    screenshot(page, tmp_path, "time-range-zoomed")
    # Zoom out doubles the window; Back returns to the one before the drag.
    page.click("#filter-zoom-out")
    page.wait_for_url(lambda url: _query(url)["start"] != query["start"])
    wider = _query(page.url)
    span = datetime.fromisoformat(wider["end"][0]) - datetime.fromisoformat(wider["start"][0])
    assert abs(span - 2 * (end - start)) <= timedelta(minutes=2)
    page.go_back()
    page.wait_for_url(lambda url: _query(url).get("start") == query["start"])
    page.go_back()
    page.wait_for_url(lambda url: _query(url).get("window") == ["7d"])
    assert errors == []


def test_auto_refresh_reloads_the_page_while_it_is_shown(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.clock.install()
    page.goto(live.url + "/traffic?window=24h&refresh=30", wait_until="load")
    page.wait_for_selector("#filter-refresh", timeout=30_000)
    assert page.locator("#filter-refresh").input_value() == "30"
    page.evaluate("window.__before_refresh = true")
    page.clock.run_for(10_000)
    assert page.evaluate("window.__before_refresh === true")  # not yet
    with page.expect_navigation(timeout=30_000):
        page.clock.run_for(25_000)
    page.wait_for_selector("#filter-refresh", timeout=30_000)
    assert page.evaluate("window.__before_refresh === undefined")  # a new document
    assert "refresh=30" in page.url


def test_filters_survive_moving_between_pages(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(live.url + "/latency?window=24h&engine=chat-8b&refresh=60", wait_until="load")
    page.wait_for_selector("#filter-bar", timeout=30_000)
    page.click(".topbar nav a[href='/traffic']")
    page.wait_for_url("**/traffic?**")
    page.wait_for_selector("#filter-bar", timeout=30_000)
    query = _query(page.url)
    assert (query["window"], query["engine"], query["refresh"]) == (["24h"], ["chat-8b"], ["60"])
    assert page.locator("#filter-engine").input_value() == "chat-8b"
    # To a page of one engine, the engine alone.
    page.click(".topbar nav a[href='/rightsizing']")
    page.wait_for_url("**/rightsizing?**")
    assert _query(page.url) == {"engine": ["chat-8b"]}
    page.wait_for_selector("#rightsizing-verdict", timeout=60_000)  # drawn for that engine
