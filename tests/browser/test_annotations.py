"""Notes and undo in a real headless Chromium: a note added on /notes is a marker (a dotted line
with its label and hover) on the Latency page's time chart, its text escaped; a deleted
profile comes back with the Rightsizing page's Undo, and both changes are listed on /notes.
One server over 5,000 demo requests in the 14 days before 2026-11-23, in open mode."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.dashboard.speedups import prefetched
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER

NOTE = "deployed vLLM 0.33 <b>&</b>"
MARKERS = """(sel) => {
    const gd = document.querySelector(sel + ' .js-plotly-plot');
    if (!gd || !gd.layout) return null;
    const lines = (gd.layout.shapes || []).filter(s => s.name === 'tokenshape-note');
    const labels = (gd.layout.annotations || []).filter(a => a.name === 'tokenshape-note');
    return lines.length ? {lines: lines.map(s => s.x0), labels: labels.map(a => a.text),
                           hover: labels.map(a => a.hovertext)} : null;
}"""


@pytest.fixture(scope="module")
def demo_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over its own copy of 5,000 demo requests (the tests add notes, delete a profile)."""
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("notes-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    prefetched.reset()


def test_a_note_added_on_notes_is_marked_on_the_latency_chart(demo_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(demo_live.url + "/notes?window=all", wait_until="load")
    page.locator("#notes-text").wait_for(timeout=30_000)
    # A bad time is named, and nothing is stored.
    page.fill("#notes-text", NOTE)
    page.fill("#notes-at", "next tuesday")
    page.click("#notes-add")
    page.locator("#notes-result").filter(has_text="is not a time").wait_for(timeout=10_000)
    assert demo_live.scalar("SELECT count(*) FROM annotations") == 0
    page.fill("#notes-at", "2026-11-18T12:00")
    page.click("#notes-add")
    page.wait_for_url("**added=**", timeout=30_000)
    table = page.locator("#notes-list")
    table.filter(has_text="deployed vLLM").wait_for(timeout=30_000)
    row = table.locator("tr", has_text="deployed vLLM").inner_text()
    assert NOTE in row and "open mode" in row and "2026-11-18 12:00" in row  # escaped, as typed
    screenshot(page, tmp_path, "notes-page")
    # The Latency page's TTFT trend: the note's dotted line at its time, label and hover.
    page.goto(demo_live.url + "/latency?window=all", wait_until="load")
    page.wait_for_selector("#latency-ttft-trend .scatterlayer .trace", timeout=60_000)
    page.wait_for_function(f"({MARKERS})('#latency-ttft-trend') !== null", timeout=30_000)
    drawn = page.evaluate(f"({MARKERS})('#latency-ttft-trend')")
    assert drawn["lines"] == ["2026-11-18 12:00:00"]
    assert drawn["labels"] == ["deployed vLLM 0.33 &lt;b&gt;&amp;&lt;/b&gt;"]  # for plotly
    assert "open mode · 2026-11-18 12:00 UTC · note" in drawn["hover"][0]
    label = page.locator("#latency-ttft-trend .annotation-text").first
    assert label.text_content().startswith("deployed vLLM 0.33 <b>&")
    label.hover()
    page.wait_for_selector("#latency-ttft-trend .hovertext", timeout=10_000)
    hover = page.locator("#latency-ttft-trend .hovertext").text_content()
    assert "open mode" in hover and NOTE in hover
    # The markers are drawn once: afterplot after our own relayout does not draw again.
    page.wait_for_timeout(1000)
    again = page.evaluate(f"({MARKERS})('#latency-ttft-trend')")
    assert again["lines"] == drawn["lines"]
    screenshot(page, tmp_path, "latency-marker")
    assert errors == []


def test_a_deleted_profile_comes_back_with_undo(demo_live, browser, tmp_path):
    stored = demo_live.scalar("SELECT profile FROM engines WHERE name = 'chat-8b'")
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(demo_live.url + "/rightsizing?engine=chat-8b&window=30d", wait_until="load")
    page.locator("#rightsizing-delete button").wait_for(timeout=60_000)
    page.once("dialog", lambda d: d.accept())
    page.click("#rightsizing-delete button")
    page.wait_for_url("**deleted=chat-8b**")
    deleted = page.locator("#rightsizing-deleted")
    deleted.wait_for(timeout=30_000)
    assert "Profile of chat-8b deleted." in deleted.inner_text()
    assert demo_live.scalar("SELECT count(*) FROM engines WHERE name = 'chat-8b'") == 0
    screenshot(page, tmp_path, "deleted-undo")
    page.click("#rightsizing-undo")
    page.wait_for_url("**restored=**", timeout=30_000)
    page.locator("#rightsizing-restored").wait_for(timeout=60_000)
    assert demo_live.scalar("SELECT profile FROM engines WHERE name = 'chat-8b'") == stored
    page.locator("#rightsizing-verdict").wait_for(timeout=60_000)
    # Both changes are history, listed (newest first) on /notes by the open-mode admin.
    page.goto(demo_live.url + "/notes?window=24h", wait_until="load")
    table = page.locator("#notes-list")
    table.filter(has_text="restored the profile").wait_for(timeout=30_000)
    text = table.inner_text()
    assert "chat-8b: deleted (was" in text and text.index("restored") < text.index("deleted (")
    screenshot(page, tmp_path, "notes-history")
    assert errors == []
