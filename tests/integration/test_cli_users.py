"""`tokenshape user` and `tokenshape token rotate` as an operator runs them."""

from __future__ import annotations

import duckdb

from tests.support.cli import cli


def test_user_add_list_role_passwd_remove(tmp_path):
    db = str(tmp_path / "u.duckdb")
    added = cli(
        "user",
        "add",
        "ada",
        "--role",
        "admin",
        "--password-stdin",
        "--db",
        db,
        check=False,
        stdin="a long passphrase\n",
    )
    assert added.returncode == 0 and "added ada as admin" in added.stdout
    stored = duckdb.connect(db).execute("SELECT password_hash FROM users").fetchall()[0][0]
    assert stored.startswith("$argon2id$v=19$m=19456,t=2,p=1$")
    assert "a long passphrase" not in stored
    short = cli(
        "user",
        "add",
        "bob",
        "--role",
        "viewer",
        "--password-stdin",
        "--db",
        db,
        check=False,
        stdin="short\n",
    )
    assert short.returncode == 2 and "at least 10 characters" in short.stderr
    dup = cli(
        "user",
        "add",
        "ada",
        "--role",
        "viewer",
        "--password-stdin",
        "--db",
        db,
        check=False,
        stdin="another long one\n",
    )
    assert dup.returncode == 2 and "already exists" in dup.stderr
    bad = cli("user", "add", "x y", "--role", "viewer", "--password-stdin", "--db", db, check=False)
    assert bad.returncode == 2 and "user name" in bad.stderr and "Traceback" not in bad.stderr
    assert "viewer" in cli("user", "role", "ada", "viewer", "--db", db).stdout
    listing = cli("user", "list", "--db", db).stdout
    assert "ada" in listing and "viewer" in listing and "last login never" in listing
    changed = cli(
        "user",
        "passwd",
        "ada",
        "--password-stdin",
        "--db",
        db,
        check=False,
        stdin="a new passphrase\n",
    )
    assert changed.returncode == 0
    after = duckdb.connect(db).execute("SELECT password_hash FROM users").fetchall()[0][0]
    assert after != stored
    assert "removed" in cli("user", "remove", "ada", "--db", db).stdout
    gone = cli("user", "remove", "ada", "--db", db, check=False)
    assert gone.returncode == 1 and "no user named 'ada'" in gone.stderr


def test_token_rotate_replaces_the_token(tmp_path):
    db = str(tmp_path / "t.duckdb")
    old = cli("token", "create", "--gateway", "edge", "--scope", "ingest", "--db", db)
    old_token = old.stdout.strip().splitlines()[-1]
    old_id = old_token[4:12]
    rotated = cli("token", "rotate", old_id, "--db", db).stdout
    new_token = rotated.strip().splitlines()[-1]
    assert new_token.startswith("tks_") and new_token != old_token
    rows = (
        duckdb.connect(db)
        .execute(
            "SELECT id, gateway, scope, revoked_at IS NOT NULL FROM tokens ORDER BY created_at"
        )
        .fetchall()
    )
    assert rows[0] == (old_id, "edge", "ingest", True)
    assert rows[1][1:] == ("edge", "ingest", False)
    again = cli("token", "rotate", old_id, "--db", db, check=False)
    assert again.returncode == 1 and "no active token" in again.stderr
