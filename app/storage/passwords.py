"""Password hashing with Argon2id (argon2-cffi); older scrypt hashes still verify, and are
replaced at the user's next login."""

from __future__ import annotations

import base64
import functools
import hashlib
import hmac

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

# OWASP Password Storage Cheat Sheet (cheatsheetseries.owasp.org, "Argon2id"): "a minimum
# configuration of 19 MiB of memory, an iteration count of 2, and 1 degree of parallelism" —
# its first listed option. ~50 ms a check on one core; 19 MiB held while it runs.
ARGON2_MEMORY_KIB = 19 * 1024
ARGON2_TIME_COST = 2
ARGON2_PARALLELISM = 1
_HASHER = PasswordHasher(
    time_cost=ARGON2_TIME_COST,
    memory_cost=ARGON2_MEMORY_KIB,
    parallelism=ARGON2_PARALLELISM,
    hash_len=32,
    salt_len=16,
)
# The largest a check may hold: Argon2id's 19 MiB, or 32 MiB for a legacy scrypt hash
# (N=2^15, r=8: 128 × N × r bytes). The login route sizes its concurrency by this.
CHECK_MEMORY_BYTES = 32 * 1024 * 1024
_SCRYPT_MAXMEM = 64 * 1024 * 1024
_SCRYPT_MAX_N = 2**20  # a stored hash asking for more is damaged, not legacy
MIN_LENGTH = 10


def check_strength(password: str) -> None:
    """Refuse passwords too short to resist guessing."""
    if len(password) < MIN_LENGTH:
        raise ValueError(f"the password must have at least {MIN_LENGTH} characters")


def hash_password(password: str) -> str:
    """An Argon2id hash in PHC form: `$argon2id$v=19$m=19456,t=2,p=1$salt$hash`."""
    return _HASHER.hash(password)


@functools.cache
def _dummy_hash() -> str:
    """A hash to check against when there is no user, so timing does not tell."""
    return _HASHER.hash("no such user: the work is done anyway")


def _verify_scrypt(password: str, stored: str) -> bool:
    """The pre-Argon2 format, `scrypt$N$r$p$salt$hash` (salt and hash base64)."""
    try:
        _, n, r, p, salt, digest = stored.split("$")
        params = int(n), int(r), int(p)
        salt_bytes, expected = base64.b64decode(salt), base64.b64decode(digest)
        if not (1 < params[0] <= _SCRYPT_MAX_N and 0 < params[1] <= 32 and 0 < params[2] <= 4):
            raise ValueError("scrypt parameters out of range")
        got = hashlib.scrypt(
            password.encode(),
            salt=salt_bytes,
            n=params[0],
            r=params[1],
            p=params[2],
            maxmem=_SCRYPT_MAXMEM,
            dklen=len(expected),
        )
    except ValueError:
        _verify_argon2(password, _dummy_hash())
        return False
    return hmac.compare_digest(got, expected)


def _verify_argon2(password: str, stored: str) -> bool:
    try:
        return _HASHER.verify(stored, password)
    except VerificationError:
        return False


def verify_password(password: str, stored: str | None) -> bool:
    """True if `password` matches `stored` (Argon2id, or a legacy scrypt hash); spends the
    same work when there is no user or the hash is damaged."""
    stored = stored or ""
    if stored.startswith("scrypt$"):
        return _verify_scrypt(password, stored)
    try:
        return _verify_argon2(password, stored)
    except InvalidHashError:
        # Unknown user or a damaged hash: do the work anyway, so timing does not tell.
        _verify_argon2(password, _dummy_hash())
        return False


def needs_rehash(stored: str) -> bool:
    """Whether a hash that just verified should be replaced: scrypt, or Argon2 with other
    parameters than today's."""
    if not stored.startswith("$argon2id$"):
        return True
    try:
        return _HASHER.check_needs_rehash(stored)
    except InvalidHashError:
        return True
