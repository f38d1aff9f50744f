"""The SLO ledger in a real headless Chromium: the goodput layer on the Shapes heat map with its
ranked misses, the Latency page's goodput chart and tenant table, and the words shown when no
target is set. One server for the module over 5,000 demo requests, whose profiles carry SLOs."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.dashboard.speedups import prefetched
from app.storage.engines import get_profile, put_profile
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER


@pytest.fixture(scope="module")
def demo_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests in the 14 days before 2026-11-23."""
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("slo-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


# The page coordinates of the centre of the goodput map's first cell with requests.
HOVER_TARGET = """() => {
    const gd = document.querySelector('#shapes-slo-heatmap .js-plotly-plot');
    const z = gd.data[0].z, xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis;
    const box = gd.getBoundingClientRect();
    for (let j = 0; j < z.length; j++) for (let i = 0; i < z[j].length; i++)
        if (z[j][i] !== null)
            return [box.left + xa._offset + xa.l2p(i), box.top + ya._offset + ya.l2p(j)];
}"""


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    prefetched.reset()


def test_shapes_goodput_layer_draws_cells_and_ranks_the_misses(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(demo_live.url + "/shapes?window=all", wait_until="load")
    page.wait_for_selector("#shapes-heatmap .heatmaplayer", timeout=30_000)
    # The toggle is in the filter bar, so the layer is part of the URL like every view.
    page.select_option("#filter-layer", "goodput")
    page.click("#filter-apply")
    page.wait_for_url("**layer=goodput**")
    page.wait_for_selector("#shapes-slo-heatmap .heatmaplayer", timeout=60_000)
    bar = page.locator("#shapes-slo-heatmap .colorbar").text_content()
    assert "goodput (target 95%)" in bar
    summary = page.locator("#shapes-slo-summary").inner_text()
    assert "met their engine's SLO" in summary and "Exact, from raw rows" in summary
    misses = page.locator("#shapes-slo-misses")
    assert misses.count() == 1
    text = misses.inner_text()
    assert "Every shape meets its SLO." in text or "% good vs" in text
    # Hover a drawn cell (the first with requests, found through plotly's own axes): its
    # requests, goodput and likely cause.
    x, y = page.evaluate(HOVER_TARGET)
    page.mouse.move(x, y)
    page.wait_for_selector("#shapes-slo-heatmap .hovertext", timeout=10_000)
    hover = page.locator("#shapes-slo-heatmap .hovertext").text_content()
    assert "requests judged" in hover and "met the SLO" in hover
    screenshot(page, tmp_path, "shapes-slo-layer")
    assert page.locator("#filter-layer").input_value() == "goodput"
    assert errors == []


def test_latency_shows_goodput_over_time_and_per_tenant(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(demo_live.url + "/latency?window=all", wait_until="load")
    page.wait_for_selector("#latency-goodput .scatterlayer .trace", timeout=60_000)
    legend = page.locator("#latency-goodput .legend").text_content()
    assert "goodput" in legend and "target 95%" in legend
    note = page.locator("#latency-goodput-note").inner_text()
    assert "met every target of their engine" in note
    rows = page.locator("#latency-goodput-tenants tbody tr")
    assert rows.count() >= 2
    total = demo_live.scalar("SELECT count(*) FROM requests")
    shown = sum(
        float(r.split("\t")[1].replace(",", "")) for r in rows.all_inner_texts() if "\t" in r
    )
    assert shown == pytest.approx(total, rel=0.01)  # every request has its engine's SLO
    screenshot(page, tmp_path, "latency-goodput")
    assert errors == []


def test_without_any_target_the_pages_say_how_to_set_one(demo_live, browser, tmp_path):
    cur = demo_live.db.cursor()
    names = [r[0] for r in cur.execute("SELECT name FROM engines").fetchall()]
    saved = {n: get_profile(cur, n) for n in names}
    try:
        for name, profile in saved.items():
            assert profile is not None
            plain = {k: v for k, v in profile.items() if not k.startswith("slo_")}
            put_profile(cur, name, plain, END)
        page = browser.new_page(viewport={"width": 1366, "height": 900})
        page.goto(demo_live.url + "/shapes?window=all&layer=goodput", wait_until="load")
        page.wait_for_selector("#shapes-slo-none", timeout=30_000)
        assert "TOKENSHAPE_SLO_TTFT_MS" in page.locator("#shapes-slo-none").inner_text()
        page.goto(demo_live.url + "/latency?window=all", wait_until="load")
        page.wait_for_selector("#latency-slo-none", timeout=30_000)
        assert "slo_ttft_ms" in page.locator("#latency-slo-none").inner_text()
        screenshot(page, tmp_path, "latency-no-slo")
    finally:
        for name, profile in saved.items():
            put_profile(cur, name, profile, END)
