"""Dashboard users: a name, a role (viewer or admin) and a password hash (Argon2id; older
scrypt hashes are replaced at the next login)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime

import duckdb

from app.storage.passwords import (
    LEGACY_PREFIX,
    check_strength,
    hash_password,
    needs_rehash,
    verify_password,
)
from app.storage.rows import first_row, transaction

log = logging.getLogger(__name__)

ROLES = ("viewer", "admin")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


@dataclass(frozen=True)
class UserInfo:
    """A user without the password hash."""

    name: str
    role: str
    created_at: datetime
    last_login_at: datetime | None


def login_key(name: str) -> str:
    """The name a login attempt counts against: names match exactly (as stored), and every
    name no account can have shares one key, so junk names cannot fill memory."""
    name = name.strip()
    return name if _NAME.match(name) else ""


def _check(name: str, role: str) -> None:
    if not _NAME.match(name):
        raise ValueError(
            f"user name {name!r}: use 1-64 letters, digits, '.', '_', '@' or '-', "
            "starting with a letter or digit"
        )
    if role not in ROLES:
        raise ValueError(f"unknown role {role!r}: choose viewer or admin")


class UserExists(ValueError):
    """A user of that name exists already (perhaps created a moment ago by a concurrent add)."""

    def __init__(self, name: str):
        super().__init__(
            f"user {name!r} already exists; change it with `tokenshape user passwd` or the "
            "Admin page"
        )


def add(con: duckdb.DuckDBPyConnection, name: str, password: str, role: str) -> UserInfo:
    """Create a user; ValueError naming the problem if the name, role or password is unfit,
    UserExists if the name is taken (the primary key decides between concurrent adds)."""
    _check(name, role)
    check_strength(password)
    hashed = hash_password(password)
    try:
        row = transaction(
            con,
            lambda c: first_row(
                c,
                "INSERT INTO users (name, password_hash, role, created_at) "
                "VALUES (?, ?, ?, now()) RETURNING created_at",
                [name, hashed, role],
            ),
        )
    except duckdb.ConstraintException:
        raise UserExists(name) from None
    assert row is not None
    return UserInfo(name, role, row[0], None)


def get(con: duckdb.DuckDBPyConnection, name: str) -> UserInfo | None:
    """The user with this name, or None."""
    row = first_row(
        con, "SELECT name, role, created_at, last_login_at FROM users WHERE name = ?", [name]
    )
    return UserInfo(*row) if row else None


def list_users(con: duckdb.DuckDBPyConnection) -> list[UserInfo]:
    """Every user, by name."""
    rows = con.execute(
        "SELECT name, role, created_at, last_login_at FROM users ORDER BY name"
    ).fetchall()
    return [UserInfo(*r) for r in rows]


def authenticate(con: duckdb.DuckDBPyConnection, name: str, password: str) -> UserInfo | None:
    """The user if the password matches (and records the login), else None."""
    row = first_row(con, "SELECT password_hash FROM users WHERE name = ?", [name])
    stored = row[0] if row else None
    if not verify_password(password, stored, legacy_remain=legacy_remain(con)):
        return None
    _record_login(con, name, password, stored)
    return get(con, name)


def legacy_remain(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether any user still has a legacy scrypt hash: then every login check, a name's or
    not, does scrypt's work too (see passwords.check_password). Counted at each login, not
    cached: a count over a table of people costs less than a cache that could go stale."""
    row = first_row(
        con, "SELECT count(*) FROM users WHERE starts_with(password_hash, ?)", [LEGACY_PREFIX]
    )
    return bool(row and row[0])


def _record_login(
    con: duckdb.DuckDBPyConnection, name: str, password: str, stored: str | None
) -> None:
    """Best-effort bookkeeping after a verified password: the rehash and last_login_at.

    Two logins of one user at once update the same row, and DuckDB refuses the second
    writer ("Conflict on update!"); the password was right all the same, so that login must
    neither fail nor count as a failure. The rehash's compare-and-swap still guards against
    a password changed meanwhile; a skipped rehash happens at the next login."""
    if stored and needs_rehash(stored):
        # An older hash (scrypt, or weaker Argon2 parameters) is replaced now that the
        # password is at hand; only if it is still the one checked (no change meanwhile).
        _best_effort(
            con,
            "UPDATE users SET password_hash = ? WHERE name = ? AND password_hash = ?",
            [hash_password(password), name, stored],
            "rehash",
        )
    _best_effort(
        con, "UPDATE users SET last_login_at = now() WHERE name = ?", [name], "last_login_at"
    )


def _best_effort(con: duckdb.DuckDBPyConnection, sql: str, values: list, what: str) -> None:
    try:
        con.execute(sql, values)
    except duckdb.TransactionException as exc:
        log.info("login bookkeeping (%s) skipped, a concurrent write won: %s", what, exc)


def set_password(con: duckdb.DuckDBPyConnection, name: str, password: str) -> bool:
    """Change a password and end the user's sessions; False if there is no such user."""
    check_strength(password)
    hashed = hash_password(password)
    return transaction(
        con,
        lambda c: _end_sessions_after(
            c,
            "UPDATE users SET password_hash = ? WHERE name = ? RETURNING name",
            [hashed, name],
            name,
        ),
    )


def set_role(con: duckdb.DuckDBPyConnection, name: str, role: str) -> bool:
    """Change a role and end the user's sessions; False if there is no such user."""
    _check(name, role)
    return transaction(
        con,
        lambda c: _end_sessions_after(
            c, "UPDATE users SET role = ? WHERE name = ? RETURNING name", [role, name], name
        ),
    )


def remove(con: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Delete a user and their sessions; False if there is no such user."""

    def work(c: duckdb.DuckDBPyConnection) -> bool:
        c.execute("DELETE FROM sessions WHERE user_name = ?", [name])
        return first_row(c, "DELETE FROM users WHERE name = ? RETURNING name", [name]) is not None

    return transaction(con, work)


def _end_sessions_after(c: duckdb.DuckDBPyConnection, sql: str, values: list, name: str) -> bool:
    """Change a user (`sql` RETURNING name) and end their sessions, in the caller's transaction."""
    changed = first_row(c, sql, values) is not None
    c.execute("DELETE FROM sessions WHERE user_name = ?", [name])
    return changed
