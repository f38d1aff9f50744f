"""An HTML/JS payload in model, engine, tenant and gateway names, through ingest, on every
dashboard page in a real Chromium and in the weekly email: shown as text, never run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode

import pytest

from app.jobs.schedule import last_full_week
from app.reports.build import report_for
from app.reports.render import render
from app.storage.engines import put_profile
from tests.support.browser import BROWSER
from tests.support.records import record

pytestmark = BROWSER
PAYLOAD = "\"'><img src=x onerror=alert(1)><script>alert(2)</script>"
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;&lt;script&gt;alert(2)&lt;/script&gt;"
# Where the names show: tables, selects, figure labels, the profile editor, the token list.
PAGES = [
    "/?window=7d",
    "/shapes?window=all",
    "/shapes?" + urlencode({"window": "all", "model": PAYLOAD, "engine": PAYLOAD}),
    "/latency?" + urlencode({"window": "all", "engine": PAYLOAD}),
    "/traffic?" + urlencode({"window": "all", "tenant": PAYLOAD}),
    "/rightsizing?window=30d",
    "/rightsizing?" + urlencode({"window": "30d", "engine": PAYLOAD}),
    "/seasonal?" + urlencode({"engine": PAYLOAD, "weeks": 2}),
    "/reports",
    "/admin",
]
READY = (
    "#filter-bar, #rightsizing-form, #seasonal-form, #reports-subject, #admin-tokens, .page-error"
)
# What an injection would leave behind, and whether the escaped text is there.
INJECTED = f"""() => ({{
    images: document.querySelectorAll('img[src="x"], img[onerror]').length,
    scripts: [...document.scripts].filter(s => s.text.includes('alert(2)')
        && (!s.type || s.type.includes('javascript'))).length,
    html: document.documentElement.outerHTML.includes({ESCAPED!r}),
}})"""


@pytest.fixture(scope="module")
def hostile_names(module_live):
    """Two weeks of traffic whose model, engine, tenant and gateway are the payload, in one
    server the module shares (its tests only look)."""
    live = module_live
    now = datetime.now(UTC)
    recs = [
        record(
            i,
            "xss",
            model=PAYLOAD,
            engine=PAYLOAD,
            tenant=PAYLOAD,
            error_type=PAYLOAD,
            status="error" if i % 9 == 0 else "ok",
            started_at=(now - timedelta(hours=6 * i + 1)).isoformat(),
            token_gaps_ms=[10.0, 12.0, 11.0],
        )
        for i in range(56)
    ]
    with live.client(live.token("ingest", gateway=PAYLOAD)) as c:
        assert c.post("/v1/requests", json=recs).json()["accepted"] == 56
    # The engine's profile (its name holds a '/', so not through the /api/engines/{name} path).
    put_profile(
        live.db.cursor(),
        PAYLOAD,
        {"model": "llama-3.1-8b", "gpu": "L40S", "max_input_len": 4096, "max_seq_len": 8192},
        now,
    )
    live.settle()
    return live


def test_payload_names_are_text_on_every_page(hostile_names, browser):
    live = hostile_names
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    for path in PAGES:
        page.goto(live.url + path)
        page.locator(READY).first.wait_for(timeout=30_000)
        assert page.locator(".page-error").count() == 0, path
        # Graphs come in their own callbacks: wait for each page's figures to be drawn.
        for graph in page.locator(".js-plotly-plot").all():
            graph.locator(".main-svg").first.wait_for(timeout=30_000)
        frames = [page]
        if path == "/reports":  # the email preview: a sandboxed iframe of its own
            preview = page.frame_locator("#reports-preview").locator("body")
            preview.get_by_text("alert(2)", exact=False).first.wait_for(timeout=30_000)
            frames = [f for f in page.frames if f is not page.main_frame]
        for frame in frames:
            found = frame.evaluate(INJECTED)
            assert found["images"] == 0 and found["scripts"] == 0, (path, found)
            # Shown, and shown as text: the escaped form is in the document, the raw one in
            # what a reader sees.
            assert found["html"] and PAYLOAD in frame.locator("body").inner_text(), path
        assert dialogs == [], (path, dialogs)


def test_payload_names_are_escaped_in_the_email(hostile_names, browser):
    live = hostile_names
    settings = live.app.state.runtime.settings
    report = report_for(live.db, settings, last_full_week(datetime.now(UTC), settings.report_tz))
    html, text = render(report)
    assert PAYLOAD not in html and "<script" not in html.lower() and "<img" not in html.lower()
    assert ESCAPED in html
    assert PAYLOAD in text  # the plain-text part shows the name as it is
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.set_content(html)
    found = page.evaluate(INJECTED)
    assert found["images"] == 0 and found["scripts"] == 0 and found["html"]
    assert dialogs == []
