"""Signed cookie values and the CSRF token derived from a session."""

from __future__ import annotations

import base64
import hashlib
import hmac

SESSION_COOKIE = "tokenshape_session"
CSRF_COOKIE = "_csrf_token"  # the name Dash's renderer reads and echoes as X-CSRFToken
CSRF_HEADER = "x-csrftoken"
LOGIN_COOKIE = "tokenshape_login"


def _mac(key: str, message: str) -> str:
    digest = hmac.new(key.encode(), message.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def sign(key: str, value: str) -> str:
    """`value.signature`."""
    return f"{value}.{_mac(key, 'v|' + value)}"


def unsign(key: str, signed: str | None) -> str | None:
    """The value if the signature matches, else None."""
    value, _, mac = (signed or "").rpartition(".")
    if not value or not hmac.compare_digest(mac, _mac(key, "v|" + value)):
        return None
    return value


def csrf_for(key: str, session_id: str) -> str:
    """The CSRF token that belongs to a session (double-submit: cookie and header)."""
    return _mac(key, "csrf|" + session_id)


def same(a: str | None, b: str | None) -> bool:
    """Constant-time equality of two optional strings."""
    return bool(a) and bool(b) and hmac.compare_digest(str(a), str(b))
