"""Password hashing with scrypt, a memory-hard KDF from the standard library."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets

# 2^15 × 8 × 128 B = 32 MiB per hash: guessing on GPUs stays expensive, a login ~0.1 s.
_N, _R, _P = 2**15, 8, 1
_MAXMEM = 64 * 1024 * 1024
MIN_LENGTH = 10


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def check_strength(password: str) -> None:
    """Refuse passwords too short to resist guessing."""
    if len(password) < MIN_LENGTH:
        raise ValueError(f"the password must have at least {MIN_LENGTH} characters")


def hash_password(password: str) -> str:
    """`scrypt$N$r$p$salt$hash`, salt and hash base64."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, n=_N, r=_R, p=_P, maxmem=_MAXMEM)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_password(password: str, stored: str | None) -> bool:
    """True if `password` matches `stored`; spends the same work when there is no user."""
    try:
        kind, n, r, p, salt, digest = (stored or "").split("$")
        assert kind == "scrypt"
        params = int(n), int(r), int(p)
        salt_bytes, expected = base64.b64decode(salt), base64.b64decode(digest)
    except (ValueError, AssertionError):
        # Unknown user or a damaged hash: do the work anyway, so timing does not tell.
        hashlib.scrypt(password.encode(), salt=b"0" * 16, n=_N, r=_R, p=_P, maxmem=_MAXMEM)
        return False
    got = hashlib.scrypt(
        password.encode(), salt=salt_bytes, n=params[0], r=params[1], p=params[2], maxmem=_MAXMEM
    )
    return hmac.compare_digest(got, expected)
