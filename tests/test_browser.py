"""The dashboard in a real headless Chromium (Debian's, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime

import pytest

from app import demo
from app.storage.database import Database
from tests.conftest import serve

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="Debian chromium not installed; `make test` installs it",
    ),
]
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield b
        finally:
            b.close()


def test_overview_shows_the_stored_traffic(settings, browser, tmp_path):
    with Database(settings.db).open() as db:
        demo.seed(db, requests=5000, days=14, end=datetime(2026, 11, 23, tzinfo=UTC))
    gen = serve(settings)
    live = next(gen)
    try:
        page = browser.new_page(viewport={"width": 1280, "height": 800})
        page.goto(live.url + "/")
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
        page.screenshot(path=str(tmp_path / "overview.png"), full_page=True)
        if os.environ.get("TOKENSHAPE_SCREENSHOTS"):
            page.screenshot(
                path=os.environ["TOKENSHAPE_SCREENSHOTS"] + "/overview.png", full_page=True
            )
    finally:
        gen.close()


def test_empty_database_says_how_to_start(settings, browser):
    gen = serve(settings)
    live = next(gen)
    try:
        page = browser.new_page()
        page.goto(live.url + "/")
        empty = page.locator("#overview-empty")
        empty.wait_for(timeout=30_000)
        assert "No traffic yet" in empty.inner_text()
        assert "tokenshape demo" in empty.inner_text()
    finally:
        gen.close()
