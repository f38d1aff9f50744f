"""uvicorn's httptools protocol with a deadline and a size bound on request headers.

uvicorn bounds neither for httptools: a client that never finishes its headers holds its
connection forever (the keep-alive timeout runs only between requests), and one that sends
headers without end grows the server's memory without limit. This closes both: headers must be
complete within `header_timeout` seconds of the connection opening or of the request's first
byte (else 408 and close), and in at most `max_header_bytes` (else 431 and close). The body is
bounded separately, by the ingest routes (`TOKENSHAPE_BODY_TIMEOUT_S`,
`TOKENSHAPE_MAX_BODY_BYTES`).
"""

from __future__ import annotations

import asyncio

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

MAX_HEADER_BYTES = 64 * 1024


def _reply(status: bytes, message: str) -> bytes:
    body = message.encode()
    return (
        b"HTTP/1.1 " + status + b"\r\ncontent-type: text/plain; charset=utf-8\r\n"
        b"content-length: " + str(len(body)).encode() + b"\r\nconnection: close\r\n\r\n" + body
    )


class GuardedHttpTools(HttpToolsProtocol):
    """HttpToolsProtocol that cuts off slow or endless request headers."""

    header_timeout: float = 10.0
    max_header_bytes: int = MAX_HEADER_BYTES

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        """Start the header clock as soon as the connection opens (a silent client too)."""
        super().connection_made(transport)
        self._header_bytes = 0
        self._in_headers = True
        self._header_timer: asyncio.TimerHandle | None = None
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
        """Stop the clock with the connection."""
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        """Feed the parser, counting bytes that arrive while headers are still incomplete."""
        in_headers = self._in_headers
        super().data_received(data)
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
        self._arm()
        super().on_message_begin()

    def on_headers_complete(self) -> None:
        """Headers are in: the body's own deadline (in the ingest routes) takes over."""
        self._in_headers = False
        self._disarm()
        super().on_headers_complete()


def guarded_protocol(header_timeout: float, max_header_bytes: int = MAX_HEADER_BYTES) -> type:
    """A GuardedHttpTools class with these bounds, for `uvicorn.run(..., http=...)`."""
    return type(
        "GuardedHttpTools",
        (GuardedHttpTools,),
        {"header_timeout": header_timeout, "max_header_bytes": max_header_bytes},
    )
