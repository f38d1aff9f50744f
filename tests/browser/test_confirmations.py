"""Destructive actions ask first, in a real headless Chromium: revoking a token on the Admin
page opens the browser's confirmation; dismissed, the token still works; accepted, it stops."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.browser import BROWSER
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER


@pytest.fixture(scope="module")
def live(tmp_path_factory) -> Iterator[LiveServer]:
    """An empty, migrated database served in open mode (everyone an admin)."""
    yield from serve(server_settings(tmp_path_factory.mktemp("confirm") / "t.duckdb"))


def test_revoking_a_token_asks_first(live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(live.url + "/admin", wait_until="load")
    page.fill("#admin-gateway", "gw-confirm")
    page.click("#admin-create")
    result = page.locator("#admin-result")
    result.filter(has_text="Copy it now").wait_for(timeout=30_000)
    secret = page.locator("#admin-result .new-token").inner_text().strip()

    def works(token: str) -> bool:
        with live.client(token) as c:
            return c.post("/v1/requests", json=[]).status_code != 401

    assert works(secret) and not works("not-a-token")
    chosen = page.locator("#admin-token-id option").filter(has_text="gw-confirm").first
    page.select_option("#admin-token-id", chosen.get_attribute("value"))
    asked: list[str] = []
    page.once("dialog", lambda d: (asked.append(d.message), d.dismiss()))
    page.click("#admin-revoke button")
    page.wait_for_timeout(700)
    assert asked and asked[0].startswith("Revoke this token?")
    assert works(secret) and "Revoked" not in result.inner_text()
    page.once("dialog", lambda d: d.accept())
    page.click("#admin-revoke button")
    result.filter(has_text="Revoked").wait_for(timeout=30_000)
    assert not works(secret)
