"""Password hashes (app/storage/passwords): Argon2id at OWASP's parameters, legacy scrypt
hashes still verify and are marked for a rehash, damaged hashes never match."""

from __future__ import annotations

import base64
import hashlib

import pytest

from app.storage import passwords


def legacy_scrypt(password: str, salt: bytes = b"s" * 16) -> str:
    """A hash in the format stored before Argon2id (scrypt, N=2^15, r=8, p=1)."""
    digest = hashlib.scrypt(password.encode(), salt=salt, n=2**15, r=8, p=1, maxmem=64 << 20)
    b64 = base64.b64encode
    return f"scrypt${2**15}$8$1${b64(salt).decode()}${b64(digest).decode()}"


def test_new_hashes_are_argon2id_at_owasps_parameters():
    stored = passwords.hash_password("correct horse battery")
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert passwords.hash_password("correct horse battery") != stored  # salted
    assert passwords.verify_password("correct horse battery", stored)
    assert not passwords.verify_password("correct horse batterz", stored)
    assert not passwords.needs_rehash(stored)


def test_legacy_scrypt_hashes_verify_and_need_a_rehash():
    stored = legacy_scrypt("an old password")
    assert passwords.verify_password("an old password", stored)
    assert not passwords.verify_password("another password", stored)
    assert passwords.needs_rehash(stored)


def test_weaker_argon2_parameters_need_a_rehash():
    from argon2 import PasswordHasher

    weak = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1).hash("pw pw pw pw")
    assert passwords.verify_password("pw pw pw pw", weak)
    assert passwords.needs_rehash(weak)


@pytest.mark.parametrize(
    "stored",
    [
        None,
        "",
        "garbage",
        "$argon2id$v=19$m=19456,t=2,p=1$bad",
        "scrypt$32768$8$1$not base64!$x",
        "scrypt$4294967296$8$1$c2FsdA==$c2FsdA==",  # would ask for terabytes
        "scrypt$32768$8",
    ],
)
def test_missing_or_damaged_hashes_never_match(stored):
    assert not passwords.verify_password("anything at all", stored)


def test_short_passwords_are_refused():
    with pytest.raises(ValueError, match="at least 10"):
        passwords.check_strength("short")


def test_every_check_does_the_same_kinds_of_work_while_legacy_hashes_remain():
    """A legacy user's check runs scrypt (~130 ms) where an Argon2id one takes ~30 ms: while
    any legacy hash remains, unknown names and Argon2id users get a scrypt check too (and
    legacy users an Argon2id one), so timing cannot tell who has an account or which kind."""
    argon = passwords.hash_password("right password!")
    legacy = legacy_scrypt("right password!")
    both = {passwords.ARGON2, passwords.SCRYPT}
    for stored in (None, "", "garbage", argon, legacy, "scrypt$32768$8"):
        for password in ("right password!", "a wrong guess"):
            check = passwords.check_password(password, stored, legacy_remain=True)
            assert sorted(check.work) == sorted(both), (stored, check)
    assert passwords.check_password("right password!", legacy, legacy_remain=True).matched
    assert passwords.check_password("right password!", argon, legacy_remain=True).matched
    # No legacy hash left: Argon2id alone, for everyone.
    for stored in (None, "garbage", argon):
        check = passwords.check_password("a wrong guess", stored, legacy_remain=False)
        assert check.work == (passwords.ARGON2,), (stored, check)
