"""Charts download as CSV in a real headless Chromium (static/export.js): the button in each
chart's mode bar writes the data as drawn; the Shapes heat map's cells are the API's counts."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.support.browser import BROWSER, console_errors
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER
CSV_BUTTON = '.modebar-btn[data-title="Download data as CSV"]'


@pytest.fixture(scope="module")
def live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 3,000 demo requests in the 7 days before END, its clock at END."""
    db = copy_database(
        demo_template(requests=3000, days=7), tmp_path_factory.mktemp("csv") / "t.db"
    )
    yield from serve(server_settings(db), wait=False, clock=lambda: END)


def _download(page, graph: str) -> list[list[str]]:
    page.hover(f"#{graph} .js-plotly-plot")
    with page.expect_download() as info:
        page.click(f"#{graph} {CSV_BUTTON}")
    download = info.value
    assert download.suggested_filename == f"{graph}.csv"
    return list(csv.reader(io.StringIO(open(download.path(), encoding="utf-8").read())))


def test_the_heat_map_csv_holds_the_apis_counts(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(live.url + "/shapes?window=all&scale=count", wait_until="load")
    page.wait_for_selector("#shapes-heatmap .heatmaplayer", timeout=60_000)
    rows = _download(page, "shapes-heatmap")
    assert rows[0][0].endswith("y \\ x")
    grid = rows[1 : rows.index([]) if [] in rows else len(rows)]
    cells = [float(v) for row in grid for v in row[1:] if v != ""]
    with live.client() as c:
        api = c.get("/api/heatmap").json()
    assert sum(cells) == api["total"] > 0
    nonzero = Counter(int(v) for v in cells if v)
    assert nonzero == Counter(int(v) for row in api["counts"] for v in row if v)
    assert errors == []


def test_a_line_chart_csv_has_one_row_per_point(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(live.url + "/latency?window=7d", wait_until="load")
    page.wait_for_selector("#latency-ttft-trend .scatterlayer", timeout=60_000)
    page.locator("#latency-ttft-trend").scroll_into_view_if_needed()
    rows = _download(page, "latency-ttft-trend")
    assert rows[0] == ["series", "x", "y"], rows[:3]
    drawn = page.evaluate(
        """() => document.querySelector('#latency-ttft-trend .js-plotly-plot').data
            .map(t => [t.name, (t.x || []).length])"""
    )
    assert Counter(r[0] for r in rows[1:]) == {name: n for name, n in drawn}
    assert {name for name, _ in drawn} >= {"p50", "p90", "p99"}
