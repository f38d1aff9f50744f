"""Request framing and early answers against the real server, over raw sockets.

An answer sent before the body has arrived closes the connection (the server no longer reads
the rest of a declared body); framing httptools would read wrongly or ambiguously (a
Transfer-Encoding other than `chunked`, two Host headers, Content-Length with
Transfer-Encoding, two Content-Lengths) is refused before the app runs, and the connection
closes."""

from __future__ import annotations

import json
import socket
import time

import pytest

from tests.support.database import copy_database
from tests.support.records import batch
from tests.support.server import LiveServer, serve, server_settings

MAX_BODY = 256 * 1024
# A hang guard, not a timing assertion: today's server never closes these connections at all.
DEADLINE_S = 15.0


@pytest.fixture(scope="module")
def live(tmp_path_factory, db_template):
    """One server with a small body limit, so an over-limit body is cheap to refuse."""
    db = copy_database(db_template, tmp_path_factory.mktemp("framing") / "f.duckdb")
    yield from serve(server_settings(db, max_body_bytes=MAX_BODY), wait=False)


def _connect(live: LiveServer) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", live.port), timeout=DEADLINE_S)
    return sock


def _read_to_close(sock: socket.socket, *, drip: bool = False) -> tuple[bytes, bool]:
    """Everything the server sends, and whether it closed the connection before the deadline.

    With `drip`, a byte of body goes out every half second meanwhile (a slow sender)."""
    sock.settimeout(0.5 if drip else DEADLINE_S)
    got = b""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        if drip:
            try:
                sock.send(b"x")
            except OSError:  # the server closed its side fully: a reset on our write
                pass
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            continue
        except ConnectionResetError:
            return got, True
        if not chunk:
            return got, True
        got += chunk
    return got, False


def _head(answer: bytes) -> tuple[int, dict[str, str], bytes]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split()[1]), headers, body


def test_an_anonymous_post_declaring_a_gigabyte_is_answered_and_closed(live):
    with _connect(live) as sock:
        sock.sendall(
            b"POST /v1/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000000000\r\n\r\n[{"
        )
        answer, closed = _read_to_close(sock, drip=True)
    status, headers, body = _head(answer)
    assert status == 401, answer
    assert headers["connection"] == "close"
    assert b"bearer" in body.lower()
    assert closed, "the server kept the connection to read the rest of the declared body"


def test_a_413_closes_the_connection_instead_of_draining_the_body(live):
    token = live.token("ingest", gateway="gw-framing-413")
    declared = 200 * 1024 * 1024
    chunk = b" " * (1024 * 1024)
    sent = 0
    with _connect(live) as sock:
        sock.sendall(
            b"POST /v1/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n"
            b"Content-Length: " + str(declared).encode() + b"\r\n\r\n"
        )
        sock.settimeout(DEADLINE_S)
        try:
            while sent < declared:
                sock.sendall(chunk)
                sent += len(chunk)
        except OSError:  # the server closed: the rest is not read
            pass
        answer, closed = _read_to_close(sock)
    status, headers, body = _head(answer)
    assert status == 413, answer
    assert headers["connection"] == "close"
    assert closed
    # The limit, a bounded linger and the sockets' buffers: nowhere near the 200 MiB declared.
    assert sent < declared // 4, f"{sent} bytes were taken before the server closed"


def test_an_httpx_client_sending_too_much_gets_the_413_not_a_reset(live):
    # The close is gentle (the write side first, the rest discarded briefly): the answer
    # reaches a client that is still sending.
    with live.client(live.token("ingest", gateway="gw-framing-httpx")) as client:
        r = client.post(
            "/v1/requests",
            content=b" " * (8 * MAX_BODY),
            headers={"Content-Type": "application/json"},
        )
    assert r.status_code == 413, r.text
    assert "larger than" in r.json()["detail"]


