"""Dashboard workflows in a real headless Chromium, each on a server and a database of its own:
profile edits, logins, the seasonal page over four weeks ending now, an empty database."""

from __future__ import annotations

import json
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
    # The fleet: every demo engine at once; replicas, money and verdicts follow from a callback.
    page.goto(demo_live.url + "/rightsizing?window=30d", wait_until="load")
    fleet = page.locator("#rightsizing-fleet")
    fleet.wait_for(timeout=30_000)
    for engine in ("chat-8b", "llm-70b", "code-7b"):
        assert engine in fleet.inner_text()
    total = page.locator("#rightsizing-fleet-total")
    total.wait_for(timeout=180_000)
    assert "a month now" in total.inner_text() and "best plan" in total.inner_text()
    assert "→ $" in fleet.inner_text()  # cost per month now → best plan, per engine
    built = json.loads(demo_live.scalar("SELECT profile FROM engines WHERE name = 'chat-8b'"))
    page.goto(demo_live.url + "/rightsizing?engine=chat-8b&window=30d", wait_until="load")
    verdict = page.locator("#rightsizing-verdict")
    verdict.wait_for(timeout=60_000)
    assert f"Built for {built['max_input_len']:,}-token prompts" in verdict.inner_text()
    assert "replica" in verdict.inner_text() and "SLO" in verdict.inner_text()
    # Replicas and money: today's count from the profile, what the rebuild needs, the SLO, and
    # the plans per month from the callback.
    replicas = page.locator("#rightsizing-replicas")
    assert "running today" in replicas.inner_text()
    assert f"{built['replicas']}" in replicas.locator(".kpi").first.inner_text()
    assert "TTFT p95 ≤ 800 ms, ITL p95 ≤ 40 ms" in replicas.inner_text()
    page.wait_for_selector("#rightsizing-money table", timeout=120_000)
    money = page.locator("#rightsizing-money").inner_text()
    assert "GPU-hours / month" in money and "$" in money
    assert "Cost per million tokens" in money
    page.locator("#rightsizing-heatmap .heatmaplayer").wait_for(timeout=30_000)
    legend = page.locator("#rightsizing-heatmap .legend").text_content()
    assert f"current: max_input_len {built['max_input_len']:,}" in legend
    assert "recommended: max_input_len" in legend
    assert (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct"
        in page.locator("#rightsizing-cmd-vllm").inner_text()
    )
    assert "needs Blackwell" in page.locator("#rightsizing-whatif").inner_text()
    screenshot(page, tmp_path, "rightsizing")
    # The SLO and replicas in the editor: saved like the other fields, and the block follows.
    page.fill(_field("slo_ttft_ms"), "500")
    page.fill(_field("replicas"), "3")
    page.click("#rightsizing-save")
    page.wait_for_url("**saved=**")
    page.locator("#rightsizing-replicas").wait_for(timeout=60_000)
    assert "TTFT p95 ≤ 500 ms" in page.locator("#rightsizing-replicas").inner_text()
    stored = json.loads(demo_live.scalar("SELECT profile FROM engines WHERE name = 'chat-8b'"))
    assert stored["slo_ttft_ms"] == 500 and stored["replicas"] == 3
    # Edit the profile: built for 8,192-token prompts now. Saving reloads with new numbers.
    page.fill(_field("max_input_len"), "8192")
    page.fill(_field("max_seq_len"), "16384")
    first_save = page.url
    page.click("#rightsizing-save")
    page.wait_for_url(lambda url: "saved=" in url and url != first_save, timeout=60_000)
    page.wait_for_function(
        "() => (document.querySelector('#rightsizing-verdict') || {}).innerText"
        "?.includes('Built for 8,192-token prompts')",
        timeout=60_000,
    )
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
    # Delete: the browser asks first; dismissed, nothing happens; accepted, back to the
    # fleet without chat-8b's profile.
    asked: list[str] = []

    def answer(dialog, accept: bool) -> None:
        asked.append(dialog.message)
        dialog.accept() if accept else dialog.dismiss()

    page.once("dialog", lambda d: answer(d, False))
    page.click("#rightsizing-delete button")
    page.wait_for_timeout(500)
    assert asked and "Delete this engine's profile?" in asked[0]
    assert demo_live.scalar("SELECT count(*) FROM engines WHERE name = 'chat-8b'") == 1
    page.once("dialog", lambda d: answer(d, True))
    page.click("#rightsizing-delete button")
    page.wait_for_url("**deleted=chat-8b**")
    page.locator("#rightsizing-fleet").wait_for(timeout=30_000)
    assert "chat-8b" not in page.locator("#rightsizing-fleet").inner_text()
    assert demo_live.scalar("SELECT count(*) FROM engines WHERE name = 'chat-8b'") == 0
    assert errors == []


