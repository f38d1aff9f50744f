"""The ingest lane: gateways' POSTs go straight to their route's handler, past the layers
that exist for the dashboard.

Each ingest request used to pass the auth gate (which lets ingest routes check their own
tokens), the page prefetcher, Dash's middleware, FastAPI's exception and exit-stack layers, a
router holding every page and API route, and dependency solving: ~0.65 ms of the event loop per
request, measured, a tenth of a 1,000-record batch's whole time there. This middleware sits
inside the metrics middleware (responses are counted as before) and in front of the rest. It
calls the very handler the route declares, with the same dependencies, token check and error
answers, so `/openapi.json` still documents what answers; anything else goes the long way.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from app.auth.bearer import require_scope
from app.server.deps import get_clock, get_settings, get_writer

# What every ingest handler takes, in order; `routes_for` refuses any other signature.
PARAMETERS = ("request", "settings", "writer", "clock", "token")
Endpoint = Callable[..., Awaitable[Response]]


def routes_for(router: APIRouter, paths: frozenset[str]) -> dict[str, tuple[APIRoute, Endpoint]]:
    """The router's POST route for each path, with its handler (checked to take PARAMETERS).

    The router is the one the app includes without a prefix (FastAPI's app nests included
    routers in private wrappers, so their routes are looked up where they are declared)."""
    found: dict[str, tuple[APIRoute, Endpoint]] = {}
    for route in router.routes:
        if isinstance(route, APIRoute) and route.path in paths and "POST" in route.methods:  # type: ignore[operator]  # an APIRoute's methods are a set
            names = tuple(inspect.signature(route.endpoint).parameters)
            if names != PARAMETERS:
                raise TypeError(f"{route.path}: the ingest lane calls {PARAMETERS}, not {names}")
            if route.dependencies:  # the lane would skip them
                raise TypeError(f"{route.path}: the ingest lane runs no route dependencies")
            found[route.path] = (route, route.endpoint)
    missing = paths - found.keys()
    if missing:
        raise LookupError(f"no POST route for {sorted(missing)}")
    return found


class IngestLane:
    """Pure ASGI middleware: POSTs to the ingest paths go to their handlers directly."""

    def __init__(self, app: ASGIApp, *, router: APIRouter, paths: frozenset[str]):
        self.app = app
        self.paths = paths
        self.routes = routes_for(router, paths)
        self.check_token = require_scope("ingest")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths:
            await self.app(scope, receive, send)
            return
        if scope["method"] != "POST":
            # Else Dash's catch-all would answer a GET here with its page shell and a 200.
            answer = JSONResponse(
                {"detail": f"{scope['path']} takes POST only (a gateway ships records to it)"},
                405,
                headers={"Allow": "POST"},
            )
            await answer(scope, receive, send)
            return
        route, endpoint = self.routes[scope["path"]]
        scope["route"] = route  # the metrics' route label, as the router would set it
        scope["endpoint"] = endpoint
        request = Request(scope, receive)
        try:
            response = await self._answer(request, endpoint)
        except StarletteHTTPException as exc:
            # What FastAPI's exception layer does: the app's own handler words the answer.
            # Anything else propagates to the server-error handler, as from the route.
            handler: Any = request.app.exception_handlers[StarletteHTTPException]
            response = await handler(request, exc)
        await response(scope, receive, send)

    async def _answer(self, request: Request, endpoint: Endpoint) -> Response:
        """The handler's answer, its dependencies resolved as the route resolves them."""
        token = await self.check_token(request)  # HTTPException: 401 or 403
        return await endpoint(
            request,
            await get_settings(request),
            await get_writer(request),
            await get_clock(request),
            token,
        )
