"""Who may read and change what, over real HTTP, on one server with logins on that the module
shares: routes, roles, callbacks, tokens, cookies. Its tests only log in successfully (failed
logins are throttled per account and per client) and change no state another of them reads."""

from __future__ import annotations

import re
import time

import httpx
import pytest

from app.config import Settings
from app.dashboard.pages.admin import ADMINS_ONLY
from app.dashboard.pages.rightsizing import READ_ONLY
from tests.support import http
from tests.support.dash import (
    PAGES,
    api_get_routes,
    chosen,
    create_token_payload,
    dash_post,
    save_payload,
)
from tests.support.database import copy_database
from tests.support.net import free_port
from tests.support.records import batch
from tests.support.server import LiveServer, serve


@pytest.fixture(scope="module")
def secured(module_secured: LiveServer) -> LiveServer:
    """One server with logins on (users ada, admin, and vic, viewer) for the module."""
    return module_secured


def test_every_page_without_a_login_redirects_to_the_login_form(secured):
    with http.client(base_url=secured.url) as anon:
        for page in PAGES:
            answer = anon.get(page + "?window=7d")
            assert answer.status_code == 303, page
            assert answer.headers["location"].startswith("/login?next=%2F"), page
        assert anon.get("/_dash-layout").status_code == 401
        assert anon.post("/_dash-update-component", json=save_payload("x")).status_code == 401
        form = anon.get("/login")
        assert form.status_code == 200 and 'type="password"' in form.text


def test_every_route_and_method_without_credentials_is_refused(secured):
    with http.client(base_url=secured.url) as anon:
        schema = anon.get("/openapi.json").json()
        for path, ops in schema["paths"].items():
            if path == "/api/health":
                continue
            concrete = path.replace("{name}", "chat-8b").replace("{token_id}", "x")
            for method in ops:
                answer = anon.request(method.upper(), concrete, json={})
                assert answer.status_code == 401, (method, path, answer.status_code)


def test_the_callbacks_refuse_a_viewer_themselves_too(secured, monkeypatch):
    """Depth: with the gate's admin list emptied, the callbacks still refuse a viewer."""
    gate = secured.app.middleware_stack
    while gate is not None and type(gate).__name__ != "AuthGate":
        gate = getattr(gate, "app", None)
    assert gate is not None
    monkeypatch.setattr(gate, "admin_outputs", frozenset())
    with secured.login("vic") as viewer:
        viewer.get("/rightsizing")
        saved = viewer.post("/_dash-update-component", json=save_payload("e1"))
        assert saved.json()["response"]["rightsizing-saved"]["children"] == READ_ONLY
        made = dash_post(viewer, create_token_payload("sneaky"))
        assert ADMINS_ONLY in made.text and "tks_" not in made.text
    assert secured.scalar("SELECT count(*) FROM tokens WHERE gateway = 'sneaky'") == 0


def test_every_api_route_needs_a_read_token_or_a_login(secured):
    with http.client(base_url=secured.url) as anon:
        routes = api_get_routes(anon)
        assert len(routes) >= 10
        for path in routes + ["/metrics"]:
            answer = anon.get(path)
            assert answer.status_code == 401, path
            assert "read" in answer.json()["detail"]
            assert answer.headers["www-authenticate"].startswith("Bearer")
        assert anon.get("/api/health").status_code == 200  # for load balancers, like Grafana
    ingest_only = secured.token("ingest")
    read = secured.token("read")
    with secured.client(ingest_only) as c:
        assert c.get("/api/quantiles").status_code == 403
    with secured.client(read) as c:
        for path in ("/api/quantiles", "/api/heatmap", "/api/engines", "/metrics"):
            assert c.get(path).status_code == 200, path
    with secured.login("vic") as viewer:
        assert viewer.get("/api/quantiles").status_code == 200


