"""Every request body is bounded before it is read: a cap per route, checked against the
declared Content-Length before a byte is read and counted while a chunked body streams.

FastAPI reads and parses a route's whole body before its dependencies run (the token check
among them), and Dash buffers a callback's body the same way; without a cap, a 400 MB PUT with
no token grew the server by over a gigabyte before its 401. The ingest routes and the lake's
rollup pushes are not capped here: they stream with their own limits
(TOKENSHAPE_MAX_BODY_BYTES, TOKENSHAPE_BODY_TIMEOUT_S) and answer with their own messages.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth.gate import SELF_AUTH_PATHS

KIB = 1024
MIB = 1024 * KIB
# (path prefix, cap) in order, the first match wins. A profile is kilobytes (its startup log
# and config.json included, with room); a Dash callback carries the page's fields, a pasted
# engine startup log the largest of them (vLLM's run to a few hundred KB); logins, tokens and
# users are a few fields.
CAPS: tuple[tuple[str, int], ...] = (
    ("/_dash-update-component", 4 * MIB),
    ("/api/engines/", 1 * MIB),
    ("/api/tokens", 64 * KIB),
    ("/api/users", 64 * KIB),
    ("/login", 64 * KIB),
    ("/logout", 64 * KIB),
)
DEFAULT_CAP = 1 * MIB


def cap_for(path: str) -> int | None:
    """The largest body a request to `path` may send, or None where the route bounds its own."""
    if path in SELF_AUTH_PATHS:
        return None
    for prefix, cap in CAPS:
        if path.startswith(prefix):
            return cap
    return DEFAULT_CAP


def _words(n: int) -> str:
    return f"{n // MIB} MiB" if n % MIB == 0 else f"{n // KIB} KiB"


def _refusal(path: str, cap: int, declared: int | None) -> list[Message]:
    said = f"{declared:,} bytes" if declared is not None else "more than that"
    body = json.dumps(
        {
            "detail": f"the request body is too large for {path}: at most {_words(cap)} "
            f"({cap:,} bytes) is accepted here, and this one is {said}. Send less; ingest "
            "records go to /v1/requests, which streams large batches"
        }
    ).encode()
    return [
        {
            "type": "http.response.start",
            "status": 413,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        },
        {"type": "http.response.body", "body": body},
    ]


class BodyLimit:
    """Pure ASGI middleware: 413 for a body over its route's cap, before or while it arrives."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or (cap := cap_for(scope["path"])) is None:
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > cap:
            for message in _refusal(scope["path"], cap, declared):
                await send(message)
            return
        seen = 0
        refused = False
        started = False

        async def counted() -> Message:
            # A chunked body (or one longer than it said, which the server refuses anyway)
            # is counted as it streams; past the cap the app sees the client leave, and the
            # caller gets the 413 unless the app had answered already.
            nonlocal seen, refused
            if refused:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > cap:
                    refused = True
                    if not started:
                        for part in _refusal(scope["path"], cap, None):
                            await send(part)
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if refused:
                return  # the 413 went out in the app's place
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        await self.app(scope, counted, guarded)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None  # the HTTP parser refuses a malformed length before we run
    return None
