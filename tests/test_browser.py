"""The dashboard in a real headless Chromium (Debian's, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime

import pytest

from app.config import Settings
from app.dashboard.speedups import polyfill
from app.services import demo
from app.storage.database import Database
from app.storage.engines import delete_profile, put_profile
from tests.conftest import free_port, serve
from tests.fixtures import batch

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
        page.goto(live.url + "/?window=all")
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
        _screenshot(page, tmp_path, "overview")
    finally:
        gen.close()


@pytest.fixture
def demo_live(settings):
    with Database(settings.db).open() as db:
        demo.seed(db, requests=5000, days=14, end=datetime(2026, 11, 23, tzinfo=UTC))
    gen = serve(settings)
    try:
        yield next(gen)
    finally:
        gen.close()


def _screenshot(page, tmp_path, name: str) -> None:
    """Save a full-page screenshot as a test artifact (and to TOKENSHAPE_SCREENSHOTS if set)."""
    page.screenshot(path=str(tmp_path / f"{name}.png"), full_page=True)
    if os.environ.get("TOKENSHAPE_SCREENSHOTS"):
        page.screenshot(
            path=os.path.join(os.environ["TOKENSHAPE_SCREENSHOTS"], f"{name}.png"), full_page=True
        )


def _errors(page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    return errors


def test_shapes_heatmap_total_filters_and_url(demo_live, browser, tmp_path):
    live = demo_live
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = _errors(page)
    page.goto(live.url + "/shapes?window=all")
    page.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    total = live.scalar("SELECT count(*) FROM requests")
    assert page.locator("#shapes-total").inner_text() == f"{total:,}"
    # The quantile table follows the heat map in its own callback; same window, same data.
    quantiles = page.locator("#shapes-quantiles")
    quantiles.wait_for(timeout=30_000)
    isl_max = live.scalar("SELECT max(isl) FROM requests")
    assert f"{isl_max:,}" in quantiles.locator("tr", has_text="input tokens").inner_text()
    four = page.locator("#shapes-four").inner_text()
    assert sum(int(r.split("\t")[1].replace(",", "")) for r in four.splitlines()[1:]) == total
    # Filter by engine through the form: the URL carries it, and so does the count.
    page.select_option("#filter-engine", "llm-70b")
    page.click("#filter-apply")
    page.wait_for_url("**engine=llm-70b**")
    page.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    engine_total = live.scalar("SELECT count(*) FROM requests WHERE engine = 'llm-70b'")
    assert page.locator("#shapes-total").inner_text() == f"{engine_total:,}"
    shared = page.url
    _screenshot(page, tmp_path, "shapes")
    # Opening the shared link restores the view.
    other = browser.new_page()
    other.goto(shared)
    other.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    assert other.locator("#shapes-total").inner_text() == f"{engine_total:,}"
    assert other.locator("#filter-engine").input_value() == "llm-70b"
    assert errors == []


def test_a_page_arrives_with_its_first_layout(demo_live, browser):
    """The page is in Dash's first layout (no routing round trip); Dash's Babel polyfill is
    replaced by the regenerator runtime and dcc.Graph's chunk is preloaded, and every page
    still draws without a console error (the other browser tests)."""
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = _errors(page)
    posts: list[str] = []
    scripts: list[str] = []
    page.on("request", lambda r: posts.append(r.post_data or "") if r.method == "POST" else None)
    page.on("request", lambda r: scripts.append(r.url) if r.resource_type == "script" else None)
    page.goto(demo_live.url + "/shapes?window=all&bins=log2half")
    page.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=30_000)
    page.locator("#shapes-quantiles").wait_for(timeout=30_000)
    assert page.title() == "tokenshape · Shapes"
    assert posts and not any("_pages_content" in p for p in posts)  # only the tables' callback
    # Without npm at install there is no runtime: Dash's page keeps its polyfill then.
    runtime = any("regenerator-runtime.js" in u for u in scripts)
    assert runtime == polyfill.RUNTIME.is_file()
    assert any("polyfill@" in u for u in scripts) != runtime
    assert sum("async-graph.js" in u for u in scripts) == 1
    assert errors == []


def test_shapes_draws_an_engines_bounds_and_shows_percentages(demo_live, browser, tmp_path):
    put_profile(
        demo_live.db.cursor(),
        "llm-70b",
        {"model": "llama-3.1-70b-instruct", "max_input_len": 8192, "max_seq_len": 16384},
        datetime(2026, 11, 23, tzinfo=UTC),
    )
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = _errors(page)
    page.goto(demo_live.url + "/shapes?window=all&engine=llm-70b&scale=pct")
    graph = page.locator("#shapes-heatmap")
    graph.locator(".heatmaplayer").wait_for(timeout=30_000)
    legend = graph.locator(".legend").text_content()
    assert "max_input_len 8,192" in legend and "max_seq_len 16,384" in legend
    assert "% of requests" in graph.locator(".colorbar").text_content()
    assert page.locator("#filter-scale").input_value() == "pct"
    _screenshot(page, tmp_path, "shapes-bounds")
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
    errors = _errors(page)
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
    _screenshot(page, tmp_path, "rightsizing")
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


def test_seasonal_page_shows_the_night_batch_window(settings, browser, tmp_path):
    # Four weeks of demo traffic ending now: its night summarisation batch (22:00-06:00) on
    # llm-70b is the long-context window of the best split.
    with Database(settings.db).open() as db:
        demo.seed(db, requests=20000, days=28)
    gen = serve(settings)
    live = next(gen)
    try:
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        errors = _errors(page)
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
        _screenshot(page, tmp_path, "seasonal")
        # Drift on the Overview: the over-provisioned chat-8b is named.
        page.goto(live.url + "/")
        drift = page.locator("#drift-panel")
        drift.wait_for(timeout=30_000)
        assert "chat-8b" in drift.inner_text() and "over-provisioned" in drift.inner_text()
        assert errors == []
    finally:
        gen.close()


def test_shapes_empty_window_shows_what_to_do(demo_live, browser):
    page = browser.new_page()
    errors = _errors(page)
    page.goto(demo_live.url + "/shapes?window=1h")  # the demo ended days ago
    empty = page.locator("#shapes-empty")
    empty.wait_for(timeout=30_000)
    assert "No requests in this window" in empty.inner_text()
    assert "/v1/requests" in empty.inner_text()
    assert errors == []


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


def test_latency_and_traffic_pages_render_without_errors(demo_live, browser, tmp_path):
    live = demo_live
    page = browser.new_page(viewport={"width": 1366, "height": 768})
    errors = _errors(page)
    page.goto(live.url + "/latency?window=all&engine=chat-8b")
    for graph in (
        "latency-ttft-trend",
        "latency-itl-trend",
        "latency-e2e-trend",
        "latency-ttft-isl",
        "latency-itl-position",
    ):
        page.locator(f"#{graph} .scatterlayer").first.wait_for(timeout=30_000)
    page.locator("#latency-e2e-dist .barlayer").first.wait_for(timeout=30_000)
    assert "ms more time to first token per 1,000 input tokens" in page.inner_text("body")
    _screenshot(page, tmp_path, "latency")
    page.goto(live.url + "/traffic?window=all")
    page.locator("#traffic-matrix .heatmaplayer").wait_for(timeout=30_000)
    page.locator("#traffic-rates .scatterlayer").first.wait_for(timeout=30_000)
    total = live.scalar("SELECT count(*) FROM requests")
    assert page.locator("#traffic-total").inner_text() == f"{total:,}"
    _screenshot(page, tmp_path, "traffic")
    page.goto(live.url + "/traffic?window=1h")
    page.locator("#traffic-empty").wait_for(timeout=30_000)
    assert errors == []


def test_reports_page_shows_the_email_and_the_history(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = _errors(page)
    page.goto(demo_live.url + "/reports")
    subject = page.locator("#reports-subject")
    subject.wait_for(timeout=30_000)
    assert subject.inner_text().startswith("tokenshape ") and "engines" in subject.inner_text()
    frame = page.frame_locator("#reports-preview")
    assert "chat-8b" in frame.locator("body").inner_text(timeout=30_000)
    assert "Nothing sent yet" in page.locator("#reports-history").inner_text()
    _screenshot(page, tmp_path, "reports")
    assert errors == []


def test_login_roles_admin_page_and_logout_in_the_browser(tmp_path, browser):
    """Logins on: the form, a viewer's read-only editor, an admin's save (Dash echoes the CSRF
    cookie as a header), the admin page making a token, and logout."""
    settings = Settings(db=tmp_path / "a.duckdb", port=free_port(), auth="on", _env_file=None)
    with Database(settings.db).open() as db:
        demo.seed(db, requests=3000, days=7, end=datetime(2026, 11, 23, tzinfo=UTC))
    gen = serve(settings)
    live = next(gen)
    try:
        live.user("ada", "admin")
        live.user("vic", "viewer")
        page = browser.new_page(viewport={"width": 1366, "height": 768})
        errors = _errors(page)
        page.goto(live.url + "/rightsizing?engine=chat-8b&window=30d")
        page.wait_for_url("**/login?next=**")
        page.fill("input[name=username]", "vic")
        page.fill("input[name=password]", "wrong password!")
        page.click("button[type=submit]")
        assert "Wrong user name or password" in page.locator(".login-message").inner_text()
        _screenshot(page, tmp_path, "login")
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
        _screenshot(page, tmp_path, "admin")
        with live.client(token) as shipper:
            assert shipper.post("/v1/requests", json=batch(2)).status_code == 200
        assert errors == [], "\n".join(map(str, errors))
    finally:
        gen.close()
