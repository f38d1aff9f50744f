"""Fixtures of the browser tier."""

from __future__ import annotations

import pytest

from tests.support.browser import launched


@pytest.fixture(scope="package")
def chromium():
    """One headless Chromium for the tier's browser tests
    (Playwright keeps an event loop running meanwhile; no test of this tier runs asyncio)."""
    yield from launched()
