"""Bearer-token authentication for routes: a dependency per required scope."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from fastapi import HTTPException, Request

from app.storage import tokens
from app.storage.tokens import TokenInfo


def _fail(status: int, message: str) -> HTTPException:
    headers = {"WWW-Authenticate": 'Bearer realm="tokenshape"'} if status == 401 else None
    return HTTPException(status_code=status, detail=message, headers=headers)


CACHE_SECONDS = 2.0


def _cached_lookup(request: Request, token: str) -> TokenInfo | None:
    """Look a token up, remembering live ones briefly: a gateway sends many batches a second.

    Revocation still takes effect within CACHE_SECONDS (and at once for revocations made by
    this process, which clear the cache)."""
    cache: dict[str, tuple[float, TokenInfo]] = request.app.state.token_cache
    key = tokens.hash_token(token)
    now = time.monotonic()
    hit = cache.get(key)
    if hit and now - hit[0] < CACHE_SECONDS:
        return hit[1]
    info = tokens.lookup(request.app.state.db.cursor(), token)
    if info is None:
        cache.pop(key, None)
    else:
        if len(cache) > 10_000:
            cache.clear()
        cache[key] = (now, info)
    return info


def require_scope(scope: str) -> Callable[[Request], Awaitable[TokenInfo]]:
    """A dependency that admits only a live token with `scope` (admin tokens pass too)."""

    # async on purpose: a sync dependency runs in a worker thread, and that hand-off costs
    # more than the lookup, which is a cached dict hit or one indexed point query.
    async def check(request: Request) -> TokenInfo:
        header = request.headers.get("authorization", "")
        kind, _, value = header.partition(" ")
        if kind.lower() != "bearer" or not value.strip():
            raise _fail(
                401,
                "missing bearer token: send 'Authorization: Bearer <token>'; create one with "
                f"`tokenshape token create --gateway NAME --scope {scope}`",
            )
        info = _cached_lookup(request, value.strip())
        if info is None:
            raise _fail(401, "the bearer token is not known or was revoked; create a new one")
        if info.scope != scope and info.scope != "admin":
            raise _fail(
                403,
                f"token {info.display} has the '{info.scope}' scope; this route needs '{scope}'",
            )
        return info

    return check
