"""The Seasonal page in a real headless Chromium over four weeks of the demo platform at
production volume ending now: one verdict banner that says why (in the plans' own numbers),
the plans' lines told apart by dash and width, and the windows' heat maps on one colour scale."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER


@pytest.fixture(scope="module")
def seasonal_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over the demo's four weeks at a 0.1% sample (the workflow test's template)."""
    template = demo_template(requests=66_000, days=28, end=None, sample_rate=0.001)
    db = copy_database(template, tmp_path_factory.mktemp("seasonal-live") / "s.duckdb")
    yield from serve(server_settings(db), wait=False)


# Per plotted trace of a graph: its name, line dash and width, and the heat map's colour range.
TRACES = """sel => Array.from(document.querySelectorAll(sel + ' .js-plotly-plot')).map(gd =>
    gd.data.map(t => ({name: t.name, mode: t.mode, type: t.type, dash: t.line && t.line.dash,
        width: t.line && t.line.width, zmin: t.zmin, zmax: t.zmax, showscale: t.showscale})))"""


def _open(page, url: str) -> None:
    page.goto(url, wait_until="load")
    page.locator("#seasonal-verdict").wait_for(timeout=120_000)
    page.locator("#seasonal-replicas .scatterlayer .trace").first.wait_for(
        state="attached", timeout=30_000
    )


@pytest.mark.parametrize("engine", ["chat-8b", "llm-70b", "code-7b", "guard-8b"])
def test_one_banner_says_the_verdict_and_why(seasonal_live, browser, tmp_path, engine):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = console_errors(page)
    _open(page, f"{seasonal_live.url}/seasonal?engine={engine}&weeks=4")
    # One banner: the seasonal answer, its reason and the money against today, said once.
    assert page.locator(".verdict").count() == 1
    banner = page.locator("#seasonal-banner")
    verdict = page.locator("#seasonal-verdict").inner_text()
    why = page.locator("#seasonal-binding").inner_text()
    assert verdict in banner.inner_text() and engine in banner.inner_text()
    if verdict.startswith("Run one engine"):
        assert why.startswith("Why one engine")
        assert "a second engine must save" in why or "nothing to save" in why
    else:
        assert why.startswith("Why this split")
        assert "splits into two windows of at least 4 h" in why
    # The plans' lines: no two share both a dash and a width, so coinciding steps stay apart.
    (traces,) = page.evaluate(TRACES, "#seasonal-replicas")
    lines = [t for t in traces if t["mode"] == "lines"]
    assert len({(t["dash"], t["width"]) for t in lines}) == len(lines) >= 3
    if page.locator("#seasonal-coincide").count():
        assert "coincide" in page.locator("#seasonal-coincide").inner_text()
    screenshot(page, tmp_path, f"seasonal-{engine}")
    assert errors == []


def test_the_windows_heat_maps_share_one_colour_scale(seasonal_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    _open(page, f"{seasonal_live.url}/seasonal?engine=llm-70b&weeks=4")
    page.locator("#seasonal-windows .heatmaplayer").first.wait_for(timeout=30_000)
    maps = [
        next(t for t in f if t["type"] == "heatmap")
        for f in page.evaluate(TRACES, "#seasonal-windows")
    ]
    assert len(maps) == 2
    assert maps[0]["zmax"] == maps[1]["zmax"] > 0 and maps[0]["zmin"] == maps[1]["zmin"] == 0
    assert [m["showscale"] for m in maps] == [False, True]
    assert page.locator("#seasonal-windows .colorbar").count() == 1
    assert "one colour scale" in page.locator("#seasonal-heat-note").inner_text()
    # Both maps are drawn the same size, side by side.
    sizes = page.evaluate(
        """() => Array.from(document.querySelectorAll('#seasonal-windows .js-plotly-plot'))
            .map(gd => [gd._fullLayout.xaxis3._length, gd._fullLayout.yaxis3._length])"""
    )
    assert sizes[0] == sizes[1]
    # On the same bins: the same ticks and ranges on both maps' axes.
    bins = page.evaluate(
        """() => Array.from(document.querySelectorAll('#seasonal-windows .js-plotly-plot'))
            .map(gd => ['xaxis3', 'yaxis3'].map(a => [gd._fullLayout[a].ticktext,
                gd._fullLayout[a].range]))"""
    )
    assert bins[0] == bins[1]
    # The matrix's window outlines differ by dash and width, not by hue alone.
    outlines = page.evaluate(
        """() => document.querySelector('#seasonal-matrix .js-plotly-plot').layout.shapes
            .map(s => [s.line.color, s.line.dash, s.line.width])"""
    )
    styles = {tuple(o) for o in outlines}
    assert len(styles) == 2
    assert len({o[1] for o in styles}) == len({o[2] for o in styles}) == 2
    page.locator("#seasonal-windows").screenshot(path=str(tmp_path / "seasonal-windows.png"))
