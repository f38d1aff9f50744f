"""The Overview as the morning landing page, in a real headless Chromium at 1366×768: the drift
findings and the engine cards' first row are on screen without scrolling, every card says its
status in the one vocabulary with its requests/s, goodput and money, and a card's link opens
that engine's Rightsizing page over the same window, with the same status. Demo traffic (its
four engine profiles), the clock at the demo's end."""

from __future__ import annotations

import os
from collections.abc import Iterator
from urllib.parse import parse_qs, urlencode, urlparse

import pytest

from app.dashboard import ids
from app.dashboard.speedups import prefetched
from app.services.demo import DEMO_PROFILES
from app.sizing.status import LABELS
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER
WIDTH, HEIGHT = 1366, 768
WORDS = {*LABELS.values(), "short of replicas"}


@pytest.fixture(scope="module")
def cards_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests in the 14 days before END, its clock at END."""
    db = copy_database(
        demo_template(requests=5000, days=14), tmp_path_factory.mktemp("cards") / "c.duckdb"
    )
    yield from serve(server_settings(db), wait=False, clock=lambda: END)


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    prefetched.reset()


def _filled(page, cards: int) -> None:
    """Wait for both callbacks: every card's status badge and its requests/s sparkline."""
    page.wait_for_function(
        f"document.querySelectorAll('.ov-card .status').length === {cards} && "
        f"document.querySelectorAll('.ov-card img.ov-spark').length === {cards}",
        timeout=180_000,
    )


def _viewport_shot(page, tmp_path, name: str) -> None:
    """What the screen shows without scrolling (the full page is `screenshot`'s)."""
    page.screenshot(path=str(tmp_path / f"{name}.png"))
    if os.environ.get("TOKENSHAPE_SCREENSHOTS"):
        page.screenshot(path=os.path.join(os.environ["TOKENSHAPE_SCREENSHOTS"], f"{name}.png"))


def test_drift_and_the_first_row_of_cards_are_above_the_fold(cards_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    errors = console_errors(page)
    page.goto(cards_live.url + "/?window=7d", wait_until="load")
    page.wait_for_selector(f"#{ids.OVERVIEW_CARDS} .ov-card", timeout=30_000)
    cards = page.locator(".ov-card")
    assert cards.count() == len(DEMO_PROFILES)
    _filled(page, len(DEMO_PROFILES))
    _viewport_shot(page, tmp_path, "overview-cards-fold")
    screenshot(page, tmp_path, "overview-cards")
    assert page.evaluate("window.scrollY") == 0
    drift = page.locator(f"#{ids.DRIFT_PANEL}").bounding_box()
    assert drift is not None and drift["y"] >= 0 and drift["y"] + drift["height"] <= HEIGHT, drift
    assert "Drift of the last 7 days" in page.locator(f"#{ids.DRIFT_PANEL}").inner_text()
    boxes = [cards.nth(k).bounding_box() for k in range(cards.count())]
    top = min(b["y"] for b in boxes if b)
    first_row = [b for b in boxes if b and abs(b["y"] - top) < 2]
    assert len(first_row) >= 2  # the cards sit side by side at this width
    for box in first_row:
        assert box["y"] > drift["y"] and box["y"] + box["height"] <= HEIGHT, box
    for k in range(cards.count()):
        card = cards.nth(k)
        text = card.inner_text()
        status = card.locator(".status").inner_text().strip()
        assert status in WORDS, text
        assert ("req/s" in text or "req/h" in text) and "goodput" in text, text
        assert "a month" in text, text
        assert "…" not in text, text  # both callbacks answered
        money = card.locator(".ov-fact").last.inner_text()
        assert "→" in money and "$" in money, money  # the demo's profiles are priced
    assert errors == []


def test_a_cards_link_opens_its_rightsizing_page_over_the_same_window(cards_live, browser):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    errors = console_errors(page)
    page.goto(cards_live.url + "/?window=7d", wait_until="load")
    _filled(page, len(DEMO_PROFILES))
    card = page.locator(".ov-card").first
    engine = card.locator(".ov-card-name").inner_text().strip()
    status = card.locator(".status").inner_text().strip()
    card.locator(".ov-card-name").click()
    page.wait_for_url("**/rightsizing?**", timeout=30_000)
    query = parse_qs(urlparse(page.url).query)
    assert query == {"engine": [engine], "window": ["7d"]}
    verdict = page.locator(f"#{ids.RIGHTSIZING_VERDICT}")
    verdict.wait_for(timeout=120_000)
    # The same status, in the same words, on the page the card links to.
    assert verdict.locator(".status").inner_text().strip() == status
    assert page.locator("#filter-window").input_value() == "7d"
    assert errors == []


def test_a_custom_window_is_carried_as_its_bounds(cards_live, browser):
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    errors = console_errors(page)
    start, end = "2026-11-18T00:00:00+00:00", "2026-11-22T00:00:00+00:00"
    asked = urlencode({"window": "custom", "start": start, "end": end})
    page.goto(cards_live.url + "/?" + asked, wait_until="load")
    page.wait_for_selector(".ov-card .status", timeout=180_000)
    link = page.locator(".ov-card .ov-card-name").first
    href = link.get_attribute("href") or ""
    assert parse_qs(urlparse(href).query)["start"] == [start]
    assert parse_qs(urlparse(href).query)["end"] == [end]
    status = page.locator(".ov-card .status").first.inner_text().strip()
    link.click()
    page.wait_for_url("**/rightsizing?**", timeout=30_000)
    verdict = page.locator(f"#{ids.RIGHTSIZING_VERDICT}")
    verdict.wait_for(timeout=120_000)
    assert page.locator(".rightsizing-query-error").count() == 0  # the page takes the bounds
    assert verdict.locator(".status").inner_text().strip() == status
    assert errors == []
