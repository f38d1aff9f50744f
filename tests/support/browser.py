"""Debian's Chromium driven by Playwright: where it is, how it starts, page helpers."""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
HAVE_CHROMIUM = os.path.exists(CHROMIUM)
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
# For modules of browser tests: `pytestmark = BROWSER`.
BROWSER = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not HAVE_CHROMIUM, reason="Debian chromium not installed; `make test` installs it"
    ),
]


def launched() -> Iterator:
    """Start Playwright and Debian's Chromium; yields the browser, closes both after.

    While it runs, Playwright's sync API keeps an event loop running in this thread:
    `asyncio.run` fails there, so a fixture using it must not outlive the tests that need it."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def screenshot(page, tmp_path, name: str) -> None:
    """Save a full-page screenshot as a test artifact (and to TOKENSHAPE_SCREENSHOTS if set)."""
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    if os.environ.get("TOKENSHAPE_SCREENSHOTS"):
        page.screenshot(
            path=os.path.join(os.environ["TOKENSHAPE_SCREENSHOTS"], f"{name}.png"), full_page=True
        )


def console_errors(page) -> list[str]:
    """A list that collects the page's console errors and uncaught exceptions from now on."""
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


@contextmanager
def server_log() -> Iterator[list[str]]:
    """Uvicorn's log lines of a server in this process while the block runs, INFO included:
    its access lines ("GET /path HTTP/1.1" 200) and websocket handshakes ("WebSocket /x" 403)."""
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler = Keep(logging.INFO)
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "uvicorn.access")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
    try:
        yield lines
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


def responses(page) -> list[tuple[int, str]]:
    """A list that collects (status, url) of every HTTP answer the page gets from now on."""
    seen: list[tuple[int, str]] = []
    page.on("response", lambda r: seen.append((r.status, r.url)))
    return seen
