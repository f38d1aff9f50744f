"""Bearer-token authentication: a dependency per required scope, and the check itself for
the auth gate in front of /api and /metrics."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from fastapi import HTTPException, Request

from app.auth import state as auth_state
from app.auth.state import AuthState
from app.storage import tokens
from app.storage.tokens import TokenInfo

log = logging.getLogger("tokenshape.auth")

CACHE_SECONDS = 2.0
TOUCH_SECONDS = 60.0  # last_used_at is kept to the minute: one small write per token a minute


class AuthError(Exception):
    """A request's credentials were refused: the status (401/403) and a sentence saying why."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def _touch(state: AuthState, info: TokenInfo) -> None:
    """Record last_used_at off the event loop, at most once a minute per token."""
    touched: dict[str, float] = state.token_touched
    now = time.monotonic()
    if now - touched.get(info.id, -TOUCH_SECONDS) < TOUCH_SECONDS:
        return
    touched[info.id] = now

    def write() -> None:
        try:
            tokens.touch(state.db.cursor(), info.id)
        except Exception as exc:  # a lost timestamp must never fail the request
            log.warning("could not record last use of token %s: %s", info.display, exc)

    try:
        asyncio.get_running_loop().run_in_executor(None, write)
    except RuntimeError:  # no loop (a sync caller): write inline
        write()


def _cached_lookup(state: AuthState, token: str) -> TokenInfo | None:
    """Look a token up, remembering live ones briefly: a gateway sends many batches a second.

    Revocations made through this server (admin page, API) clear the cache, so they take
    effect at once; the CLI can revoke only while the server is stopped."""
    cache: dict[str, tuple[float, TokenInfo]] = state.token_cache
    key = tokens.hash_token(token)
    now = time.monotonic()
    hit = cache.get(key)
    if hit and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    info = tokens.lookup(state.db.cursor(), token)
    if info is None:
        cache.pop(key, None)
    else:
        if len(cache) > 10_000:
            cache.clear()
        cache[key] = (now, info)
    return info


SCOPE_ATTRIBUTE = "tokenshape_scope"  # set on require_scope's dependencies: what a route needs


def scope_refusal(info: TokenInfo, needed: str) -> AuthError:
    """The 403 for a live token whose scope is not the one a route needs."""
    article = "an" if needed[0] in "aeiou" else "a"
    return AuthError(
        403,
        f"this route needs {article} {needed} token; yours has scope {info.scope} "
        f"(token {info.display})",
    )


def check_bearer(
    state: AuthState, header: str, scope: str, route_scope: Callable[[], str] | None = None
) -> TokenInfo:
    """The live token in an Authorization header if it carries `scope` (admin passes
    everywhere, read passes for ingest-only routes never); AuthError otherwise.

    `route_scope`, when given, names what the route itself needs, for the refusal's wording
    (the gate checks `read` in front of admin routes too)."""
    kind, _, value = header.partition(" ")
    if kind.lower() != "bearer" or not value.strip():
        raise AuthError(
            401,
            "missing bearer token: send 'Authorization: Bearer <token>'; create one with "
            f"`tokenshape token create --gateway NAME --scope {scope}`",
        )
    info = _cached_lookup(state, value.strip())
    if info is None:
        raise AuthError(401, "the bearer token is not known or was revoked; create a new one")
    if info.scope != scope and info.scope != "admin":
        raise scope_refusal(info, route_scope() if route_scope else scope)
    _touch(state, info)
    return info


def require_scope(scope: str) -> Callable[[Request], Awaitable[TokenInfo]]:
    """A dependency that admits only a live token with `scope` (admin tokens pass too)."""

    # async on purpose: a sync dependency runs in a worker thread, and that hand-off costs
    # more than the lookup, which is a cached dict hit or one indexed point query.
    async def check(request: Request) -> TokenInfo:
        try:
            return check_bearer(
                auth_state.of(request), request.headers.get("authorization", ""), scope
            )
        except AuthError as exc:
            headers = (
                {"WWW-Authenticate": 'Bearer realm="tokenshape"'} if exc.status == 401 else None
            )
            raise HTTPException(exc.status, exc.message, headers=headers) from None

    setattr(check, SCOPE_ATTRIBUTE, scope)
    return check
