"""Users (app/storage/users): a login replaces an older hash with Argon2id, only on success."""

from __future__ import annotations

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
