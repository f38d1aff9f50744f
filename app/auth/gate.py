"""The auth gate: an ASGI middleware that decides, per path, what a request must show.

- `/v1/...` ingest routes check their own `ingest` bearer tokens;
- `/api/...` and `/metrics` need a `read` (or `admin`) bearer token, or a login session;
- every dashboard page and Dash request needs a login session; pages redirect to /login,
  Dash's own requests get 401; state-changing requests must echo the session's CSRF token;
- static files, the login page, /api/health and the OpenAPI schema are public.

When auth is off (a loopback demo), everyone is let in and pages say so."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import datetime
from urllib.parse import quote

from fastapi.routing import iter_route_contexts
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.auth import cookies, principal
from app.auth.bearer import SCOPE_ATTRIBUTE, AuthError, check_bearer
from app.auth.principal import Principal
from app.auth.state import AuthState
from app.config import is_loopback
from app.storage import sessions

PUBLIC_PATHS = frozenset(
    {
        "/login",
        "/logout",
        "/api/health",
        "/openapi.json",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/_favicon.ico",
        "/favicon.ico",
    }
)
PUBLIC_PREFIXES = ("/assets/", "/_dash-component-suites/")
INGEST_PATHS = frozenset({"/v1/requests", "/v1/litellm", "/v1/traces", "/v1/logs"})
# Routes that check their own bearer tokens: ingest, and the lake rollups pushed between nodes.
SELF_AUTH_PATHS = INGEST_PATHS | {"/v1/rollups"}
PROXY_HEADERS = ("forwarded", "x-forwarded-for", "x-forwarded-host", "x-real-ip")
WARM_UP_HEADER = "x-tokenshape-warm-up"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
SESSION_CACHE_SECONDS = 2.0


def session_principal(
    state: AuthState, signed: str | None, now: datetime
) -> tuple[Principal, str] | None:
    """The user behind a session cookie and the session id, or None."""
    session_id = cookies.unsign(state.signing_key, signed)
    if session_id is None:
        return None
    cache: dict[str, tuple[float, Principal]] = state.session_cache
    hit = cache.get(session_id)
    mono = time.monotonic()
    if hit and mono - hit[0] < SESSION_CACHE_SECONDS:
        return hit[1], session_id
    user = sessions.lookup(state.db.cursor(), session_id, now)
    if user is None:
        cache.pop(session_id, None)
        return None
    who = Principal(
        user.name, user.role, "session", cookies.csrf_for(state.signing_key, session_id)
    )
    if len(cache) > 10_000:
        cache.clear()
    cache[session_id] = (mono, who)
    return who, session_id


def _kind(path: str) -> str:
    if path in SELF_AUTH_PATHS:
        return "ingest"
    if path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES):
        return "public"
    if path.startswith("/api/") or path == "/metrics":
        return "api"
    return "dashboard"


def route_scope(scope: Scope, default: str = "read") -> str:
    """The token scope the route serving this request declares (through require_scope), for
    a refusal's wording; `default` when it declares none or no route matches."""
    for route in iter_route_contexts(getattr(scope.get("app"), "routes", ())):
        regex, methods = getattr(route, "path_regex", None), route.methods
        if regex is None or not regex.match(scope["path"]):
            continue
        if methods and scope["method"] not in methods:
            continue
        pending = list(getattr(getattr(route, "dependant", None), "dependencies", ()))
        while pending:
            dependency = pending.pop()
            needed = getattr(dependency.call, SCOPE_ATTRIBUTE, None)
            if needed:
                return str(needed)
            pending.extend(dependency.dependencies)
        return default
    return default


def _json(status: int, message: str, bearer: bool = False) -> JSONResponse:
    headers = {"WWW-Authenticate": 'Bearer realm="tokenshape"'} if bearer else None
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


DASH_UPDATE = "/_dash-update-component"
MAX_CALLBACK_BODY = 8 * 1024 * 1024


def _admin_callback(body: bytes, admin_outputs: frozenset[str]) -> bool:
    """Whether a Dash callback request writes to an admin-only component."""
    try:
        outputs = json.loads(body).get("output", "")
    except (ValueError, AttributeError):
        return False  # Dash itself answers a malformed body
    ids = {part.strip(".").rsplit(".", 1)[0] for part in str(outputs).split("...")}
    return not ids.isdisjoint(admin_outputs)


