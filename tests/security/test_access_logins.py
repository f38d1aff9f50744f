"""Logins, sessions, throttling and open mode, over real HTTP, each test on a fresh server:
their state (sessions, failed logins, profiles) must not leak from one into another."""

from __future__ import annotations

import dash
import pytest
from pydantic import SecretStr

from app.config import Settings
from tests.support import http
from tests.support.dash import PAGES, create_token_payload, dash_post, save_payload
from tests.support.database import copy_database
from tests.support.net import free_port
from tests.support.records import batch
from tests.support.server import serve


def test_an_admin_changes_profiles_and_tokens_only_with_the_csrf_token(secured):
    with secured.login("ada") as admin:
        admin.get("/rightsizing")
        saved = admin.post("/_dash-update-component", json=save_payload("e1"))
        assert saved.json()["response"]["rightsizing-saved"]["children"] == "saved"
        made = dash_post(admin, create_token_payload("gw-new"))
        assert "Copy it now" in made.text and "tks_" in made.text
        # The same request from another site carries the cookie but not the CSRF header.
        del admin.headers["X-CSRFToken"]
        forged = admin.post("/_dash-update-component", json=save_payload("e2"))
        assert forged.status_code == 403 and "CSRF" in forged.json()["detail"]
    assert secured.scalar("SELECT count(*) FROM engines") == 1
    assert secured.scalar("SELECT count(*) FROM tokens WHERE gateway = 'gw-new'") == 1


def test_login_cookies_logout_and_wrong_passwords(secured):
    with http.client(base_url=secured.url) as c:
        form = c.get("/login?next=/shapes")
        nonce = c.cookies["tokenshape_login"]
        wrong = c.post("/login", data={"csrf": nonce, "username": "ada", "password": "nope" * 3})
        assert wrong.status_code == 401 and "Wrong user name or password" in wrong.text
        nonce = c.cookies["tokenshape_login"]
        forged = c.post(
            "/login",
            data={"csrf": "other", "username": "ada", "password": "correct horse battery"},
        )
        assert forged.status_code == 403
        ok = c.post(
            "/login",
            data={
                "csrf": c.cookies["tokenshape_login"],
                "username": "ada",
                "password": "correct horse battery",
                "next": "/shapes",
            },
        )
        assert ok.status_code == 303 and ok.headers["location"] == "/shapes"
        cookies = ok.headers.get_list("set-cookie")
        session = next(h for h in cookies if h.startswith("tokenshape_session="))
        assert "HttpOnly" in session and "SameSite=lax" in session and "Secure" not in session
        assert secured.scalar("SELECT count(*) FROM sessions") == 1
        assert "Shapes" in c.get("/shapes").text or c.get("/shapes").status_code == 200
        assert form.status_code == 200
        stale = c.cookies["tokenshape_session"]
        c.headers["X-CSRFToken"] = c.cookies["_csrf_token"]
        out = c.post("/logout")
        assert out.status_code == 303 and out.headers["location"].startswith("/login")
    # The old cookie no longer opens anything, at once.
    with http.client(base_url=secured.url, cookies={"tokenshape_session": stale}) as old:
        assert old.get("/shapes").status_code == 303
    assert secured.scalar("SELECT count(*) FROM sessions") == 0


def test_repeated_wrong_passwords_are_slowed_down(secured):
    with http.client(base_url=secured.url) as c:
        statuses = []
        for _ in range(6):
            c.get("/login")
            statuses.append(
                c.post(
                    "/login",
                    data={
                        "csrf": c.cookies["tokenshape_login"],
                        "username": "ada",
                        "password": "w",
                    },
                ).status_code
            )
        assert statuses[:5] == [401] * 5 and statuses[5] == 429


def test_open_mode_says_so_on_every_page(live):
    with live.client() as c:
        for page in PAGES:
            assert c.get(page).status_code == 200, page
        layout = c.get("/_dash-layout").text
        assert "Open mode: no login is required" in layout


def test_auth_is_on_by_default_off_loopback():
    assert Settings(host="0.0.0.0", _env_file=None).auth_enabled
    assert not Settings(host="127.0.0.1", _env_file=None).auth_enabled
    assert Settings(host="127.0.0.1", auth="on", _env_file=None).auth_enabled
    with pytest.raises(ValueError, match="use on, off or auto"):
        Settings(auth="maybe", _env_file=None)


def test_a_shared_bind_without_logins_is_read_only(tmp_path, demo_template):
    """TOKENSHAPE_AUTH=auto on 0.0.0.0 means logins; forced off there, viewers only."""
    settings = Settings(
        db=tmp_path / "r.duckdb", host="0.0.0.0", auth="off", port=free_port(), _env_file=None
    )
    copy_database(demo_template(requests=5000, days=14), settings.db)
    assert dash.page_registry is not None
    for live in serve(settings):
        # auth=off outright on a shared bind: the operator chose it, so everyone is admin.
        with live.client() as c:
            c.get("/rightsizing")
            answer = c.post("/_dash-update-component", json=save_payload("chat-8b"))
            assert answer.json()["response"]["rightsizing-saved"]["children"] == "saved"


def test_open_mode_answers_only_to_this_machine(live):
    """Open mode on a loopback bind: a proxy or a rebound DNS name must not make its
    visitors admins; ingest keeps its own tokens either way."""
    with live.client() as c:
        assert c.get("/rightsizing").status_code == 200
        assert c.get("/", headers={"Host": "localhost:8050"}).status_code == 200
        for headers in (
            {"Host": "rebind.attacker.example"},
            {"Host": "127.attacker.example"},
            {"X-Forwarded-For": "203.0.113.9"},
            {"Forwarded": "for=203.0.113.9"},
        ):
            answer = c.get("/_dash-layout", headers=headers)
            assert answer.status_code == 403, headers
            assert "TOKENSHAPE_AUTH=on" in answer.json()["detail"]
    with live.client(live.token()) as shipper:
        sent = shipper.post("/v1/requests", json=batch(2), headers={"X-Forwarded-For": "10.1.2.3"})
        assert sent.status_code == 200


def test_parallel_wrong_passwords_are_throttled_too(secured):
    from concurrent.futures import ThreadPoolExecutor

    with http.client(base_url=secured.url) as c:
        c.get("/login")
        nonce = c.cookies["tokenshape_login"]

    def guess(k: int) -> int:
        with http.client(base_url=secured.url, cookies={"tokenshape_login": nonce}) as g:
            form = {"csrf": nonce, "username": "ada", "password": f"guess {k}"}
            return g.post("/login", data=form).status_code

    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(guess, range(24)))
    assert codes.count(401) <= 5 and codes.count(429) >= 19, codes


def test_the_first_start_can_create_the_admin_from_a_setting(tmp_path, db_template):
    settings = Settings(
        db=copy_database(db_template, tmp_path / "f.duckdb"),
        port=free_port(),
        auth="on",
        admin_password="first start secret",
        _env_file=None,
    )
    for live in serve(settings):
        with live.login("admin", "first start secret") as admin:
            assert admin.get("/admin").status_code == 200
    # A later start with another password leaves the existing users alone.
    again = settings.model_copy(update={"admin_password": SecretStr("another password!")})
    for live in serve(again):
        assert live.scalar("SELECT count(*) FROM users") == 1
        with live.login("admin", "first start secret") as admin:
            assert admin.get("/admin").status_code == 200
