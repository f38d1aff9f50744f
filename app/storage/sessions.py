"""Login sessions (stored by hash, so a copied database holds no usable cookie) and the
server's signing key."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

import duckdb

from app.storage import users
from app.storage.rows import first_row, transaction


@dataclass(frozen=True)
class SessionUser:
    """Who a live session belongs to."""

    name: str
    role: str
    expires_at: datetime


def _hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


def credential(con: duckdb.DuckDBPyConnection, name: str) -> str | None:
    """The password hash a login of `name` is checked against now (None: no such user)."""
    row = first_row(con, "SELECT password_hash FROM users WHERE name = ?", [name])
    return row[0] if row else None


def create(
    con: duckdb.DuckDBPyConnection, user: str, checked: str | None, now: datetime, ttl: timedelta
) -> str | None:
    """A new session id for `user` (returned once; only its hash is stored), or None when
    `checked`, the password hash the login was verified against, is no longer the user's
    (the password changed or the user was removed since).

    One transaction whose condition is in its statement, and which writes the user's row
    (last_login_at): a password change or a removal writes that row too, so DuckDB lets
    only one of them go first and the other is retried after it. Either the login commits
    first and the change ends its session with the others, or the change commits first and
    the login finds the hash gone: never a session the change missed."""
    session_id = secrets.token_urlsafe(32)

    def work(c: duckdb.DuckDBPyConnection) -> str | None:
        still = first_row(
            c,
            "UPDATE users SET last_login_at = ? WHERE name = ? AND password_hash = ? "
            "RETURNING name",
            [now, user, checked],
        )
        if still is None:
            return None
        c.execute(
            "INSERT INTO sessions (id_hash, user_name, created_at, expires_at) VALUES (?, ?, ?, ?)",
            [_hash(session_id), user, now, now + ttl],
        )
        return session_id

    return transaction(con, work)


LOGIN_TRIES = 3


def log_in(
    con: duckdb.DuckDBPyConnection, name: str, password: str, now: datetime, ttl: timedelta
) -> tuple[users.UserInfo, str] | None:
    """Check a password and start a session: (the user, the new session id), or None when
    the name or password is wrong (or the account changed under every try).

    The hash is read before the check, and the session is made only if that hash is still
    the user's (see `create`). When it is not (this very login replaced an old-format hash,
    or someone changed the password meanwhile), the password is checked again against the
    new one: a login with a password that no longer holds never gets a session."""
    for _ in range(LOGIN_TRIES):
        checked = credential(con, name)
        user = users.authenticate(con, name, password)
        if user is None:
            return None
        session_id = create(con, user.name, checked, now, ttl)
        if session_id is not None:
            return user, session_id
    return None


def lookup(con: duckdb.DuckDBPyConnection, session_id: str, now: datetime) -> SessionUser | None:
    """The user of a live session, or None (unknown, expired, or the user was removed)."""
    row = first_row(
        con,
        "SELECT u.name, u.role, s.expires_at FROM sessions s JOIN users u ON u.name = s.user_name "
        "WHERE s.id_hash = ? AND s.expires_at > ?",
        [_hash(session_id), now],
    )
    return SessionUser(*row) if row else None


def end(con: duckdb.DuckDBPyConnection, session_id: str) -> bool:
    """Log a session out; False when it had ended already (a racing logout, the user's
    removal or a password change won: retried on the write conflict, it finds nothing)."""
    return transaction(
        con,
        lambda c: (
            first_row(
                c, "DELETE FROM sessions WHERE id_hash = ? RETURNING id_hash", [_hash(session_id)]
            )
            is not None
        ),
    )


def prune(con: duckdb.DuckDBPyConnection, now: datetime) -> None:
    """Forget expired sessions (racing prunes and logouts delete the same rows: retried)."""
    transaction(con, lambda c: c.execute("DELETE FROM sessions WHERE expires_at <= ?", [now]))


def signing_key(con: duckdb.DuckDBPyConnection) -> str:
    """The server's cookie-signing key: made once, kept in the database across restarts.

    Of concurrent first reads, one inserts; the others' inserts meet its key (a duplicate
    at the INSERT or the COMMIT), and their retry reads it: every caller gets the one key."""

    def work(c: duckdb.DuckDBPyConnection) -> str:
        row = first_row(c, "SELECT value FROM server_keys WHERE name = 'session'")
        if row:
            return row[0]
        key = secrets.token_urlsafe(48)
        c.execute(
            "INSERT INTO server_keys (name, value, created_at) VALUES ('session', ?, now())",
            [key],
        )
        return key

    return transaction(con, work, retry_duplicates=True)
