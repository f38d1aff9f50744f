"""What authentication keeps while the server runs: caches, the signing key, the throttle."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from app.auth.throttle import LoginThrottle
from app.config import Settings
from app.storage import sessions
from app.storage.database import Database
from app.storage.passwords import CHECK_MEMORY_BYTES

if TYPE_CHECKING:
    from starlette.requests import HTTPConnection


LOGIN_MEMORY_BYTES = 64 * 1024 * 1024  # for password checks under way: two at a time


@dataclass
class AuthState:
    """Credentials' caches and keys for one running server (one per app, none global)."""

    db: Database
    settings: Settings
    clock: Callable[[], datetime]
    auth_enabled: bool
    warm_up_key: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    signing_key: str = ""  # loaded from the database when the server starts
    token_cache: dict[str, tuple[float, Any]] = field(default_factory=dict)
    token_touched: dict[str, float] = field(default_factory=dict)
    session_cache: dict[str, tuple[float, Any]] = field(default_factory=dict)
    throttle: LoginThrottle = field(default_factory=LoginThrottle)
    # Password checks at once: each holds up to CHECK_MEMORY_BYTES (19 MiB for Argon2id,
    # 32 MiB for a legacy scrypt hash) and a core; a flood of logins must not pile them up.
    login_slots: asyncio.Semaphore = field(
        default_factory=lambda: asyncio.Semaphore(LOGIN_MEMORY_BYTES // CHECK_MEMORY_BYTES)
    )

    def load_signing_key(self) -> None:
        """Read (or create) the session-signing key (at start, once the database is open)."""
        self.signing_key = sessions.signing_key(self.db.cursor())

    def forget(self) -> None:
        """Drop cached tokens and sessions (after a revocation or a user's removal)."""
        # New dicts, not cleared ones: a look-up under way in another thread read the
        # database before the change committed and is about to cache what it found; it took
        # the old dict before its query, so its stale entry lands where nobody looks.
        self.token_cache = {}
        self.session_cache = {}


def of(conn: HTTPConnection) -> AuthState:
    """The running server's AuthState (the Runtime puts it at app.state.runtime.auth)."""
    return conn.app.state.runtime.auth
