"""The Overview's charts in a real headless Chromium: the sparklines, requests/s, goodput,
TTFT/ITL against the SLO lines and the now-vs-planned bars all draw, over demo traffic with
two engine profiles kept (the plans run the performance model: seconds per engine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.services.profiles import delete_profile, stored_profiles
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database, open_migrated
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER
KEPT = ("code-7b", "guard-8b")


@pytest.fixture(scope="module")
def overview_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests in the 14 days before 2026-11-23, two profiles kept."""
    db = copy_database(
        demo_template(requests=5000, days=14), tmp_path_factory.mktemp("overview") / "o.duckdb"
    )
    with open_migrated(db) as opened:
        for name in stored_profiles(opened):
            if name not in KEPT:
                delete_profile(opened, name)
    yield from serve(server_settings(db), wait=False)


def _drawn(page, selector: str) -> int:
    """How many drawn paths (non-empty `d`) the plot under `selector` holds."""
    return page.eval_on_selector_all(
        f"{selector} path", "ps => ps.filter(p => (p.getAttribute('d') || '').length > 4).length"
    )


def test_the_overview_charts_draw(overview_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1440, "height": 900})
    errors = console_errors(page)
    page.goto(overview_live.url + "/?window=all", wait_until="load")
    for graph in (
        "overview-spark-rate",
        "overview-spark-goodput",
        "overview-spark-ttft",
        "overview-spark-itl",
        "overview-rate",
        "overview-goodput",
    ):
        # Attached, not visible: a flat goodput line at 100% has no height to be seen.
        page.wait_for_selector(f"#{graph} .scatterlayer .trace", state="attached", timeout=30_000)
        assert _drawn(page, f"#{graph} .scatterlayer") >= 1, graph
    # TTFT and ITL come by a callback: one line per engine, a target line per profiled one.
    engines = overview_live.scalar("SELECT count(DISTINCT engine) FROM requests")
    for graph in ("overview-ttft", "overview-itl"):
        page.wait_for_function(
            f"document.querySelectorAll('#{graph} .scatterlayer .trace').length >= {engines}",
            timeout=30_000,
        )
        assert page.locator(f"#{graph} .scatterlayer .trace").count() == engines + len(KEPT)
    legend = page.locator("#overview-ttft .legend").text_content() or ""
    assert all(name in legend for name in KEPT) and "≤" in legend
    # The money bars come by the other callback: now and best plan for each profiled engine.
    page.wait_for_selector("#overview-money .barlayer .trace", timeout=60_000)
    assert page.locator("#overview-money .barlayer .trace").count() == 2
    assert page.locator("#overview-money .barlayer .point").count() == 2 * len(KEPT)
    saves = page.locator("#overview-saves").inner_text()
    assert saves.startswith("$"), saves
    screenshot(page, tmp_path, "overview-glance")
    assert errors == []
