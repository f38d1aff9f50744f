"""The security headers and compression around an app's whole stack, its 500s included."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.responses import PlainTextResponse
from starlette.testclient import TestClient

from app.config import Settings
from app.server import errors, headers


def _app(**settings) -> FastAPI:
    app = FastAPI()
    errors.install(app)

    @app.get("/boom")
    async def boom():
        raise RuntimeError("boom")

    @app.get("/big")
    async def big():
        return PlainTextResponse("tokenshape " * 1000)

    @app.post("/v1/requests")
    async def ingest():
        return PlainTextResponse("accepted " * 1000)

    @app.get("/login")
    async def login(next: str = "/"):
        return PlainTextResponse(f"next={next} nonce=secret " * 200)

    @app.post("/logout")
    async def logout():
        return PlainTextResponse("bye " * 1000)

    @app.get("/framed")
    async def framed():
        return PlainTextResponse("own", headers={"X-Frame-Options": "SAMEORIGIN"})

    headers.install(app, Settings(_env_file=None, **settings))
    return app


def _client(app: FastAPI, base: str = "http://test") -> TestClient:
    return TestClient(app, base_url=base, raise_server_exceptions=False)


def test_a_server_error_carries_the_headers():
    with _client(_app()) as c:
        answer = c.get("/boom")
    assert answer.status_code == 500
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert "frame-ancestors 'none'" in answer.headers["content-security-policy"]


def test_a_route_keeps_its_own_value():
    with _client(_app()) as c:
        answer = c.get("/framed")
    assert answer.headers.get_list("x-frame-options") == ["SAMEORIGIN"]


def test_hsts_over_https_only_whatever_the_public_url_says():
    with _client(_app()) as c:
        assert "strict-transport-security" not in c.get("/big").headers
    with _client(_app(), "https://test") as c:
        assert "strict-transport-security" in c.get("/big").headers
    # RFC 6797 section 7.2: never over plain http, even when the public URL is https.
    with _client(_app(public_url="https://ts.example.com")) as c:
        assert "strict-transport-security" not in c.get("/big").headers
    with _client(_app(public_url="https://ts.example.com"), "https://test") as c:
        assert "strict-transport-security" in c.get("/big").headers


def test_gzip_for_pages_not_for_the_ingest_routes():
    with _client(_app()) as c:
        page = c.get("/big", headers={"Accept-Encoding": "gzip"})
        sent = c.post("/v1/requests", headers={"Accept-Encoding": "gzip"})
    assert page.headers["content-encoding"] == "gzip"
    assert page.text == "tokenshape " * 1000
    assert "content-encoding" not in sent.headers


def test_login_and_logout_are_never_compressed():
    """They reflect `next` next to the CSRF nonce: gzip would leak the nonce by size (BREACH)."""
    with _client(_app()) as c:
        page = c.get("/login?next=/nonce=s", headers={"Accept-Encoding": "gzip"})
        out = c.post("/logout", headers={"Accept-Encoding": "gzip"})
    assert page.status_code == 200 and len(page.content) > 1024
    assert "content-encoding" not in page.headers
    assert "content-encoding" not in out.headers
