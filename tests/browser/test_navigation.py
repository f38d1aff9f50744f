"""Finding one's way in a real headless Chromium: an address with no page answers 404 with the
app's own page, the bar marks the page shown, and no page load leaves an error in the browser's
console or a refused request (Dash's websocket retries were one) in the server's log. One
server for the module over 5,000 demo requests."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from app.dashboard.speedups import prefetched
from tests.support.browser import BROWSER, console_errors, responses, screenshot, server_log
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER

PAGES = ["/", "/shapes", "/latency", "/traffic", "/rightsizing", "/seasonal", "/reports"]
PAGES += ["/compare", "/notes", "/admin"]
# Chromium's own line for a document answered 404: the status this test asks for, not a fault.
NOT_FOUND_LINE = "the server responded with a status of 404"


@pytest.fixture(scope="module")
def demo_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests in the 14 days before 2026-11-23."""
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("nav-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    prefetched.reset()


def _dash_config(html: str) -> dict:
    found = re.search(r'<script id="_dash-config" type="application/json">(.*?)</script>', html)
    assert found, html[:500]
    return json.loads(found.group(1))


@pytest.mark.parametrize("path", ["/no-such-page", "/shapes/extra", "/Shapes", "/_not-found"])
def test_a_path_without_a_page_answers_404_with_the_apps_page(demo_live, path):
    with demo_live.client() as client:
        answer = client.get(path, headers={"Accept": "text/html"})
    assert answer.status_code == 404, (path, answer.status_code)
    assert answer.headers["content-type"].startswith("text/html")
    assert "react-entry-point" in answer.text and '<html lang="en">' in answer.text


def test_pages_and_dashs_own_routes_still_answer(demo_live):
    with demo_live.client() as client:
        for path in [*PAGES, "/shapes/", "/shapes?window=all"]:
            answer = client.get(path, headers={"Accept": "text/html"})
            assert answer.status_code == 200, (path, answer.status_code)
            assert '<html lang="en">' in answer.text
            # No websocket transport offered: the browser has nothing to dial (and retry).
            assert "websocket" not in _dash_config(answer.text), path
        for path in ["/_dash-layout", "/_dash-dependencies", "/_favicon.ico", "/assets/style.css"]:
            assert client.get(path).status_code == 200, path
        api = client.get("/api/no-such-route")
    assert api.status_code == 404 and "no API route GET /api/no-such-route" in api.text


def test_the_not_found_page_says_what_was_missing_under_the_bar(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    first = page.goto(demo_live.url + "/no-such-page?x=1", wait_until="load")
    assert first is not None and first.status == 404
    message = page.wait_for_selector("#not-found-message", timeout=30_000)
    assert "There is no page at /no-such-page" in message.inner_text()
    assert page.locator("h1").all_inner_texts() == ["Page not found"]
    assert page.title() == "tokenshape · Page not found"
    # The bar is there, with no page marked current; the page's own link goes home.
    assert page.locator(".topbar nav a").count() == len(PAGES)
    assert page.locator('.topbar nav a[aria-current="page"]').count() == 0
    screenshot(page, tmp_path, "not-found")
    page.click("#not-found-home")
    page.wait_for_url(demo_live.url + "/")
    page.wait_for_selector("main h1", timeout=30_000)
    assert page.locator("main h1").inner_text() == "Overview"
    assert [e for e in errors if NOT_FOUND_LINE not in e] == []


def test_the_bar_marks_the_page_shown(demo_live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    for path in PAGES:
        page.goto(demo_live.url + path, wait_until="load")
        page.wait_for_selector("main h1", timeout=60_000)
        current = page.locator('.topbar nav a[aria-current="page"]')
        page.wait_for_function(
            "() => document.querySelectorAll('.topbar nav a[aria-current=\"page\"]').length === 1"
        )
        assert current.get_attribute("href") == path
        # Seen, not only announced: bolder than the other links, and underlined.
        weight = current.evaluate("a => getComputedStyle(a).fontWeight")
        other = page.locator('.topbar nav a:not([aria-current="page"])').first
        assert int(weight) > int(other.evaluate("a => getComputedStyle(a).fontWeight"))
        assert current.evaluate("a => getComputedStyle(a).borderBottomStyle") == "solid"


def test_no_page_load_leaves_a_console_error_or_a_refusal(demo_live, browser):
    """Every page, loaded as a visitor loads it, a second at least after it is drawn (Dash's
    websocket client dialled within that time): nothing in the console, no 403 from the
    server, no websocket handshake in its log."""
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    seen = responses(page)
    with server_log() as log:
        for path in PAGES:
            page.goto(demo_live.url + path, wait_until="load")
            page.wait_for_selector("main h1", timeout=60_000)
            page.wait_for_timeout(1_000)
    assert errors == []
    assert [s for s in seen if s[0] >= 400] == []
    assert [line for line in log if "WebSocket" in line or '" 403' in line] == []
    # The log did see the page loads: the check above is not vacuous.
    assert any('"GET /shapes HTTP/1.1" 200' in line for line in log), log[:20]
