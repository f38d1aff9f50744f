"""Dashboard workflows in a real headless Chromium, each on a server and a database of its own:
profile edits, logins, the seasonal page over four weeks ending now, an empty database."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from app.config import Settings
from app.storage.engines import delete_profile, put_profile
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.net import free_port
from tests.support.records import batch
from tests.support.server import LiveServer, serve

pytestmark = BROWSER


@pytest.fixture
def demo_live(settings, demo_template) -> Iterator[LiveServer]:
    """The app over its own copy of 5,000 demo requests (these tests change profiles)."""
    copy_database(demo_template(requests=5000, days=14), settings.db)
    yield from serve(settings, wait=False)


def test_shapes_draws_an_engines_bounds_and_shows_percentages(demo_live, browser, tmp_path):
    put_profile(
        demo_live.db.cursor(),
        "llm-70b",
        {"model": "llama-3.1-70b-instruct", "max_input_len": 8192, "max_seq_len": 16384},
        datetime(2026, 11, 23, tzinfo=UTC),
    )
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = console_errors(page)
    page.goto(demo_live.url + "/shapes?window=all&engine=llm-70b&scale=pct")
    graph = page.locator("#shapes-heatmap")
    graph.locator(".heatmaplayer").wait_for(timeout=30_000)
    legend = graph.locator(".legend").text_content()
    assert "max_input_len 8,192" in legend and "max_seq_len 16,384" in legend
    assert "% of requests" in graph.locator(".colorbar").text_content()
    assert page.locator("#filter-scale").input_value() == "pct"
    screenshot(page, tmp_path, "shapes-bounds")
    # An engine without a profile: no lines, and the page says how to get them.
    delete_profile(demo_live.db.cursor(), "chat-8b")
    page.goto(demo_live.url + "/shapes?window=all&engine=chat-8b")
    graph.locator(".heatmaplayer").wait_for(timeout=30_000)
    assert graph.locator(".legend").count() == 0
    assert "Pick one engine with a profile" in page.locator("p.muted").first.inner_text()
    assert errors == []


def _field(name: str) -> str:
    """The selector of a profile editor field (Dash renders dict ids as sorted-key JSON)."""
    return f'[id=\'{{"name":"{name}","type":"rs-field"}}\']'


def test_rightsizing_page_recommends_and_a_profile_edit_changes_it(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = console_errors(page)
    # The fleet: every demo engine with its verdict; chat-8b is the over-provisioned one.
    page.goto(demo_live.url + "/rightsizing?window=30d")
    fleet = page.locator("#rightsizing-fleet")
    fleet.wait_for(timeout=30_000)
    for engine in ("chat-8b", "llm-70b", "code-7b"):
        assert engine in fleet.inner_text()
    page.goto(demo_live.url + "/rightsizing?engine=chat-8b&window=30d")
    verdict = page.locator("#rightsizing-verdict")
    verdict.wait_for(timeout=30_000)
    assert "Built for 4,096-token prompts" in verdict.inner_text()
    assert "more concurrent requests" in verdict.inner_text()
    page.locator("#rightsizing-heatmap .heatmaplayer").wait_for(timeout=30_000)
    legend = page.locator("#rightsizing-heatmap .legend").text_content()
    assert "current: max_input_len 4,096" in legend and "recommended: max_input_len" in legend
    assert (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct"
        in page.locator("#rightsizing-cmd-vllm").inner_text()
    )
    assert "needs Blackwell" in page.locator("#rightsizing-whatif").inner_text()
    screenshot(page, tmp_path, "rightsizing")
    # Edit the profile: built for 8,192-token prompts now. Saving reloads with new numbers.
    page.fill(_field("max_input_len"), "8192")
    page.fill(_field("max_seq_len"), "16384")
    page.click("#rightsizing-save")
    page.wait_for_url("**saved=**")
    verdict.wait_for(timeout=30_000)
    assert "Built for 8,192-token prompts" in verdict.inner_text()
    stored = demo_live.scalar("SELECT profile FROM engines WHERE name = 'chat-8b'")
    assert '"max_seq_len": 16384' in stored
    # An invalid edit is refused with the field named, and nothing is stored.
    page.fill(_field("max_input_len"), "32768")
    page.click("#rightsizing-save")
    saved = page.locator("#rightsizing-saved")
    saved.filter(has_text="max_input_len").wait_for(timeout=30_000)
    assert '"max_input_len": 8192' in demo_live.scalar(
        "SELECT profile FROM engines WHERE name = 'chat-8b'"
    )
    # Delete: back to the fleet, without chat-8b's profile.
    page.click("#rightsizing-delete")
    page.wait_for_url("**deleted=chat-8b**")
    page.locator("#rightsizing-fleet").wait_for(timeout=30_000)
    assert "chat-8b" not in page.locator("#rightsizing-fleet").inner_text()
    assert demo_live.scalar("SELECT count(*) FROM engines WHERE name = 'chat-8b'") == 0
    assert errors == []


def test_seasonal_page_shows_the_night_batch_window(settings, demo_template, browser, tmp_path):
    # Four weeks of demo traffic ending now: its night summarisation batch (22:00-06:00) on
    # llm-70b is the long-context window of the best split.
    copy_database(demo_template(requests=20000, days=28, end=None), settings.db)
    gen = serve(settings)
    live = next(gen)
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        errors = console_errors(page)
        page.goto(live.url + "/seasonal?engine=llm-70b&weeks=4")
        verdict = page.locator("#seasonal-verdict")
        verdict.wait_for(timeout=30_000)
        assert verdict.inner_text().startswith("Run one engine")
        page.locator("#seasonal-matrix .heatmaplayer").wait_for(timeout=30_000)
        legend = page.locator("#seasonal-matrix .legend").text_content()
        with live.client() as c:
            body = c.get("/api/engines/llm-70b/seasonal", params={"weeks": 4}).json()
        windows = body["plans"]["seasonal"]["windows"]
        for w in windows:
            assert w["hours"] in legend  # both windows are drawn on the matrix
        # The long-context window covers the night batch's hours (22:00-06:00).
        long_window = max(windows, key=lambda w: w["max_seq_len"])["hours"]
        start, end = (int(t[:2]) for t in long_window.split("–"))
        hours = {h % 24 for h in range(start, end if end > start else end + 24)}
        assert set(range(22, 24)) | set(range(0, 6)) <= hours
        assert "GPU-hours" in page.locator("#seasonal-plans").inner_text()
        cards = page.locator("#seasonal-windows").inner_text()
        assert cards.count("trtllm-build") == 2
        page.goto(live.url + "/seasonal?engine=llm-70b&weeks=4&days=split")
        days = page.locator("#seasonal-days")
        days.wait_for(timeout=30_000)
        assert "weekday and weekend configurations" in days.inner_text().lower()
        screenshot(page, tmp_path, "seasonal")
        # Drift on the Overview: the over-provisioned chat-8b is named.
        page.goto(live.url + "/")
        drift = page.locator("#drift-panel")
        drift.wait_for(timeout=30_000)
        assert "chat-8b" in drift.inner_text() and "over-provisioned" in drift.inner_text()
        assert errors == []
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


def test_login_roles_admin_page_and_logout_in_the_browser(tmp_path, demo_template, browser):
    """Logins on: the form, a viewer's read-only editor, an admin's save (Dash echoes the CSRF
    cookie as a header), the admin page making a token, and logout."""
    settings = Settings(db=tmp_path / "a.duckdb", port=free_port(), auth="on", _env_file=None)
    copy_database(demo_template(requests=5000, days=14), settings.db)
    gen = serve(settings)
    live = next(gen)
    try:
        live.user("ada", "admin")
        live.user("vic", "viewer")
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        errors = console_errors(page)
        page.goto(live.url + "/rightsizing?engine=chat-8b&window=30d")
        page.wait_for_url("**/login?next=**")
        page.fill("input[name=username]", "vic")
        page.fill("input[name=password]", "wrong password!")
        page.click("button[type=submit]")
        assert "Wrong user name or password" in page.locator(".login-message").inner_text()
        screenshot(page, tmp_path, "login")
        assert errors == [
            "Failed to load resource: the server responded with a status of 401 (Unauthorized)"
        ]  # the refused login is answered 401, on purpose
        errors.clear()
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        page.wait_for_url("**/rightsizing?engine=chat-8b&window=30d")
        page.locator("#rightsizing-verdict").wait_for(timeout=30_000)
        assert "vic · viewer" in page.locator("#who").inner_text()
        assert page.locator("#rightsizing-save").is_disabled()
        assert "Admin" not in page.locator(".topbar nav").inner_text()
        page.click("#logout")
        page.wait_for_url("**/login?out=1")
        page.goto(live.url + "/rightsizing?engine=chat-8b&window=30d")
        page.fill("input[name=username]", "ada")
        page.fill("input[name=password]", "correct horse battery")
        page.click("button[type=submit]")
        page.locator("#rightsizing-verdict").wait_for(timeout=30_000)
        page.fill(_field("max_input_len"), "8192")
        page.fill(_field("max_seq_len"), "16384")
        page.click("#rightsizing-save")
        page.wait_for_url("**saved=**")
        assert '"max_seq_len": 16384' in live.scalar(
            "SELECT profile FROM engines WHERE name = 'chat-8b'"
        )
        page.goto(live.url + "/admin")
        page.locator("#admin-tokens").wait_for(timeout=30_000)
        page.fill("#admin-gateway", "edge-eu")
        page.click("#admin-create")
        page.locator(".new-token").wait_for(timeout=30_000)
        token = page.locator(".new-token").inner_text().strip()
        assert token.startswith("tks_")
        assert "edge-eu" in page.locator("#admin-tokens").inner_text()
        assert token not in page.locator("#admin-tokens").inner_text()
        screenshot(page, tmp_path, "admin")
        with live.client(token) as shipper:
            assert shipper.post("/v1/requests", json=batch(2)).status_code == 200
        assert errors == [], "\n".join(map(str, errors))
    finally:
        gen.close()
