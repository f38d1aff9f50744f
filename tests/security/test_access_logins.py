"""Logins, sessions, throttling and open mode, over real HTTP, each test on a fresh server:
their state (sessions, failed logins, profiles) must not leak from one into another."""

from __future__ import annotations

import base64
import hashlib
import secrets

import dash
import httpx
import pytest
from pydantic import SecretStr

from app.config import Settings
from tests.support import http
from tests.support.dash import PAGES, create_token_payload, dash_post, save_payload
from tests.support.database import copy_database
from tests.support.net import free_port
from tests.support.records import batch
from tests.support.server import PASSWORD, serve


def _try(c: httpx.Client, name: str, password: str) -> httpx.Response:
    """One login through the real form, as a new visitor (every client is 127.0.0.1)."""
    c.cookies.clear()
    c.get("/login")
    form = {"csrf": c.cookies["tokenshape_login"], "username": name, "password": password}
    return c.post("/login", data=form)


def _legacy_scrypt(password: str) -> str:
    """A hash in the format stored before Argon2id: `scrypt$N$r$p$salt$hash`."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=2**15, r=8, p=1, maxmem=64 << 20)
    b64 = base64.b64encode
    return f"scrypt${2**15}$8$1${b64(salt).decode()}${b64(digest).decode()}"


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


def test_a_success_clears_only_its_own_accounts_failures(secured):
    """4 wrong passwords for alice, then victor's right one, again and again: alice's
    failures add up all the same (victor's success cleared them for the whole address)."""
    secured.user("alice", "viewer")
    secured.user("victor", "viewer")
    with http.client(base_url=secured.url) as c:
        statuses = []
        for _ in range(2):
            statuses += [_try(c, "alice", f"wrong {k}").status_code for k in range(4)]
            assert _try(c, "victor", PASSWORD).status_code == 303
        assert statuses[:5] == [401] * 5 and statuses[5:] == [429] * 3, statuses
        refused = _try(c, "alice", PASSWORD)  # even the right password waits now
        assert refused.status_code == 429 and "this user name" in refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 300
        assert _try(c, "victor", PASSWORD).status_code == 303


def test_a_user_logs_in_from_the_address_an_attacker_uses(secured):
    """Behind one proxy everyone shares an address: 5 of an attacker's failures against one
    account lock that account only; unknown names are throttled alike (nothing revealed)."""
    with http.client(base_url=secured.url) as attacker, http.client(base_url=secured.url) as victor:
        for name in ("ada", "nobody"):
            answers = [_try(attacker, name, f"guess {k}") for k in range(6)]
            assert [a.status_code for a in answers] == [401] * 5 + [429], name
            assert "Wrong user name or password." in answers[0].text
            assert "Retry-After" in answers[5].headers
            assert _try(victor, "vic", PASSWORD).status_code == 303, name


def test_a_locked_account_still_logs_in_from_a_browser_it_used_before(secured):
    """OWASP's device cookies: an attacker's failures from elsewhere lock `ada` for new
    clients, not for the browser ada logged in from before (it holds a signed device cookie
    for her name); another name's device cookie, or a forged one, is no way in."""
    with http.client(base_url=secured.url) as browser:
        assert _try(browser, "ada", PASSWORD).status_code == 303
        device = browser.cookies["tokenshape_device"]
    with http.client(base_url=secured.url) as c:
        set_device = next(
            h
            for h in _try(c, "vic", PASSWORD).headers.get_list("set-cookie")
            if h.startswith("tokenshape_device=")
        )
        vics = c.cookies["tokenshape_device"]
    assert "HttpOnly" in set_device and "SameSite=lax" in set_device
    assert int(set_device.split("Max-Age=")[1].split(";")[0]) >= 180 * 24 * 3600
    with http.client(base_url=secured.url) as attacker:
        answers = [_try(attacker, "ada", f"guess {k}").status_code for k in range(6)]
    assert answers == [401] * 5 + [429]
    with http.client(base_url=secured.url) as fresh:
        refused = _try(fresh, "ada", PASSWORD)
    assert refused.status_code == 429 and "this user name" in refused.text
    for other in (vics, device[:-2] + "xx"):
        with http.client(base_url=secured.url, cookies={"tokenshape_device": other}) as c:
            c.get("/login")
            form = {"csrf": c.cookies["tokenshape_login"], "username": "ada", "password": PASSWORD}
            assert c.post("/login", data=form).status_code == 429
    with http.client(base_url=secured.url, cookies={"tokenshape_device": device}) as again:
        again.get("/login")
        form = {"csrf": again.cookies["tokenshape_login"], "username": "ada", "password": PASSWORD}
        ok = again.post("/login", data=form)
        assert ok.status_code == 303, ok.text
        assert again.get("/shapes").status_code == 200
        # The same device, kept.
        assert f"tokenshape_device={device};" in ok.headers.get_list("set-cookie")[-1]


def test_a_spray_across_many_accounts_is_stopped_per_client(secured):
    """Under each account's allowance, 20 failures from one address stop that address; an
    X-Forwarded-For from a peer that is not a trusted proxy changes nothing."""
    with http.client(base_url=secured.url) as c:
        statuses = []
        for k in range(20):
            c.headers["X-Forwarded-For"] = f"198.51.100.{k}"
            statuses.append(_try(c, f"user{k}", "wrong password").status_code)
        assert statuses == [401] * 20
        c.headers["X-Forwarded-For"] = "198.51.100.99"
        refused = _try(c, "someone-new", "wrong password")
        assert refused.status_code == 429 and "this address" in refused.text
        assert 1 <= int(refused.headers["Retry-After"]) <= 300


def test_a_trusted_proxys_clients_are_counted_apart(tmp_path, secured_template):
    """Behind a trusted proxy each forwarded address has its own allowance; without one,
    a forwarded address is not believed (every guess counts against the peer)."""
    db = copy_database(secured_template, tmp_path / "p.duckdb")
    settings = Settings(
        db=db, port=free_port(), auth="on", trusted_proxies="127.0.0.1", _env_file=None
    )
    for live in serve(settings):
        with http.client(base_url=live.url) as c:
            sprayer = {"X-Forwarded-For": "203.0.113.9"}
            for k in range(20):
                c.headers.update(sprayer)
                assert _try(c, f"user{k}", "wrong password").status_code == 401
            assert _try(c, "someone-new", "wrong password").status_code == 429
            c.headers["X-Forwarded-For"] = "203.0.113.10"  # another user behind the proxy
            assert _try(c, "vic", PASSWORD).status_code == 303


def test_an_old_scrypt_hash_logs_in_and_becomes_argon2id(secured):
    secured.user("olga", "viewer")
    old = _legacy_scrypt("old scrypt password")
    secured.db.cursor().execute("UPDATE users SET password_hash = ? WHERE name = 'olga'", [old])
    with http.client(base_url=secured.url) as c:
        assert _try(c, "olga", "not the password").status_code == 401
        assert secured.scalar("SELECT password_hash FROM users WHERE name = 'olga'") == old
        assert _try(c, "olga", "old scrypt password").status_code == 303
    stored = secured.scalar("SELECT password_hash FROM users WHERE name = 'olga'")
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$"), stored
    with http.client(base_url=secured.url) as c:
        assert _try(c, "olga", "not the password").status_code == 401
        assert _try(c, "olga", "old scrypt password").status_code == 303
    assert secured.scalar("SELECT password_hash FROM users WHERE name = 'olga'") == stored


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
