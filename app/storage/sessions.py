"""Login sessions (stored by hash, so a copied database holds no usable cookie) and the
server's signing key."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from app.storage.rows import first_row


@dataclass(frozen=True)
class SessionUser:
    """Who a live session belongs to."""

    name: str
    role: str
    expires_at: datetime


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def create(con: duckdb.DuckDBPyConnection, user: str, now: datetime, ttl: timedelta) -> str:
    """A new session id for `user` (returned once; only its hash is stored)."""
    session_id = secrets.token_urlsafe(32)
    con.execute(
        "INSERT INTO sessions (id_hash, user_name, created_at, expires_at) VALUES (?, ?, ?, ?)",
        [_hash(session_id), user, now, now + ttl],
    )
    return session_id


def lookup(con: duckdb.DuckDBPyConnection, session_id: str, now: datetime) -> SessionUser | None:
    """The user of a live session, or None (unknown, expired, or the user was removed)."""
    row = first_row(
        con,
        "SELECT u.name, u.role, s.expires_at FROM sessions s JOIN users u ON u.name = s.user_name "
        "WHERE s.id_hash = ? AND s.expires_at > ?",
        [_hash(session_id), now],
    )
    return SessionUser(*row) if row else None


def end(con: duckdb.DuckDBPyConnection, session_id: str) -> None:
    """Log a session out."""
    con.execute("DELETE FROM sessions WHERE id_hash = ?", [_hash(session_id)])


def prune(con: duckdb.DuckDBPyConnection, now: datetime) -> None:
    """Forget expired sessions."""
    con.execute("DELETE FROM sessions WHERE expires_at <= ?", [now])


def signing_key(con: duckdb.DuckDBPyConnection) -> str:
    """The server's cookie-signing key: made once, kept in the database across restarts."""
    row = first_row(con, "SELECT value FROM server_keys WHERE name = 'session'")
    if row:
        return row[0]
    key = secrets.token_urlsafe(48)
    con.execute(
        "INSERT INTO server_keys (name, value, created_at) VALUES ('session', ?, now()) "
        "ON CONFLICT DO NOTHING",
        [key],
    )
    row = first_row(con, "SELECT value FROM server_keys WHERE name = 'session'")
    assert row is not None
    return row[0]
