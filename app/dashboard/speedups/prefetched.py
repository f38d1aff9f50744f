"""Page layouts started when the browser asks for the page, taken when Dash asks for them.

A first visit spends about a second loading and running scripts before Dash asks the server
for the page's layout; the layout's queries can run in that second instead of after it. The
HTML request starts the build (in a worker thread, as the caller: the auth context is copied);
the layout request for the same URL and caller takes it, if it is at most TTL_S old. Nothing
else reads a prefetched layout, and each is used once.

Dash's layout request does not say which page it is for, but its Referer does: the middleware
keeps that URL for the request (`page_url`), so the shell can put the page straight into the
first layout instead of waiting for Dash's routing callback."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from contextvars import ContextVar
from urllib.parse import parse_qs, urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth import principal

LAYOUT_PATH = "/_dash-layout"
TTL_S = 15.0
MAX_PENDING = 8  # a burst of page loads must not pile up queries nobody will read
PER_CALLER = 2  # one client's burst (60 GETs of /) starts two builds, not a minute of CPU
WORKERS = 2  # builds beyond these wait queued, so one nobody takes is cancelled unstarted
pages: dict[str, Callable] = {}  # page path → its layout builder (register_page fills it)
_pending: dict[tuple, tuple[float, Future, str]] = {}  # key → (started, build, client host)
_lock = threading.Lock()
# Concurrent futures, not asyncio ones: the layout request waits for them in a worker thread.
_builds = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="tokenshape-page")
_page_url: ContextVar[tuple[str, str] | None] = ContextVar("tokenshape_page_url", default=None)


def query_of(search: str) -> dict:
    """The query as Dash passes it to a layout (one value per name, a list for repeats)."""
    parsed = parse_qs(search, keep_blank_values=True)
    return {k: v[0] if len(v) == 1 else v for k, v in parsed.items()}


def _key(path: str, query: dict) -> tuple:
    who = principal.current()
    caller = (who.name, who.role) if who else None
    items = tuple(sorted((k, str(v)) for k, v in query.items()))
    return path, items, caller


def _forget_stale(now: float) -> None:
    for key, (at, build, _) in list(_pending.items()):
        if now - at > TTL_S:
            build.cancel()  # not taken in time: if it has not started, it never will
            del _pending[key]


def start(path: str, search: str, client: str = "") -> None:
    """Begin building the layout for this URL (from the page's HTML request by `client`, its
    address): at most PER_CALLER at once per caller and client, MAX_PENDING in all."""
    build = pages.get(path)
    if build is None:
        return
    query = query_of(search)
    key = _key(path, query)
    with _lock:  # the event loop starts builds; layout requests' worker threads take them
        now = time.monotonic()
        _forget_stale(now)
        if key in _pending or len(_pending) >= MAX_PENDING:
            return
        mine = sum(1 for k, (_, _, c) in _pending.items() if k[2] == key[2] and c == client)
        if mine >= PER_CALLER:
            return
        # The build runs as the caller: the auth context goes with it.
        future = _builds.submit(contextvars.copy_context().run, build, **query)  # type: ignore[arg-type]  # mypy: ParamSpec through ParamSpec
        _pending[key] = (now, future, client)


def peek(path: str, query: dict) -> Future | None:
    """The started build for this URL and caller, if fresh, left in place."""
    with _lock:
        hit = _pending.get(_key(path, query))
    if hit is None or time.monotonic() - hit[0] > TTL_S:
        return None
    return hit[1]


def take(path: str, query: dict, build: Future | None = None) -> Future | None:
    """The started build for this URL and caller, if fresh (removed: used once); with
    `build`, only that one (a newer build for the same URL stays)."""
    key = _key(path, query)
    with _lock:
        hit = _pending.get(key)
        if hit is None or (build is not None and hit[1] is not build):
            return None
        del _pending[key]
    return hit[1] if time.monotonic() - hit[0] <= TTL_S else None


def page_url() -> tuple[str, str] | None:
    """(path, search) of the page whose layout is being requested, when its Referer says so."""
    return _page_url.get()


def _referred_page(scope: Scope) -> tuple[str, str] | None:
    referer = next((v for k, v in scope.get("headers", ()) if k == b"referer"), None)
    if referer is None:
        return None
    url = urlsplit(referer.decode("latin-1"))
    if url.path not in pages:
        return None
    return url.path, f"?{url.query}" if url.query else ""


class PrefetchPages:
    """ASGI middleware: a browser's GET of a page's HTML starts that page's layout; Dash's
    layout request learns which page it is for."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"] in pages
            and any(k == b"accept" and b"text/html" in v for k, v in scope.get("headers", ()))
        ):
            client = (scope.get("client") or ("",))[0]
            start(scope["path"], scope["query_string"].decode("latin-1"), client)
        elif scope["type"] == "http" and scope["path"] == LAYOUT_PATH:
            token = _page_url.set(_referred_page(scope))
            try:
                await self.app(scope, receive, send)
            finally:
                _page_url.reset(token)
            return
        await self.app(scope, receive, send)


def reset() -> None:
    """Forget every started build (a new app is mounted)."""
    for _, build, _ in _pending.values():
        build.cancel()
    _pending.clear()
