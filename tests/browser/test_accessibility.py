"""Every dashboard page in a real headless Chromium, checked against axe-core's WCAG 2.0 and
2.1 A/AA rules (no "serious" or "critical" violation), and what axe cannot see: the document's
language, one H1 per page, a "Skip to content" link first in the tab order, a focus ring on
every control. One server for the module over 5,000 demo requests.

axe-core comes from the npm registry into .tools/axe (`make axe`, which `make test` runs).
Without it the axe checks skip, except in CI (CI=true), where a missing axe means `make test`
did not install it: they fail."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.dashboard.speedups import prefetched
from tests.support.axe import axe_script, serious_violations
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER

PAGES = ["/", "/shapes", "/latency", "/traffic", "/rightsizing", "/seasonal", "/reports"]
PAGES += ["/compare", "/notes", "/admin"]
# Known violations, each named (page, rule, element) with its fix; strict, so the mark must
# go when the page is fixed.
KNOWN: dict[str, str] = {}

# Drawn: the page's H1 is in, nothing is loading, and every chart on it has drawn its plot.
DRAWN = """() => {
    const main = document.querySelector('main');
    if (!main || !main.querySelector('h1')) return false;
    if (document.querySelector('[data-dash-is-loading="true"], ._dash-loading')) return false;
    const graphs = main.querySelectorAll('.dash-graph');
    return [...graphs].every(g => g.querySelector('.main-svg'));
}"""


@pytest.fixture(scope="module")
def demo_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests in the 14 days before 2026-11-23."""
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("a11y-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    prefetched.reset()


@pytest.fixture(scope="module")
def axe_js() -> str:
    """axe-core's script (tests/support/axe.py)."""
    return axe_script()


def _open(browser, url: str):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(url, wait_until="load")
    page.wait_for_function(DRAWN, timeout=60_000, polling=200)
    return page, errors


def _params() -> list:
    return [
        pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=KNOWN[p])) if p in KNOWN else p
        for p in PAGES
    ]


@pytest.mark.parametrize("path", _params())
def test_axe_finds_no_serious_violation(demo_live, browser, axe_js, path, tmp_path):
    page, errors = _open(browser, demo_live.url + path + ("?window=all" if path != "/" else ""))
    found = serious_violations(page, axe_js)
    if path in ("/", "/shapes"):
        screenshot(page, tmp_path, f"a11y-{path.strip('/') or 'overview'}")
    assert found == [], "\n".join(found)
    assert errors == []


@pytest.mark.parametrize("path", PAGES)
def test_one_h1_and_the_documents_language(demo_live, browser, path):
    page, _ = _open(browser, demo_live.url + path)
    assert page.locator("html").get_attribute("lang") == "en"
    assert page.locator("h1").count() == 1, page.locator("h1").all_inner_texts()


def test_the_first_tab_reaches_skip_to_content_and_it_moves_focus(demo_live, browser):
    page, errors = _open(browser, demo_live.url + "/shapes")
    page.keyboard.press("Tab")
    focused = page.evaluate("() => [document.activeElement.className, document.activeElement.text]")
    assert focused == ["skip-link", "Skip to content"]
    # Shown while focused (it sits off-screen otherwise).
    box = page.locator(".skip-link").bounding_box()
    assert box is not None and box["y"] >= 0
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "content"
    # The next Tab goes into the page, past the bar: the filter bar's first field.
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('main') !== null")
    assert page.locator("main h1").inner_text() == "Shapes"  # the page was not rebuilt
    assert errors == []


def test_every_control_shows_focus(demo_live, browser):
    """Tab through the Shapes page: each control focused by keyboard draws an outline."""
    page, _ = _open(browser, demo_live.url + "/shapes")
    seen = []
    for _ in range(25):
        page.keyboard.press("Tab")
        seen.append(
            page.evaluate(
                """() => {
                    const e = document.activeElement, s = getComputedStyle(e);
                    const name = e.id ? '#' + e.id : ' ' + (e.textContent || '').slice(0, 30);
                    return [e.tagName + name, s.outlineStyle, s.outlineWidth];
                }"""
            )
        )
    assert len({s[0] for s in seen}) > 10, seen  # it did move through the page's controls
    bare = [s for s in seen if s[1] == "none" or s[2] == "0px"]
    assert bare == [], "\n".join(map(str, seen))