def test_a_token_of_the_wrong_scope_is_told_what_the_route_needs(secured):
    tokens = {scope: secured.token(scope) for scope in ("ingest", "read")}
    cases = [
        ("ingest", "GET", "/api/tokens", "admin"),
        ("ingest", "POST", "/api/admin/backup", "admin"),
        ("ingest", "DELETE", "/api/engines/e1", "admin"),
        ("read", "GET", "/api/users", "admin"),
        ("read", "PUT", "/api/engines/e1", "admin"),
        ("ingest", "GET", "/api/quantiles", "read"),
        ("ingest", "GET", "/metrics", "read"),
        ("read", "POST", "/v1/requests", "ingest"),
    ]
    for held, method, path, needed in cases:
        with secured.client(tokens[held]) as c:
            answer = c.request(method, path, json={"model": "m", "gpu": "H100"})
        article = "an" if needed != "read" else "a"
        expected = f"this route needs {article} {needed} token; yours has scope {held}"
        assert answer.status_code == 403, (held, method, path, answer.text)
        assert answer.json()["detail"].startswith(expected), (held, method, path, answer.text)


def test_a_viewer_is_refused_every_admin_action(secured):
    read = secured.token("read")
    admin_calls = [
        ("PUT", "/api/engines/e1", {"model": "llama-3.1-8b", "gpu": "H100"}),
        ("DELETE", "/api/engines/e1", None),
        ("GET", "/api/tokens", None),
        ("POST", "/api/tokens", {"gateway": "g", "scope": "ingest"}),
        ("POST", "/api/tokens/abc/rotate", None),
        ("DELETE", "/api/tokens/abc", None),
        ("GET", "/api/users", None),
        ("POST", "/api/users", {"name": "eve", "role": "admin", "password": "x" * 12}),
        ("DELETE", "/api/users/ada", None),
        ("POST", "/api/admin/backup", None),
    ]
    with secured.client(read) as c:
        for method, path, body in admin_calls:
            answer = c.request(method, path, json=body)
            assert answer.status_code == 403, (method, path, answer.text)
            assert "admin" in answer.json()["detail"]
    with secured.login("vic") as viewer:
        viewer.get("/rightsizing")
        saved = viewer.post("/_dash-update-component", json=save_payload("e1"))
        assert saved.status_code == 403 and "only admins" in saved.json()["detail"]
        for store, action in (
            ("admin-scope-chosen", "admin-create"),
            ("admin-token-chosen", "admin-rotate"),
            ("admin-token-chosen", "admin-revoke"),
            ("admin-role-chosen", "admin-user-add"),
        ):
            payload = create_token_payload("sneaky")
            payload["inputs"] = [chosen(store, "admin", action)]
            made = dash_post(viewer, payload)
            assert made.status_code == 403, (action, made.text)
        assert viewer.get("/admin").status_code == 403
        layout = viewer.get("/_dash-layout").text
        assert '"href":"/admin"' not in layout.replace(" ", "")
        # An ordinary callback still works for a viewer (the gate hands the body on intact).
        viewer.get("/shapes")
        assert viewer.get("/shapes").status_code == 200
    assert secured.scalar("SELECT count(*) FROM engines") == 0
    assert secured.scalar("SELECT count(*) FROM tokens WHERE gateway = 'sneaky'") == 0


@pytest.fixture
def behind_proxy(tmp_path, secured_template):
    """`secured` behind a proxy on this machine: X-Forwarded-Proto counts only from one."""
    db = copy_database(secured_template, tmp_path / "p.duckdb")
    settings = Settings(
        db=db, port=free_port(), auth="on", trusted_proxies="127.0.0.1", _env_file=None
    )
    yield from serve(settings, wait=False)


def test_cookies_are_secure_behind_https_and_redirects_stay_on_site(behind_proxy):
    with http.client(base_url=behind_proxy.url, headers={"X-Forwarded-Proto": "https"}) as c:
        page = c.get("/login")
        # The cookie is Secure, so httpx keeps it from this plain-HTTP hop: send it by hand.
        nonce = re.search(r'name="csrf" value="([^"]+)"', page.text).group(1)
        assert "Secure" in page.headers["set-cookie"]
        ok = c.post(
            "/login",
            headers={"Cookie": f"tokenshape_login={nonce}"},
            data={
                "csrf": nonce,
                "username": "vic",
                "password": "correct horse battery",
                "next": "//evil.example/steal",
            },
        )
        assert ok.headers["location"] == "/"
        assert all("Secure" in h for h in ok.headers.get_list("set-cookie"))


