"""Page layouts started when the browser asks for the page, taken when Dash asks for them.

A first visit spends about a second loading and running scripts before Dash asks the server
for the page's layout; the layout's queries can run in that second instead of after it. The
HTML request starts the build (in a worker thread, as the caller: the auth context is copied);
the layout request for the same URL and caller takes it, if it is at most TTL_S old. Nothing
else reads a prefetched layout, and each is used once."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from urllib.parse import parse_qs

from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth import principal

TTL_S = 15.0
MAX_PENDING = 8  # a burst of page loads must not pile up queries nobody will read
pages: dict[str, Callable] = {}  # page path → its layout builder (register_page fills it)
_pending: dict[tuple, tuple[float, asyncio.Future]] = {}


def _query(search: str) -> dict:
    """The query as Dash passes it to a layout (one value per name, a list for repeats)."""
    parsed = parse_qs(search, keep_blank_values=True)
    return {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


def _key(path: str, query: dict) -> tuple:
    who = principal.current()
    caller = (who.name, who.role) if who else None
    items = tuple(sorted((k, str(v)) for k, v in query.items()))
    return path, items, caller


def _forget_stale(now: float) -> None:
    for key, (at, _) in list(_pending.items()):
        if now - at > TTL_S:
            del _pending[key]


def start(path: str, search: str) -> None:
    """Begin building the layout for this URL (from the page's HTML request)."""
    build = pages.get(path)
    if build is None:
        return
    now = time.monotonic()
    _forget_stale(now)
    query = _query(search)
    key = _key(path, query)
    if key in _pending or len(_pending) >= MAX_PENDING:
        return
    future = asyncio.ensure_future(asyncio.to_thread(build, **query))
    # A build nobody takes must not log "exception never retrieved"; its taker sees it.
    future.add_done_callback(lambda f: f.cancelled() or f.exception())
    _pending[key] = (now, future)


def take(path: str, query: dict) -> asyncio.Future | None:
    """The started build for this URL and caller, if fresh (removed: used once)."""
    if not _pending:
        return None
    hit = _pending.pop(_key(path, query), None)
    if hit is None or time.monotonic() - hit[0] > TTL_S:
        return None
    return hit[1]


class PrefetchPages:
    """ASGI middleware: a browser's GET of a page's HTML starts that page's layout."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"] in pages
            and any(k == b"accept" and b"text/html" in v for k, v in scope.get("headers", ()))
        ):
            start(scope["path"], scope["query_string"].decode("latin-1"))
        await self.app(scope, receive, send)


def reset() -> None:
    """Forget every started build (a new app is mounted)."""
    _pending.clear()
