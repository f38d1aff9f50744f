"""Security headers, compression and trusted proxies, against the real server over HTTP.

Every answer (pages, the login form, redirects, refusals, API errors, Dash's own routes, static
bundles) carries the security headers; HSTS only over HTTPS as the server sees it; browsers that
accept gzip get the bundles gzipped; X-Forwarded-For and X-Forwarded-Proto count only from a
proxy the operator named in TOKENSHAPE_TRUSTED_PROXIES."""

from __future__ import annotations

import gzip
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from app.config import Settings
from tests.support import http
from tests.support.database import copy_database
from tests.support.net import free_port
from tests.support.records import batch
from tests.support.server import LiveServer, serve, server_settings

EXPECTED = {
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "same-origin",
}


def _secure(headers) -> None:
    for name, value in EXPECTED.items():
        assert headers.get(name) == value, (name, dict(headers))
    policy = headers["content-security-policy"]
    for directive in ("frame-ancestors 'none'", "object-src 'none'", "base-uri 'self'"):
        assert directive in policy
    assert "strict-transport-security" not in headers


@pytest.fixture(scope="module")
def secured(tmp_path_factory, secured_template) -> Iterator[LiveServer]:
    """Logins on (users ada and vic), no proxy trusted."""
    db = copy_database(secured_template, tmp_path_factory.mktemp("headers") / "s.duckdb")
    settings = Settings(db=db, port=free_port(), auth="on", _env_file=None)
    yield from serve(settings, wait=False)


@pytest.fixture(scope="module")
def proxied(tmp_path_factory, db_template) -> Iterator[LiveServer]:
    """Behind a proxy on this machine: TOKENSHAPE_TRUSTED_PROXIES=127.0.0.1."""
    db = copy_database(db_template, tmp_path_factory.mktemp("proxied") / "p.duckdb")
    yield from serve(server_settings(db, trusted_proxies="127.0.0.1"), wait=False)


ANONYMOUS = [
    ("GET", "/login", 200),
    ("GET", "/", 303),  # to the login form
    ("GET", "/api/health", 200),
    ("GET", "/api/quantiles", 401),
    ("GET", "/api/no-such-route", 401),
    ("PUT", "/v1/requests", 405),
    ("POST", "/v1/requests", 401),
    ("POST", "/_dash-update-component", 401),
    ("GET", "/_dash-layout", 401),
    ("GET", "/assets/style.css", 200),
]


@pytest.mark.parametrize(("method", "path", "status"), ANONYMOUS)
def test_every_answer_to_anyone_carries_the_headers(secured, method, path, status):
    with secured.client(follow_redirects=False) as c:
        answer = c.request(method, path, json=batch(1) if method != "GET" else None)
    assert answer.status_code == status, answer.text
    _secure(answer.headers)


def test_pages_dash_routes_and_bundles_carry_the_headers(secured):
    with secured.login("vic") as c:
        page = c.get("/shapes")
        assert page.status_code == 200
        _secure(page.headers)
        for path in ("/_dash-layout", "/_dash-dependencies", "/api/quantiles"):
            answer = c.get(path)
            assert answer.status_code == 200, path
            _secure(answer.headers)
        for src in re.findall(r'src="(/[^"]+)"', page.text):
            answer = c.get(src)
            assert answer.status_code == 200, src
            _secure(answer.headers)


def _bundles(live: LiveServer) -> list[str]:
    with live.login("vic") as c:
        page = c.get("/")
    scripts = re.findall(r'src="(/[^"]+\.js[^"]*)"', page.text)
    plotly = [s for s in scripts if "plotly" in s]
    suites = [s for s in scripts if s.startswith("/_dash-component-suites/")]
    assert plotly and suites, scripts
    return [plotly[0], max(suites, key=len)]


def _raw(live: LiveServer, path: str, encoding: str):
    with (
        http.client(base_url=live.url, timeout=30) as c,
        c.stream("GET", path, headers={"Accept-Encoding": encoding}) as answer,
    ):
        return answer.status_code, answer.headers, b"".join(answer.iter_raw())


