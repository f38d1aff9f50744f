"""Signed cookie values, the CSRF token derived from a session, and device cookies."""

from __future__ import annotations

import base64
import hashlib
import hmac

SESSION_COOKIE = "tokenshape_session"
CSRF_COOKIE = "_csrf_token"  # the name Dash's renderer reads and echoes as X-CSRFToken
CSRF_HEADER = "x-csrftoken"
LOGIN_COOKIE = "tokenshape_login"
# Set by a successful login, bound to its user name: that browser's later tries for that
# name are throttled on their own, not with the account's (see app/auth/throttle).
DEVICE_COOKIE = "tokenshape_device"
DEVICE_COOKIE_MAX_AGE = 365 * 24 * 3600


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


def _b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def device_cookie(key: str, name: str, device_id: str) -> str:
    """`device_id.name-in-base64.signature`: a device cookie for user `name` (device_id from
    secrets.token_urlsafe: no dots). Signed apart from sessions, so one is never the other."""
    value = f"{device_id}.{_b64(name)}"
    return f"{value}.{_mac(key, 'device|' + value)}"


def device_of(key: str, signed: str | None, name: str) -> str | None:
    """The device id of a validly signed device cookie for exactly this user name, else None."""
    parts = (signed or "").split(".")
    if len(parts) != 3 or not name or not all(parts):
        return None
    device_id, owner, mac = parts
    value = f"{device_id}.{owner}"
    if not hmac.compare_digest(mac, _mac(key, "device|" + value)):
        return None
    return device_id if hmac.compare_digest(owner, _b64(name)) else None
