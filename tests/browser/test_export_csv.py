"""Charts download as CSV in a real headless Chromium (static/export.js): the button in each
chart's mode bar writes the data as drawn; the Shapes heat map's cells are the API's counts."""

from __future__ import annotations

import csv
import io
from collections import Counter
from collections.abc import Iterator

import pytest

from tests.support.browser import BROWSER, console_errors, screenshot
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


TABLE_CELLS = """(table) => Array.from(table.rows).map(row => Array.from(row.cells)
    .map(c => c.innerText.replace(/\\s+/g, ' ').trim()))"""


def _table_download(page, table: str) -> tuple[list[list[str]], str, str]:
    """Press the Download CSV button above `table`: its rows, file name and aria-label."""
    button = page.locator(f".table-csv:has(+ {table}) button")
    label = button.get_attribute("aria-label") or ""
    with page.expect_download() as info:
        button.click()
    download = info.value
    text = open(download.path(), encoding="utf-8").read()
    return list(csv.reader(io.StringIO(text))), download.suggested_filename, label


def test_the_fleet_tables_csv_is_its_cells(live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(live.url + "/rightsizing", wait_until="load")
    fleet = "table.fleet"
    # The callback fills the replicas, money and verdict in place of the "…" placeholders.
    page.wait_for_function(
        """() => { const t = document.querySelector('#rightsizing-fleet table.fleet');
            return t && t.rows.length > 1 && !t.innerText.includes('computing replicas'); }""",
        timeout=120_000,
    )
    page.wait_for_selector(f".table-csv:has(+ {fleet}) button", timeout=10_000)
    assert page.locator(f".table-csv:has(+ {fleet})").count() == 1  # the placeholder's is gone
    rows, name, label = _table_download(page, fleet)
    shown = page.locator(fleet).evaluate(TABLE_CELLS)
    assert rows == shown
    assert rows[0][:3] == ["engine", "model", "GPUs"] and len(rows) > 1
    assert label == "Download CSV: Rightsizing" and name == "rightsizing.csv"
    # A real button, reached by the keyboard.
    button = page.locator(f".table-csv:has(+ {fleet}) button")
    assert button.evaluate("b => b.tagName") == "BUTTON"
    button.focus()
    with page.expect_download():
        page.keyboard.press("Enter")
    page.locator(fleet).scroll_into_view_if_needed()
    screenshot(page, tmp_path, "fleet-table-csv")
    assert errors == []


def test_the_overview_model_table_downloads_and_admin_tables_do_not(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(live.url + "/?window=all", wait_until="load")
    table = "#overview-models"
    page.wait_for_selector(f".table-csv:has(+ {table}) button", timeout=60_000)
    rows, name, label = _table_download(page, table)
    assert rows == page.locator(table).evaluate(TABLE_CELLS)
    assert name == "overview-models.csv" and label.startswith("Download CSV: ")
    assert rows[0][:2] == ["model", "requests"]
    page.goto(live.url + "/admin", wait_until="load")
    page.wait_for_selector("main table", timeout=30_000)
    page.wait_for_timeout(300)  # a frame or two: tables.js would have added its buttons
    assert page.locator(".table-csv").count() == 0


def test_the_heat_maps_keep_plotlys_png_download(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(live.url + "/shapes?window=all", wait_until="load")
    page.wait_for_selector("#shapes-heatmap .heatmaplayer", timeout=60_000)
    page.hover("#shapes-heatmap .js-plotly-plot")
    camera = '#shapes-heatmap .modebar-btn[data-title="Download plot as a PNG"]'
    assert page.locator(camera).count() == 1
    with page.expect_download() as info:
        page.click(camera)
    download = info.value
    assert download.suggested_filename.endswith(".png")
    assert open(download.path(), "rb").read(8) == b"\x89PNG\r\n\x1a\n"
