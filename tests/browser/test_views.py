"""The dashboard's views of the demo traffic in a real headless Chromium (Debian's, driven by
Playwright). One server for the module, over two weeks of demo traffic: these tests only read."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.dashboard.speedups import polyfill, prefetched
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER


@pytest.fixture(scope="module")
def demo_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests in the 14 days before 2026-11-23."""
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("demo-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    """Each test starts as on a freshly mounted app: no page build an earlier one started."""
    prefetched.reset()


def test_overview_shows_the_stored_traffic(demo_live, browser, tmp_path):
    live = demo_live
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(live.url + "/?window=all")
    kpis = page.locator("#overview-kpis")
    kpis.wait_for(timeout=30_000)  # Dash keeps connections open: wait for the element
    assert "5,000" in kpis.inner_text()
    table = page.locator("#overview-models").inner_text()
    for model in (
        "llama-3.1-8b-instruct",
        "llama-3.1-70b-instruct",
        "qwen2.5-coder-7b-instruct",
    ):
        assert model in table
    assert page.title() == "tokenshape · Overview"
    screenshot(page, tmp_path, "overview")


def test_shapes_heatmap_total_filters_and_url(demo_live, browser, tmp_path):
    live = demo_live
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = console_errors(page)
    page.goto(live.url + "/shapes?window=all")
    page.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    total = live.scalar("SELECT count(*) FROM requests")
    assert page.locator("#shapes-total").inner_text() == f"{total:,}"
    # The quantile table follows the heat map in its own callback; same window, same data.
    quantiles = page.locator("#shapes-quantiles")
    quantiles.wait_for(timeout=30_000)
    isl_max = live.scalar("SELECT max(isl) FROM requests")
    assert f"{isl_max:,}" in quantiles.locator("tr", has_text="input tokens").inner_text()
    four = page.locator("#shapes-four").inner_text()
    assert sum(int(r.split("\t")[1].replace(",", "")) for r in four.splitlines()[1:]) == total
    # Filter by engine through the form: the URL carries it, and so does the count.
    page.select_option("#filter-engine", "llm-70b")
    page.click("#filter-apply")
    page.wait_for_url("**engine=llm-70b**")
    page.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    engine_total = live.scalar("SELECT count(*) FROM requests WHERE engine = 'llm-70b'")
    assert page.locator("#shapes-total").inner_text() == f"{engine_total:,}"
    shared = page.url
    screenshot(page, tmp_path, "shapes")
    # Opening the shared link restores the view.
    other = browser.new_page()
    other.goto(shared)
    other.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    assert other.locator("#shapes-total").inner_text() == f"{engine_total:,}"
    assert other.locator("#filter-engine").input_value() == "llm-70b"
    assert errors == []


def test_a_page_arrives_with_its_first_layout(demo_live, browser):
    """The page is in Dash's first layout (no routing round trip); Dash's Babel polyfill is
    replaced by the regenerator runtime and dcc.Graph's chunk is preloaded, and every page
    still draws without a console error (the other browser tests)."""
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = console_errors(page)
    posts: list[str] = []
    scripts: list[str] = []
    page.on("request", lambda r: posts.append(r.post_data or "") if r.method == "POST" else None)
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
    page.goto(demo_live.url + "/shapes?window=all&bins=log2half")
    page.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    page.locator("#shapes-quantiles").wait_for(timeout=30_000)
    assert page.title() == "tokenshape · Shapes"
    assert posts and not any("_pages_content" in p for p in posts)  # only the tables' callback
    # Without npm at install there is no runtime: Dash's page keeps its polyfill then.
    runtime = any("regenerator-runtime.js" in u for u in scripts)
    assert runtime == polyfill.RUNTIME.is_file()
    assert any("polyfill@" in u for u in scripts) != runtime
    assert sum("async-graph.js" in u for u in scripts) == 1
    assert errors == []


def test_shapes_empty_window_shows_what_to_do(demo_live, browser):
    page = browser.new_page()
    errors = console_errors(page)
    page.goto(demo_live.url + "/shapes?window=1h")  # the demo ended days ago
    empty = page.locator("#shapes-empty")
    empty.wait_for(timeout=30_000)
    assert "No requests in this window" in empty.inner_text()
    assert "/v1/requests" in empty.inner_text()
    assert errors == []


def test_latency_and_traffic_pages_render_without_errors(demo_live, browser, tmp_path):
    live = demo_live
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = console_errors(page)
    page.goto(live.url + "/latency?window=all&engine=chat-8b")
    for graph in (
        "latency-ttft-trend",
        "latency-itl-trend",
        "latency-e2e-trend",
        "latency-ttft-isl",
        "latency-itl-position",
        "latency-inflight",
        "latency-vs-inflight",
    ):
        page.locator(f"#{graph} .scatterlayer").first.wait_for(timeout=30_000)
    page.locator("#latency-e2e-dist .barlayer").first.wait_for(timeout=30_000)
    assert "ms more time to first token per 1,000 input tokens" in page.inner_text("body")
    # One engine: the load split's legend names its in-flight counts ("low load (1–2 in flight)").
    assert page.locator("#latency-ttft-isl").get_by_text("in flight)").count() >= 2
    screenshot(page, tmp_path, "latency")
    page.goto(live.url + "/traffic?window=all")
    page.locator("#traffic-matrix .heatmaplayer").wait_for(timeout=30_000)
    page.locator("#traffic-rates .scatterlayer").first.wait_for(timeout=30_000)
    total = live.scalar("SELECT count(*) FROM requests")
    assert page.locator("#traffic-total").inner_text() == f"{total:,}"
    screenshot(page, tmp_path, "traffic")
    page.goto(live.url + "/traffic?window=1h")
    page.locator("#traffic-empty").wait_for(timeout=30_000)
    assert errors == []


def test_reports_page_shows_the_email_and_the_history(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(demo_live.url + "/reports")
    subject = page.locator("#reports-subject")
    subject.wait_for(timeout=30_000)
    assert subject.inner_text().startswith("tokenshape ") and "engines" in subject.inner_text()
    frame = page.frame_locator("#reports-preview")
    assert "chat-8b" in frame.locator("body").inner_text(timeout=30_000)
    assert "Nothing sent yet" in page.locator("#reports-history").inner_text()
    screenshot(page, tmp_path, "reports")
    assert errors == []
