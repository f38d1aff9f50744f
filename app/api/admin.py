"""Tokens and users over the API (admin token): list, create, rotate, revoke, remove."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Response
from pydantic import BaseModel, Field

from app.auth.bearer import require_scope
from app.server.deps import CredentialsDep
from app.services.credentials import TokenInfo, UserExists

router = APIRouter(tags=["admin"], dependencies=[Depends(require_scope("admin"))])
_ERRORS: dict[int | str, dict[str, Any]] = {  # FastAPI's type for `responses`
    401: {"description": "Missing, unknown or revoked token."},
    403: {"description": "The token is not an admin token."},
}


class TokenOut(BaseModel):
    """A token as listed: never its secret, only the prefix that identifies it."""

    id: str
    display: str = Field(description="The token's first characters, to recognise it.")
    gateway: str
    scope: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None

    @classmethod
    def of(cls, info: TokenInfo) -> TokenOut:
        """From the store's record."""
        return cls(**info.__dict__)


class TokenIn(BaseModel):
    """A token to create."""

    gateway: str = Field(min_length=1, max_length=128, description="Gateway name it ships as.")
    scope: Literal["ingest", "read", "admin"]


class TokenCreated(BaseModel):
    """A new token: `token` is shown this once and cannot be recovered."""

    token: str
    info: TokenOut


class UserOut(BaseModel):
    """A dashboard user, without the password hash."""

    name: str
    role: str
    created_at: datetime
    last_login_at: datetime | None


class UserIn(BaseModel):
    """A user to add."""

    name: str = Field(min_length=1, max_length=64)
    role: Literal["viewer", "admin"]
    password: str = Field(min_length=10, max_length=1024)


@router.get("/api/tokens", response_model=list[TokenOut], responses=_ERRORS)
def list_tokens(creds: CredentialsDep) -> list[TokenOut]:
    """Every token, newest first, revoked ones included."""
    return [TokenOut.of(t) for t in creds.tokens()]


@router.post("/api/tokens", response_model=TokenCreated, status_code=201, responses=_ERRORS)
def create_token(body: TokenIn, creds: CredentialsDep) -> TokenCreated:
    """Create a token; its plaintext is in this answer only."""
    try:
        plain, info = creds.create_token(body.gateway, body.scope)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return TokenCreated(token=plain, info=TokenOut.of(info))


@router.post(
    "/api/tokens/{token_id}/rotate",
    response_model=TokenCreated,
    responses={**_ERRORS, 404: {"description": "No live token with this id."}},
)
def rotate_token(token_id: str, creds: CredentialsDep) -> TokenCreated:
    """Replace a token by a new one (same gateway and scope); the old one stops at once."""
    rotated = creds.rotate_token(token_id)
    if rotated is None:
        raise HTTPException(404, f"no live token with id {token_id!r}; see GET /api/tokens")
    return TokenCreated(token=rotated[0], info=TokenOut.of(rotated[1]))


@router.delete(
    "/api/tokens/{token_id}",
    status_code=204,
    responses={**_ERRORS, 404: {"description": "No live token with this id."}},
)
def revoke_token(token_id: str, creds: CredentialsDep) -> Response:
    """Revoke a token; it stops working with the next request."""
    if not creds.revoke_token(token_id):
        raise HTTPException(404, f"no live token with id {token_id!r}; see GET /api/tokens")
    return Response(status_code=204)


@router.get("/api/users", response_model=list[UserOut], responses=_ERRORS)
def list_users(creds: CredentialsDep) -> list[UserOut]:
    """Every dashboard user."""
    return [UserOut(**u.__dict__) for u in creds.users()]


@router.post(
    "/api/users",
    response_model=UserOut,
    status_code=201,
    responses=_ERRORS | {409: {"description": "A user of that name exists."}},
)
def add_user(body: UserIn, creds: CredentialsDep) -> UserOut:
    """Add a dashboard user."""
    try:
        user = creds.add_user(body.name, body.password, body.role)
    except UserExists as exc:  # before ValueError, which it is
        raise HTTPException(409, str(exc)) from None
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    return UserOut(**user.__dict__)


@router.delete(
    "/api/users/{name}",
    status_code=204,
    responses={**_ERRORS, 404: {"description": "No such user."}},
)
def remove_user(name: str, creds: CredentialsDep) -> Response:
    """Remove a user; their sessions end at once."""
    if not creds.remove_user(name):
        raise HTTPException(404, f"no user named {name!r}; see GET /api/users")
    return Response(status_code=204)