def test_bundles_are_gzipped_for_a_browser_that_accepts_it(secured):
    for path in _bundles(secured):
        status, plain_headers, plain = _raw(secured, path, "identity")
        assert status == 200 and "content-encoding" not in plain_headers
        status, headers, wire = _raw(secured, path, "gzip, deflate, br")
        assert status == 200
        assert headers["content-encoding"] == "gzip", path
        assert "accept-encoding" in headers["vary"].lower()
        assert gzip.decompress(wire) == plain, path
        assert len(wire) < len(plain) / 2, (path, len(wire), len(plain))


def test_ingest_answers_are_not_compressed(secured):
    token = secured.token("ingest", gateway="gw-headers")
    with secured.client(token) as c:
        answer = c.post("/v1/requests", json=batch(3), headers={"Accept-Encoding": "gzip"})
    assert answer.status_code == 200, answer.text
    assert "content-encoding" not in answer.headers
    _secure(answer.headers)


def test_no_hsts_over_plain_http_even_if_a_client_claims_https(secured):
    with secured.client() as c:
        answer = c.get("/login", headers={"X-Forwarded-Proto": "https"})
    assert "strict-transport-security" not in answer.headers
    assert "Secure" not in answer.headers["set-cookie"]  # nor Secure cookies on its word


def test_hsts_behind_a_trusted_https_proxy(proxied):
    with proxied.client() as c:
        over_https = c.get("/api/health", headers={"X-Forwarded-Proto": "https"})
        over_http = c.get("/api/health")
    assert over_https.headers["strict-transport-security"].startswith("max-age=")
    assert "strict-transport-security" not in over_http.headers


def test_an_https_public_url_sends_hsts_over_https_only(tmp_path, db_template):
    """RFC 6797 section 7.2: never over plain http, whatever TOKENSHAPE_PUBLIC_URL says."""
    db = copy_database(db_template, tmp_path / "h.duckdb")
    settings = server_settings(
        db, public_url="https://tokenshape.example.com", trusted_proxies="127.0.0.1"
    )
    server = serve(settings, wait=False)
    live = next(server)
    try:
        over_http = http.get(f"{live.url}/api/health")
        over_https = http.get(f"{live.url}/api/health", headers={"X-Forwarded-Proto": "https"})
    finally:
        server.close()
    assert "strict-transport-security" not in over_http.headers
    assert over_https.headers["strict-transport-security"] == "max-age=31536000"


def test_the_login_page_is_never_compressed(secured):
    """It reflects `next` next to the CSRF nonce: gzip would leak the nonce by size (BREACH)."""
    status, headers, wire = _raw(secured, "/login?next=/rightsizing", "gzip, deflate, br")
    assert status == 200 and len(wire) > 1024
    assert "content-encoding" not in headers
    assert b"/rightsizing" in wire


@contextmanager
def _access_log() -> Iterator[list[logging.LogRecord]]:
    """uvicorn's access-log records while the block runs (the test servers log warnings only)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger("uvicorn.access")
    level = logger.level
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _client_of(records: list[logging.LogRecord], path: str) -> str:
    # uvicorn's access line: (client "host:port", method, path, HTTP version, status).
    (client,) = [r.args[0] for r in records if r.args and r.args[2] == path]
    return client.rsplit(":", 1)[0]


def test_x_forwarded_for_is_ignored_unless_the_peer_is_a_trusted_proxy(secured):
    with _access_log() as records, secured.client() as c:
        c.get("/api/health?who=untrusted", headers={"X-Forwarded-For": "1.2.3.4"})
    assert _client_of(records, "/api/health?who=untrusted") == "127.0.0.1"


def test_x_forwarded_for_is_the_client_behind_a_trusted_proxy(proxied):
    with _access_log() as records, proxied.client() as c:
        c.get("/api/health?who=proxied", headers={"X-Forwarded-For": "1.2.3.4"})
        c.get("/api/health?who=direct")
    assert _client_of(records, "/api/health?who=proxied") == "1.2.3.4"
    assert _client_of(records, "/api/health?who=direct") == "127.0.0.1"