def test_seasonal_page_shows_the_night_batch_window(settings, demo_template, browser, tmp_path):
    # Four weeks of the demo platform at production volume (a 0.1% sample) ending now: its
    # night digest batch (22:00-06:00) on llm-70b is the long-context window of the best split.
    template = demo_template(requests=66_000, days=28, end=None, sample_rate=0.001)
    copy_database(template, settings.db)
    gen = serve(settings)
    live = next(gen)
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        errors = console_errors(page)
        page.goto(live.url + "/seasonal?engine=llm-70b&weeks=4", wait_until="load")
        verdict = page.locator("#seasonal-verdict")
        verdict.wait_for(timeout=120_000)
        page.locator("#seasonal-matrix .heatmaplayer").wait_for(timeout=30_000)
        legend = page.locator("#seasonal-matrix .legend").text_content()
        with live.client() as c:
            body = c.get("/api/engines/llm-70b/seasonal", params={"weeks": 4}, timeout=120).json()
        assert verdict.inner_text() == body["verdict"]  # the page and the API agree
        # At production volume the split pays: at least 15% of GPU-hours against hourly scaling.
        assert body["verdict"].startswith("Run two engines"), body["verdict"]
        assert body["plans"]["savings_vs_hourly"] >= 0.15
        windows = body["plans"]["seasonal"]["windows"]
        for w in windows:
            assert w["hours"] in legend  # both windows are drawn on the matrix
        # The long-context window covers the night batch's hours (22:00-06:00).
        long_window = max(windows, key=lambda w: w["max_seq_len"])["hours"]
        start, end = (int(t[:2]) for t in long_window.split("–"))
        hours = {h % 24 for h in range(start, end if end > start else end + 24)}
        assert set(range(22, 24)) | set(range(0, 6)) <= hours
        # The plans with money: GPU-hours and cost per month each, the best one's saving.
        plans = page.locator("#seasonal-plans").inner_text()
        assert "GPU-hours / month" in plans and "$" in plans
        for name in ("now", "rebuilt", "hourly", "seasonal"):
            assert name in plans
        assert "llm-70b" in page.locator("#seasonal-money .verdict").inner_text()
        # Replicas per hour with what set them, and the predicted latency against the SLO.
        steps = page.locator("#seasonal-replicas .scatterlayer .trace")
        steps.first.wait_for(state="attached", timeout=30_000)  # a flat line has no height
        assert "set by" in page.locator("#seasonal-replicas .legend").text_content()
        page.locator("#seasonal-latency .barlayer").first.wait_for(state="attached", timeout=30_000)
        assert "TTFT target 3,000 ms" in page.locator("#seasonal-latency .legend").text_content()
        cards = page.locator("#seasonal-windows").inner_text()
        assert cards.count("trtllm-build") == 2
        # The deploy documents, copyable, for the namespace typed in.
        keda = page.locator("#seasonal-keda").inner_text()
        assert "kind: ScaledObject" in keda and "namespace: llm" in keda
        assert "HorizontalPodAutoscaler" in page.locator("#seasonal-kubernetes").inner_text()
        assert "max_tokens_in_paged_kv_cache" in page.locator("#seasonal-deploy").inner_text()
        assert page.locator("#seasonal-deploy .copy").count() >= 3
        page.locator("#seasonal-deploy").screenshot(path=str(tmp_path / "seasonal-deploy.png"))
        page.fill("#seasonal-namespace", "inference")
        page.locator("#seasonal-deploy-form button").click()
        page.wait_for_url("**namespace=inference**")
        page.locator("#seasonal-keda").wait_for(timeout=120_000)
        assert "namespace: inference" in page.locator("#seasonal-keda").inner_text()
        screenshot(page, tmp_path, "seasonal")
        page.goto(live.url + "/seasonal?engine=llm-70b&weeks=4&days=split", wait_until="load")
        days = page.locator("#seasonal-days")
        days.wait_for(timeout=120_000)
        assert "weekday and weekend configurations" in days.inner_text().lower()
        # Drift on the Overview: the over-provisioned code-7b is named.
        page.goto(live.url + "/", wait_until="load")
        drift = page.locator("#drift-panel")
        drift.wait_for(timeout=60_000)
        assert "over-provisioned" in drift.inner_text()
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
