"""Users (app/storage/users): a login replaces an older hash with Argon2id, only on success."""

from __future__ import annotations

import threading

from app.storage import users
from app.storage.database import Database
from tests.unit.app.storage.test_passwords import legacy_scrypt


def _hash(db: Database, name: str) -> str:
    row = db.cursor().execute("SELECT password_hash FROM users WHERE name = ?", [name]).fetchone()
    return row[0]


def test_a_login_rehashes_a_legacy_scrypt_hash(database: Database):
    users.add(database.cursor(), "olga", "placeholder password", "viewer")
    old = legacy_scrypt("old scrypt password")
    database.cursor().execute("UPDATE users SET password_hash = ? WHERE name = 'olga'", [old])
    assert users.authenticate(database.cursor(), "olga", "wrong password!") is None
    assert _hash(database, "olga") == old
    user = users.authenticate(database.cursor(), "olga", "old scrypt password")
    assert user is not None and user.last_login_at is not None
    new = _hash(database, "olga")
    assert new.startswith("$argon2id$")
    assert users.authenticate(database.cursor(), "olga", "old scrypt password") is not None
    assert _hash(database, "olga") == new  # current hashes are left alone
    assert users.authenticate(database.cursor(), "olga", "wrong password!") is None


def test_unknown_users_do_not_authenticate(database: Database):
    assert users.authenticate(database.cursor(), "nobody", "some password") is None


def test_login_keys():
    assert users.login_key("  ada ") == "ada"
    assert users.login_key("Ada") == "Ada"  # names match exactly, as stored
    assert users.login_key("x" * 65) == ""
    assert users.login_key("../etc") == ""
    assert users.login_key("") == ""


def test_legacy_hashes_are_counted_until_the_last_is_rehashed(database: Database):
    users.add(database.cursor(), "ada", "placeholder password", "admin")
    assert not users.legacy_remain(database.cursor())
    old = legacy_scrypt("old scrypt password")
    database.cursor().execute("UPDATE users SET password_hash = ? WHERE name = 'ada'", [old])
    assert users.legacy_remain(database.cursor())
    assert users.authenticate(database.cursor(), "ada", "old scrypt password") is not None
    assert not users.legacy_remain(database.cursor())  # the rehash was the last one


def test_simultaneous_logins_of_one_user_all_succeed(database: Database):
    """Two logins of one user at once both update its row (last_login_at, a rehash): DuckDB
    refuses the second writer, which must not turn a right password into a 500 or a failure."""
    from argon2 import PasswordHasher

    users.add(database.cursor(), "ada", "placeholder password", "admin")
    # Weaker Argon2 parameters: quick to check, and each login rehashes (two UPDATEs).
    weak = PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1)
    threads, rounds = 4, 8
    results: list[object] = []
    for _ in range(rounds):
        database.cursor().execute(
            "UPDATE users SET password_hash = ? WHERE name = 'ada'",
            [weak.hash("right password!")],
        )
        barrier = threading.Barrier(threads)

        def login(barrier: threading.Barrier) -> None:
            barrier.wait()
            try:
                results.append(users.authenticate(database.cursor(), "ada", "right password!"))
            except Exception as exc:  # noqa: BLE001 - the test reports any kind
                results.append(exc)

        running = [threading.Thread(target=login, args=(barrier,)) for _ in range(threads)]
        for thread in running:
            thread.start()
        for thread in running:
            thread.join()
    failed = [r for r in results if not isinstance(r, users.UserInfo)]
    assert not failed and len(results) == threads * rounds, failed
    assert _hash(database, "ada").startswith("$argon2id$v=19$m=19456,t=2,p=1$")
