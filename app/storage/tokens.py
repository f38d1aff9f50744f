"""API tokens: created once in plaintext, stored only as a SHA-256 hash, scoped, revocable."""

from __future__ import annotations

import hashlib
import secrets
import string
import zlib
from dataclasses import dataclass
from datetime import datetime

import duckdb

from app.storage.rows import first_row, transaction

SCOPES = ("ingest", "read", "admin")
PREFIX = "tks_"
_ALPHABET = string.ascii_letters + string.digits
_BODY_LEN = 32
_CHECK_LEN = 6


@dataclass(frozen=True)
class TokenInfo:
    """What is known about a token without its secret."""

    id: str
    display: str
    gateway: str
    scope: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


def _base62(number: int, width: int) -> str:
    digits = []
    for _ in range(width):
        number, rem = divmod(number, 62)
        digits.append(_ALPHABET[rem])
    return "".join(reversed(digits))


def _checksum(body: str) -> str:
    return _base62(zlib.crc32(body.encode()), _CHECK_LEN)


def well_formed(token: str) -> bool:
    """True if the token has our prefix, length and a matching checksum (no database needed)."""
    if not token.startswith(PREFIX) or len(token) != len(PREFIX) + _BODY_LEN + _CHECK_LEN:
        return False
    body = token[len(PREFIX) : len(PREFIX) + _BODY_LEN]
    return _checksum(body) == token[-_CHECK_LEN:]


def hash_token(token: str) -> str:
    """SHA-256 of the token: tokens are 190 random bits, so a fast hash is safe here."""
    return hashlib.sha256(token.encode()).hexdigest()


def create(con: duckdb.DuckDBPyConnection, gateway: str, scope: str) -> tuple[str, TokenInfo]:
    """Store a new token's hash; returns the plaintext (shown once) and its info."""
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}: choose one of {', '.join(SCOPES)}")
    gateway = gateway.strip()
    if not gateway or len(gateway) > 128:
        raise ValueError("gateway name must be 1 to 128 characters")
    return _insert(con, gateway, scope)


def _insert(con: duckdb.DuckDBPyConnection, gateway: str, scope: str) -> tuple[str, TokenInfo]:
    body = "".join(secrets.choice(_ALPHABET) for _ in range(_BODY_LEN))
    token = PREFIX + body + _checksum(body)
    token_id = body[:8]
    display = f"{PREFIX}{body[:8]}…"
    row = first_row(
        con,
        "INSERT INTO tokens (id, token_hash, display, gateway, scope, created_at) "
        "VALUES (?, ?, ?, ?, ?, now()) RETURNING created_at",
        [token_id, hash_token(token), display, gateway, scope],
    )
    assert row is not None
    return token, TokenInfo(token_id, display, gateway, scope, row[0], None, None)


def _info(row: tuple) -> TokenInfo:
    return TokenInfo(*row)


_COLUMNS = "id, display, gateway, scope, created_at, last_used_at, revoked_at"


def lookup(con: duckdb.DuckDBPyConnection, token: str) -> TokenInfo | None:
    """The live (not revoked) token with this plaintext, or None."""
    if not well_formed(token):
        return None
    row = first_row(
        con,
        f"SELECT {_COLUMNS} FROM tokens WHERE token_hash = ? AND revoked_at IS NULL",
        [hash_token(token)],
    )
    return _info(row) if row else None


def list_tokens(con: duckdb.DuckDBPyConnection) -> list[TokenInfo]:
    """All tokens, newest first, revoked ones included."""
    rows = con.execute(f"SELECT {_COLUMNS} FROM tokens ORDER BY created_at DESC").fetchall()
    return [_info(r) for r in rows]


def _id_of(token_id: str) -> str:
    """A token's id from its id or its displayed prefix (`tks_abcdefgh…`)."""
    return token_id.removeprefix(PREFIX).rstrip("…")[:8]


def revoke(con: duckdb.DuckDBPyConnection, token_id: str) -> bool:
    """Revoke by id (or by display prefix); False if no live token matched (a concurrent
    revoke or rotation that won counts: the token is not live)."""
    token_id = _id_of(token_id)
    return transaction(
        con,
        lambda c: (
            first_row(
                c,
                "UPDATE tokens SET revoked_at = now() WHERE id = ? AND revoked_at IS NULL "
                "RETURNING id",
                [token_id],
            )
            is not None
        ),
    )


def rotate(con: duckdb.DuckDBPyConnection, token_id: str) -> tuple[str, TokenInfo] | None:
    """Replace a live token by a new one with the same gateway and scope, in one transaction
    whose condition is the old token being live: of racing rotations (or a rotation and a
    revoke) one wins and the others find nothing live. None if no live token matched."""
    token_id = _id_of(token_id)

    def work(c: duckdb.DuckDBPyConnection) -> tuple[str, TokenInfo] | None:
        row = first_row(
            c,
            "UPDATE tokens SET revoked_at = now() WHERE id = ? AND revoked_at IS NULL "
            "RETURNING gateway, scope",
            [token_id],
        )
        return None if row is None else _insert(c, row[0], row[1])

    return transaction(con, work)


def touch(con: duckdb.DuckDBPyConnection, token_id: str) -> None:
    """Record that a token was just used."""
    con.execute("UPDATE tokens SET last_used_at = now() WHERE id = ?", [token_id])
