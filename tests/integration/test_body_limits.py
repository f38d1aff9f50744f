"""Every request body is bounded before it is read (issue 26, class 5): a body over its
route's cap is a 413 before a byte of it is read (declared) or as soon as it passes the cap
(chunked), and a token without the route's scope is refused before the body is read."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from app.server.body_limit import CAPS, DEFAULT_CAP, cap_for
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

GIB_400 = 400 * 1024 * 1024


@pytest.fixture(scope="module")
def secured(tmp_path_factory, db_template) -> Iterator[LiveServer]:
    """A server with logins on (tokens decide), on a loopback port."""
    db = copy_database(db_template, tmp_path_factory.mktemp("limits") / "t.duckdb")
    yield from serve(server_settings(db, auth="on"), wait=False)


def _raw(live: LiveServer, head: str, body_chunks: Iterator[bytes] = iter(())) -> str:
    """Send a request's head (and chunks, while the server reads), return the answer's text."""
    url = urlsplit(live.url)
    with socket.create_connection((url.hostname, url.port), timeout=20) as sock:
        sock.sendall(head.encode())
        for chunk in body_chunks:
            try:
                sock.sendall(chunk)
            except OSError:  # the server answered and closed: read what it said
                break
        answer = b""
        while True:
            try:
                part = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not part:
                break
            answer += part
    return answer.decode("latin-1")


def _head(method: str, path: str, token: str | None, extra: str) -> str:
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
        f"Content-Type: application/json\r\n{extra}\r\n"
    )


def test_the_caps_name_every_route_family_and_leave_ingest_to_its_own_limits():
    assert cap_for("/v1/requests") is None and cap_for("/v1/rollups") is None
    assert cap_for("/api/engines/chat-8b") == dict(CAPS)["/api/engines/"]
    assert cap_for("/api/anything-else") == DEFAULT_CAP


def test_a_declared_400_mb_profile_is_refused_before_a_byte_is_read(module_live):
    # Open mode (loopback, no logins): everyone may PUT, so only the cap stands in the way.
    head = _head("PUT", "/api/engines/x", None, f"Content-Length: {GIB_400}\r\n")
    answer = _raw(module_live, head)  # no body sent at all: the answer cannot wait for it
    assert answer.startswith("HTTP/1.1 413")
    assert "at most 1 MiB" in answer and "/api/engines/x" in answer


def test_a_chunked_dash_callback_is_cut_off_at_its_cap(module_live):
    head = _head("POST", "/_dash-update-component", None, "Transfer-Encoding: chunked\r\n")
    block = b"x" * (256 * 1024)
    chunks = (f"{len(block):x}\r\n".encode() + block + b"\r\n" for _ in range(80))  # 20 MiB
    answer = _raw(module_live, head, chunks)
    assert answer.startswith("HTTP/1.1 413") and "at most 4 MiB" in answer


def test_a_read_token_is_refused_a_profile_change_before_its_body_is_read(secured):
    token = secured.token("read", gateway="limits")
    head = _head("PUT", "/api/engines/x", token, "Content-Length: 500000\r\n")
    answer = _raw(secured, head)  # the declared body never comes: a 403 must not wait for it
    assert answer.startswith("HTTP/1.1 403") and "admin" in answer


def test_no_token_is_a_401_before_the_body_is_read(secured):
    head = _head("PUT", "/api/engines/x", None, "Content-Length: 500000\r\n")
    assert _raw(secured, head).startswith("HTTP/1.1 401")


def test_a_body_within_its_cap_still_reaches_the_route(secured):
    admin = secured.token("admin", gateway="limits")
    with secured.client(admin) as c:
        r = c.put("/api/engines/limits-x", json={"model": "no-such-model"})
    assert r.status_code == 422 and "413" not in r.text  # the route read it and named the field
