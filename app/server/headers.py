"""What every answer carries: the security headers a review expects, and gzip for browsers.

Both wrap the whole app, outside Starlette's server-error layer, so its 500s, the auth gate's
refusals and redirects, the login page, Dash's pages, callbacks and static bundles, the API and
the ingest lane all get the headers. The ingest routes are left out of compression: their
answers are tiny and their path is the one that must stay fast. So are the login and logout
pages: they reflect what the request sent (`next`, the user name) next to a secret (the CSRF
nonce), which compression would let an observer of the answers' sizes guess (BREACH).
"""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI
from starlette.middleware.gzip import GZipMiddleware
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings

# A full policy (script-src and the rest) would need Dash's inline scripts hashed and plotly's
# eval allowed; these three are what stops framing (clickjacking), plugins and <base> hijacks
# without any risk to the pages.
CONTENT_SECURITY_POLICY = b"frame-ancestors 'none'; object-src 'none'; base-uri 'self'"
HSTS = b"max-age=31536000"
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)
# Below this an answer is sent as it is (JSON errors, health); plotly.js is 4.8 MB.
GZIP_MINIMUM_BYTES = 1024
# Level 6 (zlib's default) compresses plotly.js nearly as well as 9 in a fraction of the time.
GZIP_LEVEL = 6
# Static files stream in 64 KiB chunks: compress those in a worker thread too (Starlette's
# default moves only chunks of 128 KiB or more off the event loop, where ingest runs).
GZIP_THREAD_MINIMUM_BYTES = 32 * 1024
UNCOMPRESSED_PREFIXES = ("/v1/",)
# Pages that reflect the request next to a secret (see the module doc): never compressed.
UNCOMPRESSED_PATHS = frozenset({"/login", "/logout"})


class SecurityHeaders:
    """Pure ASGI middleware: adds the security headers (and HSTS over HTTPS) to every answer."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # The scheme as uvicorn saw it: a trusted proxy's X-Forwarded-Proto included. Never
        # over plain http, whatever the public URL says (RFC 6797 section 7.2: a host MUST NOT
        # send it over non-secure transport).
        extra = SECURITY_HEADERS
        if scope.get("scheme") == "https":
            extra = (*SECURITY_HEADERS, (b"strict-transport-security", HSTS))

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", ()))
                present = {name.lower() for name, _ in headers}
                # A route that sets its own value (a stricter policy) keeps it.
                headers.extend(h for h in extra if h[0] not in present)
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class Compression:
    """Starlette's GZip for answers to clients that accept it, except on the ingest routes and
    the login and logout pages."""

    def __init__(self, app: ASGIApp):
        self.app = app
        self.gzip = GZipMiddleware(
            app,
            minimum_size=GZIP_MINIMUM_BYTES,
            compresslevel=GZIP_LEVEL,
            thread_minimum_size=GZIP_THREAD_MINIMUM_BYTES,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != "http"
            or scope["path"].startswith(UNCOMPRESSED_PREFIXES)
            or scope["path"].rstrip("/") in UNCOMPRESSED_PATHS
        ):
            await self.app(scope, receive, send)
            return
        await self.gzip(scope, receive, send)


def install(app: FastAPI, settings: Settings) -> None:
    """Wrap the app's whole middleware stack in the security headers and compression."""
    del settings  # HSTS follows each request's scheme, not the configured public URL
    build: Callable[[], ASGIApp] = app.build_middleware_stack

    # Starlette puts its server-error layer outside every added middleware; wrapping what it
    # builds is the one way to put headers on its 500s too.
    def build_wrapped() -> ASGIApp:
        return SecurityHeaders(Compression(build()))

    app.build_middleware_stack = build_wrapped  # type: ignore[method-assign]