def test_tokens_list_rotate_revoke_and_last_use(secured):
    admin = secured.token("admin")
    with secured.client(admin) as c:
        made = c.post("/api/tokens", json={"gateway": "gw-a", "scope": "ingest"})
        assert made.status_code == 201
        plain, info = made.json()["token"], made.json()["info"]
        assert plain.startswith("tks_") and info["display"] == plain[:12] + "…"
        listed = c.get("/api/tokens").json()
        assert all("token" not in t and "hash" not in str(t) for t in listed)
        assert plain not in c.get("/api/tokens").text
    with secured.client(plain) as shipper:
        assert shipper.post("/v1/requests", json=batch(3)).status_code == 200
    used = secured.scalar("SELECT last_used_at FROM tokens WHERE id = ?", [info["id"]])
    for _ in range(100):  # written off the event loop; give it a moment
        if used is not None:
            break
        time.sleep(0.05)
        used = secured.scalar("SELECT last_used_at FROM tokens WHERE id = ?", [info["id"]])
    assert used is not None
    with secured.client(admin) as c:
        rotated = c.post(f"/api/tokens/{info['id']}/rotate").json()
    with secured.client(plain) as old, secured.client(rotated["token"]) as new:
        assert old.post("/v1/requests", json=batch(1, "x")).status_code == 401
        assert new.post("/v1/requests", json=batch(1, "y")).status_code == 200
        assert rotated["info"]["gateway"] == "gw-a"
        with secured.client(admin) as c:
            assert c.delete(f"/api/tokens/{rotated['info']['id']}").status_code == 204
        # Revoked: refused with the very next request, not after a cache expires.
        assert new.post("/v1/requests", json=batch(1, "z")).status_code == 401


def test_websockets_are_refused(secured):
    import socket

    port = int(secured.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(
            b"GET /_dash-ws-callback HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
            b"Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
            b"Sec-WebSocket-Version: 13\r\n\r\n"
        )
        status = s.recv(200).split(b"\r\n", 1)[0]
    assert b" 101 " not in status and b" 403 " in status


def test_a_cross_site_logout_without_cookies_changes_nothing(secured):
    with secured.login("vic") as viewer:
        with http.client(base_url=secured.url) as other_site:
            answer = other_site.post("/logout")
            assert answer.status_code == 303
            assert "set-cookie" not in answer.headers
        assert viewer.get("/shapes").status_code == 200
        del viewer.headers["X-CSRFToken"]
        assert viewer.post("/logout").status_code == 403  # a session, but no CSRF token
        assert viewer.get("/shapes").status_code == 200


def test_health_is_open_but_hides_the_file_path(secured):
    with http.client(base_url=secured.url) as anon:
        assert anon.get("/api/health").json()["database"]["path"] == "(log in to see)"
    with secured.client(secured.token("read")) as c:
        assert c.get("/api/health").json()["database"]["path"].endswith("s.duckdb")


def test_an_admin_rotates_then_revokes_on_the_admin_page(secured):
    plain = secured.token("ingest", gateway="gw-page")
    token_id = plain[4:12]

    def press(client: httpx.Client, button: str) -> httpx.Response:
        # The click fills the token store (in the browser); its change runs the action.
        payload = {
            "inputs": [chosen("admin-token-chosen", token_id, button)],
            "changedPropIds": ["admin-token-chosen.data"],
            "state": [],
        }
        return dash_post(client, payload)

    with secured.login("ada") as admin:
        admin.get("/admin")
        rotated = press(admin, "admin-rotate")
        assert "Rotated" in rotated.text, rotated.text
        new = re.search(r"tks_[A-Za-z0-9]{38}", rotated.text).group(0)
        with secured.client(plain) as old:
            assert old.post("/v1/requests", json=batch(1, "old")).status_code == 401
        token_id = new[4:12]
        assert "Revoked" in press(admin, "admin-revoke").text
        with secured.client(new) as revoked:
            assert revoked.post("/v1/requests", json=batch(1, "new")).status_code == 401
