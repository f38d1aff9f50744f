"""Password hashing with Argon2id (argon2-cffi); older scrypt hashes still verify, and are
replaced at the user's next login."""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from dataclasses import dataclass

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


ARGON2, SCRYPT = "argon2id", "scrypt"  # the kinds of work a check does
LEGACY_PREFIX = "scrypt$"
# The one scrypt setting hashes were written with before Argon2id: N=2^15, r=8, p=1.
_LEGACY_N, _LEGACY_R, _LEGACY_P = 2**15, 8, 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


# Hashes no password matches (random salt and digest), checked when the real work cannot be
# done (no such user, a damaged hash) or to match the other kind's cost. Built at import
# without computing anything: what costs a login's time is checking them, not making them.
_DUMMY_ARGON2 = (
    f"$argon2id$v=19$m={ARGON2_MEMORY_KIB},t={ARGON2_TIME_COST},p={ARGON2_PARALLELISM}"
    f"${_b64(secrets.token_bytes(16))}${_b64(secrets.token_bytes(32))}"
)
_DUMMY_SCRYPT = (
    f"{LEGACY_PREFIX}{_LEGACY_N}${_LEGACY_R}${_LEGACY_P}"
    f"${base64.b64encode(secrets.token_bytes(16)).decode()}"
    f"${base64.b64encode(secrets.token_bytes(64)).decode()}"
)


@dataclass(frozen=True)
class Check:
    """A password check's verdict, and the kinds of hash work it did, in order (what an
    observer's clock sees is the work, not the verdict)."""

    matched: bool
    work: tuple[str, ...]


def _verify_scrypt(password: str, stored: str, work: list[str]) -> bool:
    """The pre-Argon2 format, `scrypt$N$r$p$salt$hash` (salt and hash base64)."""
    try:
        _, n, r, p, salt, digest = stored.split("$")
        params = int(n), int(r), int(p)
        salt_bytes, expected = base64.b64decode(salt), base64.b64decode(digest)
        if not (1 < params[0] <= _SCRYPT_MAX_N and 0 < params[1] <= 32 and 0 < params[2] <= 4):
            raise ValueError("scrypt parameters out of range")
        if not expected:
            raise ValueError("no digest")
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
        # Damaged (or asking for more memory than allowed): the same kind of work anyway,
        # so timing does not tell.
        if stored != _DUMMY_SCRYPT:
            _verify_scrypt(password, _DUMMY_SCRYPT, work)
        return False
    work.append(SCRYPT)
    return hmac.compare_digest(got, expected)


def _verify_argon2(password: str, stored: str, work: list[str]) -> bool:
    try:
        matched: bool = _HASHER.verify(stored, password)
    except InvalidHashError:
        # Unknown user or a damaged hash: do the work anyway, so timing does not tell.
        if stored != _DUMMY_ARGON2:
            _verify_argon2(password, _DUMMY_ARGON2, work)
        return False
    except VerificationError:
        matched = False
    work.append(ARGON2)
    return matched


def check_password(password: str, stored: str | None, legacy_remain: bool = False) -> Check:
    """Check `password` against `stored` (Argon2id, or a legacy scrypt hash; None when there
    is no such user), doing the same kinds of work whatever `stored` is: Argon2id and, while
    any legacy scrypt hash remains in the users table (`legacy_remain`), scrypt too — the
    one for real, the other on a dummy. Otherwise a legacy user's slower check (scrypt,
    ~130 ms, against Argon2id's ~30 ms) would tell an observer which names exist."""
    stored = stored or ""
    work: list[str] = []
    legacy = stored.startswith(LEGACY_PREFIX)
    matched = (
        _verify_scrypt(password, stored, work) if legacy else _verify_argon2(password, stored, work)
    )
    if legacy_remain or legacy:
        if SCRYPT not in work:
            _verify_scrypt(password, _DUMMY_SCRYPT, work)
        if ARGON2 not in work:
            _verify_argon2(password, _DUMMY_ARGON2, work)
    return Check(matched, tuple(work))


def verify_password(password: str, stored: str | None, legacy_remain: bool = False) -> bool:
    """True if `password` matches `stored` (see check_password: the same work whatever it is)."""
    return check_password(password, stored, legacy_remain).matched


def needs_rehash(stored: str) -> bool:
    """Whether a hash that just verified should be replaced: scrypt, or Argon2 with other
    parameters than today's."""
    if not stored.startswith("$argon2id$"):
        return True
    try:
        return _HASHER.check_needs_rehash(stored)
    except InvalidHashError:
        return True