class AuthGate:
    """Admits or refuses each HTTP request before it reaches a route (see module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        state: AuthState,
        enabled: bool,
        open_role: str,
        clock: Callable[[], datetime],
        admin_pages: frozenset[str] = frozenset(),
        admin_outputs: frozenset[str] = frozenset(),
        loopback_only: bool = False,
    ):
        self.app = app
        self.state = state
        self.enabled = enabled
        self.open = Principal("everyone", open_role, "open")
        self.clock = clock
        self.admin_pages = admin_pages
        self.admin_outputs = admin_outputs
        self.loopback_only = loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "websocket":
            # No page uses Dash's websocket callbacks; refuse the handshake rather than run
            # one without a principal.
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        who, refusal = self._admit(scope)
        if refusal is None and who is not None and not who.is_admin:
            refusal, receive = await self._admin_only(scope, receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        token = principal.set_current(who)
        try:
            await self.app(scope, receive, send)
        finally:
            principal.reset(token)

    @staticmethod
    def _from_this_machine(request: Request) -> bool:
        """Open mode's guard: a loopback client, naming a loopback host, with no proxy between.

        A proxy in front of a loopback bind, or a web page that rebinds its DNS name to
        127.0.0.1, would otherwise make whoever is behind them an admin."""
        host = (request.headers.get("host") or "").lower()
        name = host[1:].split("]")[0] if host.startswith("[") else host.rsplit(":", 1)[0]
        client = request.client.host if request.client else ""
        return (
            is_loopback(name)
            and is_loopback(client)
            and not any(h in request.headers for h in PROXY_HEADERS)
        )

    async def _admin_only(self, scope: Scope, receive: Receive) -> tuple[Response | None, Receive]:
        """403 for a non-admin asking for an admin page or an admin callback.

        The pages and callbacks refuse too; this makes the refusal a plain 403 before any of
        their code runs. A callback body is read here and handed on unchanged."""
        path = scope["path"]
        if scope["method"] == "GET" and path in self.admin_pages:
            return _json(403, "this page is for admins only"), receive
        if path != DASH_UPDATE or scope["method"] != "POST" or not self.admin_outputs:
            return None, receive
        body = bytearray()
        more = True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return None, receive  # the client went away; let the app see it
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_CALLBACK_BODY:
                return _json(413, "the callback request is too large"), receive
        if _admin_callback(bytes(body), self.admin_outputs):
            return _json(403, "only admins can change this; ask an admin"), receive
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if sent:
                return await receive()
            sent = True
            return {"type": "http.request", "body": bytes(body), "more_body": False}

        return None, replay

    def _admit(self, scope: Scope) -> tuple[Principal | None, Response | None]:
        """(who, None) to let the request through, or (None, a response) to refuse it."""
        request = Request(scope)
        path, method = scope["path"], scope["method"]
        kind = _kind(path)
        if kind == "ingest" or path.startswith(PUBLIC_PREFIXES):
            # Ingest routes check their own `ingest` tokens; static files are for anyone, and
            # a page load fetches a dozen of them: no session look-up for those.
            return None, None
        if cookies.same(request.headers.get(WARM_UP_HEADER), self.state.warm_up_key):
            return Principal("warm-up", "viewer", "open"), None
        if not self.enabled:
            if self.loopback_only and not self._from_this_machine(request):
                if kind == "public":
                    return None, None  # health, static files: served, as to anyone
                return None, _json(
                    403,
                    "this server runs without logins, so it answers only to this machine: open "
                    "it as http://127.0.0.1:<port>/ (not through a proxy or another host name), "
                    "or set TOKENSHAPE_AUTH=on and add users",
                )
            return self.open, None
        found = session_principal(
            self.state, request.cookies.get(cookies.SESSION_COOKIE), self.clock()
        )
        who = found[0] if found else None
        if kind == "public":
            header = request.headers.get("authorization")
            if who is None and header and path.startswith("/api/"):
                try:  # /api/health: open, but shows more to a caller who may read
                    info = check_bearer(self.state, header, "read")
                    who = Principal(f"token {info.display}", "viewer", "token")
                except AuthError:
                    pass
            return who, None
        if kind == "api":
            header = request.headers.get("authorization")
            if header:
                # A change needs the route's own scope here, before its body is read (FastAPI
                # parses the body before the route's dependencies check the token).
                needed = "read" if method in SAFE_METHODS else route_scope(scope)
                try:
                    info = check_bearer(
                        self.state,
                        header,
                        "admin" if needed == "admin" else "read",
                        route_scope=lambda: route_scope(scope),
                    )
                except AuthError as exc:
                    return None, _json(exc.status, exc.message, exc.status == 401)
                role = "admin" if info.scope == "admin" else "viewer"
                return Principal(f"token {info.display}", role, "token"), None
            if who is not None and method in SAFE_METHODS:
                return who, None
            return None, _json(
                401,
                "authentication required: send 'Authorization: Bearer <token>' with a token of "
                "the 'read' scope (`tokenshape token create --gateway NAME --scope read`), or "
                "log in at /login",
                bearer=True,
            )
        if who is None:
            if method == "GET" and not path.startswith("/_"):
                query = scope["query_string"].decode()
                target = path + (f"?{query}" if query else "")
                return None, RedirectResponse(f"/login?next={quote(target, safe='')}", 303)
            return None, _json(401, "your session has ended: log in again at /login")
        if method not in SAFE_METHODS and not cookies.same(
            request.headers.get(cookies.CSRF_HEADER), who.csrf
        ):
            return None, _json(
                403, "the request lacks this session's CSRF token: reload the page and retry"
            )
        return who, None
