"""Split by model on the Latency and Traffic pages in a real headless Chromium: the filter
bar's "split by" select puts it in the URL, every trend draws a line per model, a reload of the
URL restores it, and a hover names the requests behind its point. 5,000 demo requests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER

MODELS = 3  # the demo's models


@pytest.fixture(scope="module")
def demo_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("split-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


def _lines(page, graph: str) -> int:
    return page.locator(f"#{graph} .scatterlayer .trace").count()


def _legend(page, graph: str) -> list[str]:
    return [t or "" for t in page.locator(f"#{graph} .legendtext").all_text_contents()]


def test_split_by_model_on_latency_and_traffic(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(demo_live.url + "/latency?window=all", wait_until="load")
    page.locator("#latency-ttft-trend .scatterlayer").first.wait_for(timeout=30_000)
    assert _legend(page, "latency-ttft-trend") == ["p50", "p90", "p99"]
    page.select_option("#filter-split", "model")
    page.click("#filter-apply")
    page.wait_for_url("**split=model**")
    page.locator("#latency-split-note").get_by_text("Split by model").wait_for(timeout=30_000)
    for graph in ("latency-ttft-trend", "latency-itl-trend", "latency-e2e-trend", "latency-queue"):
        page.locator(f"#{graph} .scatterlayer").first.wait_for(timeout=30_000)
        assert _lines(page, graph) == MODELS, graph
    models = _legend(page, "latency-ttft-trend")
    assert all(m.startswith(("llama", "qwen")) for m in models)
    # The fit per model: a legend entry per model (its line shares the entry).
    assert sorted(_legend(page, "latency-ttft-fit")) == sorted(models)
    # The hover of a point names its requests.
    page.locator("#latency-ttft-trend").scroll_into_view_if_needed()
    point = page.locator("#latency-ttft-trend .scatterlayer .trace").first.locator(".point")
    page.mouse.move(5, 5)
    box = point.nth(3).bounding_box()
    assert box is not None
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.wait_for_function(
        "() => /[0-9] requests/.test("
        "document.querySelector('#latency-ttft-trend .hoverlayer')?.textContent || '')",
        timeout=10_000,
    )
    hover = page.locator("#latency-ttft-trend .hoverlayer").text_content() or ""
    assert hover.startswith(tuple(models)) and "p90" in hover
    screenshot(page, tmp_path, "split-latency-hover")
    page.locator("#latency-ttft-fit").scroll_into_view_if_needed()
    screenshot(page, tmp_path, "split-latency")
    # The URL restores the split exactly.
    page.reload(wait_until="load")
    page.locator("#latency-ttft-trend .scatterlayer").first.wait_for(timeout=30_000)
    assert page.locator("#filter-split").input_value() == "model"
    assert _lines(page, "latency-ttft-trend") == MODELS

    page.goto(demo_live.url + "/traffic?window=all&split=model", wait_until="load")
    page.locator("#traffic-split .scatterlayer").first.wait_for(timeout=30_000)
    assert _lines(page, "traffic-split") == MODELS
    assert sorted(_legend(page, "traffic-split")) == sorted(models)
    assert page.locator("#filter-split").input_value() == "model"
    page.locator("#traffic-cache .scatterlayer").first.wait_for(timeout=30_000)
    assert _lines(page, "traffic-cache") >= 1
    screenshot(page, tmp_path, "split-traffic")
    page.goto(demo_live.url + "/traffic?window=all&split=colour", wait_until="load")
    page.locator("#split-problem").wait_for(timeout=30_000)
    assert "'colour' is not one of" in page.locator("#split-problem").inner_text()
    assert errors == []
