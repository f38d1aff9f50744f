"""Who may read and change what: logins, sessions, CSRF, roles and tokens, over real HTTP."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

import dash
import httpx
import pytest
from pydantic import SecretStr

from app.config import Settings
from app.dashboard.pages.admin import ADMINS_ONLY
from app.dashboard.pages.rightsizing import NUMBER_FIELDS, READ_ONLY, SELECT_FIELDS
from app.services import demo
from app.storage.database import Database
from tests.conftest import free_port, serve
from tests.fixtures import batch

PAGES = ("/", "/shapes", "/latency", "/traffic", "/rightsizing", "/seasonal", "/reports", "/admin")


def _save_payload(engine: str) -> dict:
    states = [{"id": "rightsizing-engine", "property": "data", "value": engine}]
    names = [n for n, _, _ in SELECT_FIELDS] + [n for n, _ in NUMBER_FIELDS] + ["startup_log"]
    values = {"model": "llama-3.1-8b", "gpu": "H100", "max_input_len": 1024, "max_seq_len": 2048}
    states += [
        {"id": {"name": n, "type": "rs-field"}, "property": "value", "value": values.get(n)}
        for n in names
    ]
    states.append({"id": "rightsizing-reload", "property": "href", "value": None})
    return {
        "output": "..rightsizing-saved.children...rightsizing-reload.href..",
        "outputs": [
            {"id": "rightsizing-saved", "property": "children"},
            {"id": "rightsizing-reload", "property": "href"},
        ],
        "inputs": [{"id": "rightsizing-save", "property": "n_clicks", "value": 1}],
        "changedPropIds": ["rightsizing-save.n_clicks"],
        "state": states,
    }


def _create_token_payload(gateway: str) -> dict:
    return {
        "output": "..admin-result.children@x...admin-tokens-box.children@x...admin-token-id"
        ".options@x..",
        "outputs": [
            {"id": "admin-result", "property": "children@x"},
            {"id": "admin-tokens-box", "property": "children@x"},
            {"id": "admin-token-id", "property": "options@x"},
        ],
        "inputs": [{"id": "admin-create", "property": "n_clicks", "value": 1}],
        "changedPropIds": ["admin-create.n_clicks"],
        "state": [
            {"id": "admin-gateway", "property": "value", "value": gateway},
            {"id": "admin-scope", "property": "value", "value": "ingest"},
        ],
    }


def _dash_post(client: httpx.Client, payload: dict) -> httpx.Response:
    # Dash's hashed output names for allow_duplicate outputs: ask the server for them.
    deps = client.get("/_dash-dependencies").json()
    wanted = payload["inputs"][0]["id"]
    for dep in deps:
        if any(i["id"] == wanted for i in dep["inputs"]):
            payload = {**payload, "output": dep["output"]}
            outs = dep["output"].strip(".").split("...")
            payload["outputs"] = [
                {"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]} for o in outs
            ]
            break
    return client.post("/_dash-update-component", json=payload)


def test_every_page_without_a_login_redirects_to_the_login_form(secured):
    with httpx.Client(base_url=secured.url) as anon:
        for page in PAGES:
            answer = anon.get(page + "?window=7d")
            assert answer.status_code == 303, page
            assert answer.headers["location"].startswith("/login?next=%2F"), page
        assert anon.get("/_dash-layout").status_code == 401
        assert anon.post("/_dash-update-component", json=_save_payload("x")).status_code == 401
        form = anon.get("/login")
        assert form.status_code == 200 and 'type="password"' in form.text


def _api_get_routes(client: httpx.Client) -> list[str]:
    schema = client.get("/openapi.json").json()
    paths = []
    for path, ops in schema["paths"].items():
        if path.startswith("/api/") and "get" in ops and path != "/api/health":
            paths.append(path.replace("{name}", "chat-8b").replace("{token_id}", "x"))
    return paths


def test_every_route_and_method_without_credentials_is_refused(secured):
    with httpx.Client(base_url=secured.url) as anon:
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
        saved = viewer.post("/_dash-update-component", json=_save_payload("e1"))
        assert saved.json()["response"]["rightsizing-saved"]["children"] == READ_ONLY
        made = _dash_post(viewer, _create_token_payload("sneaky"))
        assert ADMINS_ONLY in made.text and "tks_" not in made.text
    assert secured.scalar("SELECT count(*) FROM tokens WHERE gateway = 'sneaky'") == 0


def test_every_api_route_needs_a_read_token_or_a_login(secured):
    with httpx.Client(base_url=secured.url) as anon:
        routes = _api_get_routes(anon)
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
        saved = viewer.post("/_dash-update-component", json=_save_payload("e1"))
        assert saved.status_code == 403 and "only admins" in saved.json()["detail"]
        for action in ("admin-create", "admin-rotate", "admin-revoke"):
            payload = _create_token_payload("sneaky")
            payload["inputs"] = [{"id": action, "property": "n_clicks", "value": 1}]
            made = _dash_post(viewer, payload)
            assert made.status_code == 403, (action, made.text)
        assert viewer.get("/admin").status_code == 403
        layout = viewer.get("/_dash-layout").text
        assert '"href":"/admin"' not in layout.replace(" ", "")
        # An ordinary callback still works for a viewer (the gate hands the body on intact).
        viewer.get("/shapes")
        assert viewer.get("/shapes").status_code == 200
    assert secured.scalar("SELECT count(*) FROM engines") == 0
    assert secured.scalar("SELECT count(*) FROM tokens WHERE gateway = 'sneaky'") == 0


def test_an_admin_changes_profiles_and_tokens_only_with_the_csrf_token(secured):
    with secured.login("ada") as admin:
        admin.get("/rightsizing")
        saved = admin.post("/_dash-update-component", json=_save_payload("e1"))
        assert saved.json()["response"]["rightsizing-saved"]["children"] == "saved"
        made = _dash_post(admin, _create_token_payload("gw-new"))
        assert "Copy it now" in made.text and "tks_" in made.text
        # The same request from another site carries the cookie but not the CSRF header.
        del admin.headers["X-CSRFToken"]
        forged = admin.post("/_dash-update-component", json=_save_payload("e2"))
        assert forged.status_code == 403 and "CSRF" in forged.json()["detail"]
    assert secured.scalar("SELECT count(*) FROM engines") == 1
    assert secured.scalar("SELECT count(*) FROM tokens WHERE gateway = 'gw-new'") == 1


def test_login_cookies_logout_and_wrong_passwords(secured):
    with httpx.Client(base_url=secured.url) as c:
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
    with httpx.Client(base_url=secured.url, cookies={"tokenshape_session": stale}) as old:
        assert old.get("/shapes").status_code == 303
    assert secured.scalar("SELECT count(*) FROM sessions") == 0


def test_cookies_are_secure_behind_https_and_redirects_stay_on_site(secured):
    with httpx.Client(base_url=secured.url, headers={"X-Forwarded-Proto": "https"}) as c:
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


def test_repeated_wrong_passwords_are_slowed_down(secured):
    with httpx.Client(base_url=secured.url) as c:
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


def test_a_shared_bind_without_logins_is_read_only(tmp_path):
    """TOKENSHAPE_AUTH=auto on 0.0.0.0 means logins; forced off there, viewers only."""
    settings = Settings(
        db=tmp_path / "r.duckdb", host="0.0.0.0", auth="off", port=free_port(), _env_file=None
    )
    with Database(settings.db).open() as db:
        demo.seed(db, requests=500, days=3, end=datetime(2026, 11, 23, tzinfo=UTC))
    assert dash.page_registry is not None
    for live in serve(settings):
        # auth=off outright on a shared bind: the operator chose it, so everyone is admin.
        with live.client() as c:
            c.get("/rightsizing")
            answer = c.post("/_dash-update-component", json=_save_payload("chat-8b"))
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
        with httpx.Client(base_url=secured.url) as other_site:
            answer = other_site.post("/logout")
            assert answer.status_code == 303
            assert "set-cookie" not in answer.headers
        assert viewer.get("/shapes").status_code == 200
        del viewer.headers["X-CSRFToken"]
        assert viewer.post("/logout").status_code == 403  # a session, but no CSRF token
        assert viewer.get("/shapes").status_code == 200


def test_parallel_wrong_passwords_are_throttled_too(secured):
    from concurrent.futures import ThreadPoolExecutor

    with httpx.Client(base_url=secured.url) as c:
        c.get("/login")
        nonce = c.cookies["tokenshape_login"]

    def guess(k: int) -> int:
        with httpx.Client(base_url=secured.url, cookies={"tokenshape_login": nonce}) as g:
            form = {"csrf": nonce, "username": "ada", "password": f"guess {k}"}
            return g.post("/login", data=form).status_code

    with ThreadPoolExecutor(12) as pool:
        codes = list(pool.map(guess, range(24)))
    assert codes.count(401) <= 5 and codes.count(429) >= 19, codes


def test_health_is_open_but_hides_the_file_path(secured):
    with httpx.Client(base_url=secured.url) as anon:
        assert anon.get("/api/health").json()["database"]["path"] == "(log in to see)"
    with secured.client(secured.token("read")) as c:
        assert c.get("/api/health").json()["database"]["path"].endswith("s.duckdb")


def test_the_first_start_can_create_the_admin_from_a_setting(tmp_path):
    settings = Settings(
        db=tmp_path / "f.duckdb",
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


def test_an_admin_rotates_then_revokes_on_the_admin_page(secured):
    plain = secured.token("ingest", gateway="gw-page")
    token_id = plain[4:12]

    def press(client: httpx.Client, button: str) -> httpx.Response:
        dep = next(
            d
            for d in client.get("/_dash-dependencies").json()
            if any(i["id"] == button for i in d["inputs"])
        )
        outs = dep["output"].strip(".").split("...")
        return client.post(
            "/_dash-update-component",
            json={
                "output": dep["output"],
                "outputs": [
                    {"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]} for o in outs
                ],
                "inputs": [
                    {
                        "id": i["id"],
                        "property": "n_clicks",
                        "value": 1 if i["id"] == button else None,
                    }
                    for i in dep["inputs"]
                ],
                "changedPropIds": [f"{button}.n_clicks"],
                "state": [{"id": "admin-token-id", "property": "value", "value": token_id}],
            },
        )

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
