"""Bearer-token authentication for routes: a dependency per required scope."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import HTTPException, Request

from app.storage import tokens
from app.storage.tokens import TokenInfo


def _fail(status: int, message: str) -> HTTPException:
    headers = {"WWW-Authenticate": 'Bearer realm="tokenshape"'} if status == 401 else None
    return HTTPException(status_code=status, detail=message, headers=headers)


def require_scope(scope: str) -> Callable[[Request], TokenInfo]:
    """A dependency that admits only a live token with `scope` (admin tokens pass too)."""

    def check(request: Request) -> TokenInfo:
        header = request.headers.get("authorization", "")
        kind, _, value = header.partition(" ")
        if kind.lower() != "bearer" or not value.strip():
            raise _fail(
                401,
                "missing bearer token: send 'Authorization: Bearer <token>'; create one with "
                f"`tokenshape token create --gateway NAME --scope {scope}`",
            )
        info = tokens.lookup(request.app.state.db.cursor(), value.strip())
        if info is None:
            raise _fail(401, "the bearer token is not known or was revoked; create a new one")
        if info.scope != scope and info.scope != "admin":
            raise _fail(
                403,
                f"token {info.display} has the '{info.scope}' scope; this route needs '{scope}'",
            )
        return info

    return check
