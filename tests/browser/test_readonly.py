"""Who may change what, as the browser shows it, in a real headless Chromium: open mode's Admin
page says why everyone is an admin and exactly which actions are open, and its native selects
drive the token and user actions; a viewer's Rightsizing editor and Admin page are disabled,
greyed and say why, with whom to ask. Two servers over 5,000 demo requests: open mode on
loopback, and logins on (ada, admin; vic, viewer)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from app.dashboard.speedups import prefetched
from tests.support.axe import axe_script, serious_violations
from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.database import copy_database
from tests.support.server import PASSWORD, LiveServer, serve, server_settings

pytestmark = BROWSER

EDITOR = "/rightsizing?engine=chat-8b&window=30d"
# Every field and button of a container, as (tag, disabled, cursor, opacity); a Dash dropdown
# is its button (its input is a hidden focus target, never clickable).
CONTROLS = """sel => [...document.querySelectorAll(sel + ' input, ' + sel + ' select, ' + sel +
    ' textarea, ' + sel + ' button')].filter(e => e.type !== 'hidden' &&
    !e.classList.contains('dash-dropdown-focus-target')).map(e =>
    [e.tagName.toLowerCase() + (e.id ? '#' + e.id : ''), e.disabled, getComputedStyle(e).cursor,
     getComputedStyle(e).opacity])"""


@pytest.fixture(autouse=True)
def _no_started_builds() -> None:
    prefetched.reset()


@pytest.fixture(scope="module")
def open_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """Open mode: loopback bind, TOKENSHAPE_AUTH=auto, no users."""
    db = copy_database(demo_template(requests=5000, days=14), tmp_path_factory.mktemp("ro") / "o")
    yield from serve(server_settings(db), wait=False)


@pytest.fixture(scope="module")
def secured_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """Logins on, with ada (admin) and vic (viewer)."""
    db = copy_database(demo_template(requests=5000, days=14), tmp_path_factory.mktemp("ro") / "s")
    for live in serve(server_settings(db, auth="on"), wait=False):
        live.user("ada", "admin")
        live.user("vic", "viewer")
        yield live


def _log_in(page, live: LiveServer, name: str, path: str) -> None:
    page.goto(live.url + path)
    page.wait_for_url("**/login?next=**")
    page.fill("input[name=username]", name)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**" + path.split("?")[0] + "**")


def test_open_mode_says_why_and_which_actions_are_open(open_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(open_live.url + "/admin", wait_until="load")
    card = page.locator("#admin-open-mode")
    card.wait_for(timeout=30_000)
    text = card.inner_text()
    host = f"127.0.0.1:{open_live.port}"
    assert (
        "Open mode: logins are off because TOKENSHAPE_AUTH is auto and the server listens on "
        "127.0.0.1 only, so everyone who can reach it from this machine" in text
    )
    assert f"http://{host}/" in text and "is an admin. No users exist yet." in text
    for action in (
        "read every page and download its CSV",
        "change and delete engine profiles (Rightsizing)",
        "create, rotate and revoke API tokens; add and remove users (this page)",
        "/metrics",
        "an ingest token",
        "an admin token",
        "TOKENSHAPE_AUTH=on",
    ):
        assert action in text, action
    screenshot(page, tmp_path, "readonly-open-mode")
    # What the card says is open is open, and what it says needs a token does.
    with open_live.client() as anyone:
        assert anyone.get("/api/engines").status_code == 200
        assert anyone.get("/metrics").status_code == 200
        assert anyone.get("/api/tokens").status_code == 401
        assert anyone.put("/api/engines/x", json={}).status_code == 401
        assert anyone.post("/v1/requests", json=[]).status_code == 401
    assert errors == []


def test_the_native_selects_drive_the_token_and_user_actions(open_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    page.goto(open_live.url + "/admin", wait_until="load")
    page.locator("#admin-scope").wait_for(timeout=30_000)
    assert page.evaluate("() => document.getElementById('admin-scope').tagName") == "SELECT"
    result = page.locator("#admin-result")
    page.fill("#admin-gateway", "gw-read")
    page.select_option("#admin-scope", "read")
    page.click("#admin-create")
    result.filter(has_text="Copy it now").wait_for(timeout=30_000)
    assert "for gateway 'gw-read' (read)" in result.inner_text()
    # A second choice after the first: the select is not pinned to what the click read.
    page.fill("#admin-gateway", "gw-admin")
    page.select_option("#admin-scope", "admin")
    page.click("#admin-create")
    result.filter(has_text="gw-admin").wait_for(timeout=30_000)
    assert "(admin)" in result.inner_text()
    # The new tokens are options at once; rotating the chosen one names it.
    option = page.locator("#admin-token-id option").filter(has_text="gw-read")
    page.select_option("#admin-token-id", option.get_attribute("value"))
    page.click("#admin-rotate")
    result.filter(has_text="Rotated").wait_for(timeout=30_000)
    assert open_live.scalar(
        "SELECT count(*) FROM tokens WHERE gateway = 'gw-read' AND revoked_at IS NOT NULL"
    )
    page.fill("#admin-user-name", "olga")
    page.select_option("#admin-user-role", "admin")
    page.fill("#admin-user-password", "a long enough password")
    page.click("#admin-user-add")
    result.filter(has_text="Added olga").wait_for(timeout=30_000)
    assert "as admin" in result.inner_text()
    screenshot(page, tmp_path, "readonly-admin-selects")
    # Removed again, so the open-mode test, in whatever order, finds no user.
    page.once("dialog", lambda d: d.accept())
    page.click("#admin-user-remove button")
    result.filter(has_text="Removed olga").wait_for(timeout=30_000)
    assert errors == []


def test_a_viewer_sees_the_editor_read_only(secured_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    _log_in(page, secured_live, "vic", EDITOR)
    page.locator("#rightsizing-editor").wait_for(timeout=30_000)
    note = page.locator("#rightsizing-read-only").inner_text()
    assert note.startswith("Read-only: you are a viewer (vic).")
    controls = page.evaluate(CONTROLS, "#rightsizing-editor")
    assert len(controls) > 10, controls
    live = [c for c in controls if not c[1] or c[2] != "not-allowed" or float(c[3]) > 0.6]
    assert live == [], live
    # Dash's dropdowns (the model, the GPU...): disabled too.
    assert page.locator("#rightsizing-editor button.dash-dropdown:disabled").count() >= 2
    assert page.locator("#rightsizing-saved").inner_text() == ""
    editor = page.locator("#rightsizing-editor")
    for folder in (str(tmp_path), os.environ.get("TOKENSHAPE_SCREENSHOTS")):
        if folder:
            editor.screenshot(path=os.path.join(folder, "readonly-editor.png"))
    screenshot(page, tmp_path, "readonly-editor-page")
    assert errors == []


def test_an_admin_sees_the_editor_and_admin_page_live(secured_live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    _log_in(page, secured_live, "ada", EDITOR)
    page.locator("#rightsizing-editor").wait_for(timeout=30_000)
    assert page.locator("#rightsizing-read-only").count() == 0
    assert [c for c in page.evaluate(CONTROLS, "#rightsizing-editor") if c[1]] == []
    page.goto(secured_live.url + "/admin")
    page.locator("#admin-tokens").wait_for(timeout=30_000)
    assert page.locator("#admin-open-mode, #admin-access, .readonly-note").count() == 0
    assert [c for c in page.evaluate(CONTROLS, "main .admin-form") if c[1]] == []


def _go(page, path: str) -> None:
    """Move within the app as its links do (Dash's router, no page load)."""
    page.evaluate(
        "p => { history.pushState({}, '', p); "
        "window.dispatchEvent(new CustomEvent('_dashprivate_pushstate')); }",
        path,
    )


def test_a_viewer_on_admin_sees_why_and_disabled_forms(secured_live, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    _log_in(page, secured_live, "vic", "/shapes")
    page.locator("main h1").filter(has_text="Shapes").wait_for(timeout=30_000)
    _go(page, "/admin")
    access = page.locator("#admin-access")
    access.wait_for(timeout=30_000)
    assert page.locator("main h1").inner_text() == "Admin"
    text = access.inner_text()
    assert "Admin is for admins; you are signed in as vic (viewer)." in text
    assert "read every page" in text and "Whom to ask: an admin (ada)" in text
    controls = page.evaluate(CONTROLS, "main .admin-form")
    assert len(controls) == 11, controls
    live = [c for c in controls if not c[1] or c[2] != "not-allowed"]
    assert live == [], live
    assert (
        page.locator(".admin-form .readonly-note").all_inner_texts()
        == ["Read-only: you are a viewer; ask an admin to make these changes."] * 2
    )
    # Nothing of the tokens or users leaks to a viewer.
    assert page.locator("#admin-tokens, #admin-users").count() == 0
    assert "gw-" not in page.locator("main").inner_text()
    screenshot(page, tmp_path, "readonly-admin-viewer")
    assert _serious_axe_violations(page) == []
    assert errors == []


def _serious_axe_violations(page) -> list[str]:
    """axe-core's serious and critical WCAG A/AA findings on the page (none run without axe:
    tests/support/axe.py says how to install it, and fails in CI without it)."""
    return serious_violations(page, axe_script())


def test_a_viewer_loading_admin_gets_the_page_with_403(secured_live, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    _log_in(page, secured_live, "vic", "/shapes")
    answer = page.goto(secured_live.url + "/admin")
    assert answer is not None and answer.status == 403
    page.locator("#admin-access").wait_for(timeout=10_000)