def test_an_early_answer_to_a_body_already_here_keeps_the_connection(live):
    # A small body that has fully arrived costs nothing to skip: keep-alive stays. Headers and
    # body go out in one write, so the body is here before the app answers (an HTTP client
    # writing them apart may see its connection closed, which is the safe side of the race).
    body = json.dumps(batch(2)).encode()
    with _connect(live) as sock:
        sock.sendall(
            b"POST /v1/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
            + b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        got, closed = _read_to_close(sock)
    first, _, rest = got.partition(b"\r\n\r\n")
    assert first.startswith(b"HTTP/1.1 401"), got[:200]
    assert b"connection: close" not in first.lower()
    assert b"HTTP/1.1 200" in rest, got[-300:]
    assert closed


def test_requests_with_their_bodies_read_keep_the_connection(live):
    token = live.token("ingest", gateway="gw-framing-keep")
    with live.client(token) as client:
        answers = [client.post("/v1/requests", json=batch(3)) for _ in range(3)]
    assert [a.status_code for a in answers] == [200, 200, 200]
    assert all(a.headers.get("connection") != "close" for a in answers)


def test_chunked_is_still_taken(live):
    token = live.token("ingest", gateway="gw-framing-chunked")
    body = json.dumps(batch(1)).encode()
    with _connect(live) as sock:
        sock.sendall(
            b"POST /v1/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n"
            b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            + f"{len(body):x}".encode()
            + b"\r\n"
            + body
            + b"\r\n0\r\n\r\n"
        )
        answer, closed = _read_to_close(sock)
    status, _, text = _head(answer)
    assert status == 200, answer
    assert b'"accepted":1' in text


REFUSED = {
    "gzip-then-chunked": (
        b"Transfer-Encoding: gzip, chunked\r\n",
        501,
        "Transfer-Encoding gzip is not supported: use Content-Encoding: gzip",
    ),
    "chunked-twice": (  # httptools refuses this one itself
        b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n",
        400,
        "Transfer-Encoding",
    ),
    "identity": (b"Transfer-Encoding: identity\r\n", 501, "Transfer-Encoding identity"),
    "empty-coding-list": (
        b"Transfer-Encoding: ,\r\n",
        400,
        "Transfer-Encoding is empty: send chunked, or use Content-Length",
    ),
    "two-hosts": (b"Host: evil.example\r\n", 400, "2 Host headers"),
    "length-and-chunked": (
        b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
        400,
        "Transfer-Encoding can't be present with Content-Length",
    ),
    "two-lengths": (b"Content-Length: 5\r\nContent-Length: 6\r\n", 400, "Duplicate Content-Length"),
    "same-length-twice": (
        b"Content-Length: 5\r\nContent-Length: 5\r\n",
        400,
        "Duplicate Content-Length",
    ),
}


@pytest.mark.parametrize("name", REFUSED)
def test_ambiguous_framing_is_refused_by_name_and_closed(live, name):
    headers, status, words = REFUSED[name]
    token = live.token("ingest", gateway=f"gw-framing-{name}")
    with _connect(live) as sock:
        sock.sendall(
            b"POST /v1/requests HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer " + token.encode() + b"\r\n" + headers + b"\r\n"
            b"5\r\nhello\r\n0\r\n\r\n"
        )
        answer, closed = _read_to_close(sock)
    got, answer_headers, body = _head(answer)
    assert got == status, answer
    assert words in body.decode(), body
    assert answer_headers["connection"] == "close"
    assert answer_headers["x-content-type-options"] == "nosniff"
    assert closed
    # Refused before the app: nothing of it was stored or kept as a reject.
    live.settle()
    assert (
        live.scalar("SELECT count(*) FROM rejects WHERE gateway = ?", [f"gw-framing-{name}"]) == 0
    )


def test_two_host_headers_on_a_page_are_refused(live):
    with _connect(live) as sock:
        sock.sendall(b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\nHost: 127.0.0.1\r\n\r\n")
        answer, closed = _read_to_close(sock)
    assert _head(answer)[0] == 400
    assert closed
