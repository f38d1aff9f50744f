"""Tokens and users: the one place the API, the Admin page, the CLI and the server's first
start create, rotate, revoke, add and remove them (logins and sessions are app.auth's).

A running server passes its AuthState, so a revocation or a user's removal drops the cached
credentials and takes effect with the next request; the CLI (server stopped) passes none."""

from __future__ import annotations

from app.auth.state import AuthState
from app.storage import tokens, users
from app.storage.database import Database
from app.storage.tokens import SCOPES, TokenInfo
from app.storage.users import ROLES, UserExists, UserInfo

__all__ = ["ROLES", "SCOPES", "Credentials", "TokenInfo", "UserExists", "UserInfo"]


class Credentials:
    """Token and user operations on one database."""

    def __init__(self, db: Database, auth: AuthState | None = None):
        self.db = db
        self.auth = auth

    def _forget(self) -> None:
        if self.auth is not None:
            self.auth.forget()

    def tokens(self) -> list[TokenInfo]:
        """Every token, newest first, revoked ones included."""
        return tokens.list_tokens(self.db.cursor())

    def create_token(self, gateway: str, scope: str) -> tuple[str, TokenInfo]:
        """A new token: its plaintext (shown once) and what is stored of it."""
        return tokens.create(self.db.cursor(), gateway, scope)

    def rotate_token(self, token_id: str) -> tuple[str, TokenInfo] | None:
        """Replace a live token by a new one (same gateway, scope); None if none is live."""
        rotated = tokens.rotate(self.db.cursor(), token_id)
        if rotated is not None:
            self._forget()
        return rotated

    def revoke_token(self, token_id: str) -> bool:
        """Revoke a live token; False if there is none with that id."""
        done = tokens.revoke(self.db.cursor(), token_id)
        if done:
            self._forget()
        return done

    def users(self) -> list[UserInfo]:
        """Every dashboard user."""
        return users.list_users(self.db.cursor())

    def user(self, name: str) -> UserInfo | None:
        """One user, or None."""
        return users.get(self.db.cursor(), name)

    def add_user(self, name: str, password: str, role: str) -> UserInfo:
        """Add a user (ValueError names what is wrong with the name, role or password)."""
        return users.add(self.db.cursor(), name, password, role)

    def set_password(self, name: str, password: str) -> bool:
        """Change a user's password and end their sessions; False if there is no such user."""
        done = users.set_password(self.db.cursor(), name, password)
        if done:
            self._forget()
        return done

    def set_role(self, name: str, role: str) -> bool:
        """Change a user's role; False if there is no such user."""
        done = users.set_role(self.db.cursor(), name, role)
        if done:
            self._forget()
        return done

    def remove_user(self, name: str) -> bool:
        """Remove a user; their sessions end at once. False if there is no such user."""
        done = users.remove(self.db.cursor(), name)
        if done:
            self._forget()
        return done
