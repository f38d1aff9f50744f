"""uvicorn's httptools protocol with bounded headers, strict framing and early answers that close.

uvicorn bounds neither time nor size of request headers for httptools: a client that never
finishes its headers holds its connection forever (the keep-alive timeout runs only between
requests), and one that sends headers without end grows the server's memory without limit.
Headers must be complete within `header_timeout` seconds of the connection opening or of the
request's first byte (else 408 and close), and in at most `max_header_bytes` (else 431 and
close). The body is bounded separately, by the ingest routes (`TOKENSHAPE_BODY_TIMEOUT_S`,
`TOKENSHAPE_MAX_BODY_BYTES`).

Framing is refused before the app runs, for every route: a Transfer-Encoding other than exactly
`chunked` (httptools reads `gzip, chunked` as plain chunked text), more than one Host header
(RFC 9112 §3.2), and what httptools itself refuses (Content-Length with Transfer-Encoding, a
repeated Content-Length), each with a sentence saying what was wrong, then the connection closes.

An answer sent before the request's body has fully arrived (a 401, 403, 405, 413, a redirect, a
body deadline's 408) says `Connection: close`, and the connection closes after it: uvicorn
would otherwise go on reading and discarding the rest of the declared body, with no deadline,
to keep the connection alive. It closes gently: the answer is sent and the write side shut
(the client sees the end at once), then what the client still sends is discarded for at most
`LINGER_S` seconds or `LINGER_BYTES` bytes before the socket closes (closing at once, with the
client's bytes unread, resets the connection and can destroy the answer before it is read).
"""

from __future__ import annotations

import asyncio
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.server.headers import SECURITY_HEADERS

MAX_HEADER_BYTES = 64 * 1024
LINGER_S = 1.0
LINGER_BYTES = 1024 * 1024
# Content codings a sender may put in Transfer-Encoding by mistake, meaning Content-Encoding.
_CONTENT_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "compress", "br", "zstd"})


# The protocol's own answers (before the app runs) carry the same headers as the app's.
_HEADERS = b"".join(name + b": " + value + b"\r\n" for name, value in SECURITY_HEADERS)


def _reply(status: bytes, message: str) -> bytes:
    body = message.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: "
        + str(len(body)).encode()
        + b"\r\n"
        + _HEADERS
        + b"connection: close\r\n\r\n"
        + body
    )


class _Refused(Exception):
    """Raised from a parser callback to stop parsing a request refused for its framing."""


def framing_problem(hosts: int, transfer_encodings: list[bytes]) -> tuple[bytes, str] | None:
    """(status line, message) for a request whose framing is refused, or None."""
    if hosts > 1:
        return (
            b"400 Bad Request",
            f"the request has {hosts} Host headers: send exactly one (RFC 9112 section 3.2)",
        )
    if not transfer_encodings:
        return None
    codings = [
        c.strip().lower()
        for value in transfer_encodings
        for c in value.decode("latin-1").split(",")
        if c.strip()
    ]
    if codings == ["chunked"]:
        return None
    if not codings:  # only commas and blanks (`Transfer-Encoding: ,`): nothing to go on
        return (
            b"400 Bad Request",
            "Transfer-Encoding is empty: send chunked, or use Content-Length",
        )
    others = [c for c in codings if c != "chunked"] or codings
    named = ", ".join(others)
    if set(others) <= _CONTENT_CODINGS:
        hint = f"use Content-Encoding: {others[0]}"
    else:
        hint = "send the body with Content-Length or Transfer-Encoding: chunked"
    return b"501 Not Implemented", f"Transfer-Encoding {named} is not supported: {hint}"


class _EarlyAnswerCycle(RequestResponseCycle):
    """uvicorn's request cycle whose answer closes the connection if the body is still coming."""

    protocol: GuardedHttpTools

    async def send(self, message: Any) -> None:
        """Before the answer's headers go out: not all of the body here means close after it."""
        if not self.response_started and self.more_body and not self.disconnected:
            # uvicorn then adds `connection: close` and closes the transport after the body;
            # the wrapped transport turns that close into a short, bounded linger.
            self.keep_alive = False
            self.transport = _Lingering(self.transport, self.protocol)  # type: ignore[assignment]
        await super().send(message)


class _Lingering:
    """A transport whose close() shuts the write side and lets the protocol linger."""

    def __init__(self, transport: asyncio.Transport, protocol: GuardedHttpTools):
        self._transport = transport
        self._protocol = protocol

    def close(self) -> None:
        """Half-close now; the protocol closes fully after a short, bounded linger."""
        self._protocol.linger()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class GuardedHttpTools(HttpToolsProtocol):
    """HttpToolsProtocol that cuts off slow or endless headers, bad framing and unread bodies."""

    header_timeout: float = 10.0
    max_header_bytes: int = MAX_HEADER_BYTES
    linger_s: float = LINGER_S
    linger_bytes: int = LINGER_BYTES

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the header clock as soon as the connection opens (a silent client too)."""
        super().connection_made(transport)
        self._header_bytes = 0
        self._in_headers = True
        self._header_timer: asyncio.TimerHandle | None = None
        self._hosts = 0
        self._transfer_encodings: list[bytes] = []
        self._refusal: tuple[bytes, str] | None = None
        self._lingering = False
        self._linger_timer: asyncio.TimerHandle | None = None
        self._lingered = 0
        self._arm()

    def _arm(self) -> None:
        if self._header_timer is None:
            self._header_timer = self.loop.call_later(self.header_timeout, self._too_slow)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _too_slow(self) -> None:
        self._header_timer = None
        if self._in_headers and not self.transport.is_closing():
            message = f"request headers not complete within {self.header_timeout:g} s"
            self.transport.write(_reply(b"408 Request Timeout", message))
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        """Stop the clocks with the connection."""
        self._disarm()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser, counting bytes that arrive while headers are still incomplete."""
        if self._lingering:  # the answer is out: what still comes is dropped, up to a bound
            self._lingered += len(data)
            if self._lingered > self.linger_bytes:
                self.transport.close()
            return
        in_headers = self._in_headers
        self._unset_keepalive_if_required()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
        except httptools.HttpParserError as exc:
            # uvicorn answers every parser error "Invalid HTTP request received."; say which.
            status, message = self._refusal or (b"400 Bad Request", f"invalid HTTP request: {exc}")
            self.logger.warning("refused a request: %s", message)
            self._disarm()
            if not self.transport.is_closing():
                self.transport.write(_reply(status, message))
                self.transport.close()
            return
        if in_headers and self._in_headers and not self.transport.is_closing():
            # The whole chunk was header bytes (a chunk that completes them is not counted).
            self._header_bytes += len(data)
            if self._header_bytes > self.max_header_bytes:
                self._disarm()
                message = f"request headers are larger than {self.max_header_bytes} bytes"
                self.transport.write(_reply(b"431 Request Header Fields Too Large", message))
                self.transport.close()

    def on_message_begin(self) -> None:
        """A new request on the connection: its headers get their own deadline."""
        self._in_headers = True
        self._header_bytes = 0
        self._hosts = 0
        self._transfer_encodings = []
        self._arm()
        super().on_message_begin()

    def on_header(self, name: bytes, value: bytes) -> None:
        """Note the headers that frame the request, then record it as uvicorn does."""
        lowered = name.lower()
        if lowered == b"host":
            self._hosts += 1
        elif lowered == b"transfer-encoding":
            self._transfer_encodings.append(value)
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        """Headers are in: refuse bad framing, else the body's own deadline takes over."""
        self._in_headers = False
        self._disarm()
        self._refusal = framing_problem(self._hosts, self._transfer_encodings)
        if self._refusal is not None:
            raise _Refused  # httptools stops and raises a parser error: data_received answers
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and type(cycle) is RequestResponseCycle:
            cycle.__class__ = _EarlyAnswerCycle  # same state, a send that knows the body
            cycle.protocol = self  # type: ignore[attr-defined]

    def linger(self) -> None:
        """After an early answer: shut the write side, drop what comes, close soon."""
        transport = self.transport
        if transport.is_closing() or self._lingering:
            return
        if not transport.can_write_eof():
            transport.close()
            return
        self._lingering = True
        transport.write_eof()  # after the buffered answer: the client sees its end now
        self.flow.resume_reading()
        self._linger_timer = self.loop.call_later(self.linger_s, transport.close)

    def on_response_complete(self) -> None:
        """A lingering connection takes no further request."""
        if self._lingering:
            self.server_state.total_requests += 1
            return
        super().on_response_complete()


def guarded_protocol(header_timeout: float, max_header_bytes: int = MAX_HEADER_BYTES) -> type:
    """A GuardedHttpTools class with these bounds, for `uvicorn.run(..., http=...)`."""
    return type(
        "GuardedHttpTools",
        (GuardedHttpTools,),
        {"header_timeout": header_timeout, "max_header_bytes": max_header_bytes},
    )
