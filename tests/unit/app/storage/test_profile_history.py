"""Profile history and notes in storage (app/storage/engines, app/storage/annotations) on a real
DuckDB file: migration 0008 up and down, a change and its version in one transaction, a delete
kept and restored, and never over a newer profile."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.storage import annotations, engines, migrate
from app.storage.database import Database
from tests.support.database import copy_database, open_migrated

T0 = datetime(2026, 11, 20, 8, tzinfo=UTC)
PROFILE = {"model": "llama-3.1-8b", "gpu": "H100", "max_input_len": 4096}


def _words(before, after) -> str:
    return f"{'-' if before is None else 'b'}>{'-' if after is None else 'a'}"


def _tables(path) -> set[str]:
    import duckdb

    con = duckdb.connect(str(path))
    try:
        return {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
    finally:
        con.close()


def _alembic(path, action: str, revision: str) -> None:
    from alembic import command
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    cfg = migrate._config()
    engine = create_engine(f"duckdb:///{path}", poolclass=NullPool)
    with engine.begin() as connection:
        cfg.attributes["connection"] = connection
        getattr(command, action)(cfg, revision)
    engine.dispose()


def test_migration_0008_adds_the_tables_and_takes_them_away_again(tmp_path):
    path = tmp_path / "m.duckdb"
    _alembic(path, "upgrade", "0007")
    assert not {"profile_versions", "annotations"} & _tables(path)
    with Database(path).open() as db:  # the server's open migrates to the head
        assert db.revision == migrate.head_revision() == "0008"
        engines.change_profile(db.cursor(), "e", lambda _: PROFILE, T0, "ada", _words)
        annotations.add_note(db.cursor(), "n1", T0, "deployed vLLM 0.33", None, "ada", T0)
    assert {"profile_versions", "annotations", "engines"} <= _tables(path)
    _alembic(path, "downgrade", "0007")
    tables = _tables(path)
    assert "engines" in tables and not {"profile_versions", "annotations"} & tables
    _alembic(path, "upgrade", "head")
    assert {"profile_versions", "annotations"} <= _tables(path)


@pytest.fixture
def db(db_template, tmp_path):
    with open_migrated(copy_database(db_template, tmp_path / "h.duckdb")) as opened:
        yield opened


def test_each_change_is_a_version_written_with_it(db):
    cur = db.cursor()
    created = engines.change_profile(cur, "e", lambda _: PROFILE, T0, "ada", _words)
    assert created is not None and (created.seq, created.action) == (1, "create")
    assert created.before is None and created.after == PROFILE and created.summary == "->a"
    bigger = {**PROFILE, "max_input_len": 8192}
    edited = engines.change_profile(cur, "e", lambda _: bigger, T0 + timedelta(1), "bob", _words)
    assert edited is not None and (edited.seq, edited.action, edited.author) == (2, "edit", "bob")
    assert edited.before == PROFILE and edited.after == bigger
    # Saving the same profile again changes nothing and records nothing.
    assert engines.change_profile(cur, "e", lambda p: p, T0, "ada", _words) is None
    assert [v.seq for v in engines.versions(cur, "e")] == [2, 1]
    assert engines.get_profile(cur, "e") == bigger


def test_a_refused_change_leaves_neither_profile_nor_version(db):
    cur = db.cursor()

    def refuse(_stored):
        raise ValueError("max_input_len: too big")

    with pytest.raises(ValueError, match="too big"):
        engines.change_profile(cur, "e", refuse, T0, "ada", _words)
    assert engines.get_profile(cur, "e") is None and engines.versions(cur, "e") == []
    # A failure after the profile was written (the version's insert) undoes the profile too.
    with pytest.raises(RuntimeError):
        engines.change_profile(cur, "e", lambda _: PROFILE, T0, "ada", _explode)
    assert engines.get_profile(cur, "e") is None and engines.versions(cur, "e") == []


def _explode(before, after) -> str:
    raise RuntimeError("describe failed")


def test_a_delete_keeps_the_profile_and_restore_brings_it_back_once(db):
    cur = db.cursor()
    engines.change_profile(cur, "e", lambda _: PROFILE, T0, "ada", _words)
    gone = engines.change_profile(cur, "e", lambda _: None, T0 + timedelta(1), "bob", _words)
    assert gone is not None and gone.action == "delete" and gone.before == PROFILE
    assert engines.get_profile(cur, "e") is None
    back = engines.restore_profile(cur, "e", T0 + timedelta(2), "cy", "restored")
    assert (back.action, back.seq, back.after, back.author) == ("restore", 3, PROFILE, "cy")
    assert engines.get_profile(cur, "e") == PROFILE
    with pytest.raises(engines.ProfileExists) as exists:  # a profile again: never replaced
        engines.restore_profile(cur, "e", T0, "cy", "restored")
    assert exists.value.current is not None and exists.value.current.action == "restore"
    with pytest.raises(engines.NothingToRestore):
        engines.restore_profile(cur, "never", T0, "cy", "restored")


def test_a_newer_profile_after_a_delete_is_not_replaced(db):
    cur = db.cursor()
    engines.change_profile(cur, "e", lambda _: PROFILE, T0, "ada", _words)
    engines.change_profile(cur, "e", lambda _: None, T0, "ada", _words)
    newer = {**PROFILE, "gpu": "L40S"}
    engines.change_profile(cur, "e", lambda _: newer, T0, "bob", _words)
    with pytest.raises(engines.ProfileExists):
        engines.restore_profile(cur, "e", T0, "cy", "restored")
    assert engines.get_profile(cur, "e") == newer


def test_versions_and_notes_between_bounds_and_engine(db):
    cur = db.cursor()
    for k, name in enumerate(["a", "b"]):
        engines.change_profile(cur, name, lambda _: PROFILE, T0 + timedelta(hours=k), "x", _words)
    annotations.add_note(cur, "n1", T0, "fleet", None, "x", T0)
    annotations.add_note(cur, "n2", T0 + timedelta(hours=1), "for a", "a", "x", T0)
    annotations.add_note(cur, "n3", T0 + timedelta(hours=2), "for b", "b", "x", T0)
    assert [v.engine for v in engines.versions_between(cur, None, None)] == ["a", "b"]
    hour = T0 + timedelta(hours=1)
    assert [v.engine for v in engines.versions_between(cur, hour, None)] == ["b"]
    assert [v.engine for v in engines.versions_between(cur, None, hour)] == ["a"]
    assert [n.id for n in annotations.notes_between(cur, None, None)] == ["n1", "n2", "n3"]
    assert [n.id for n in annotations.notes_between(cur, None, None, "a")] == ["n1", "n2"]
    assert [n.id for n in annotations.notes_between(cur, None, None, limit=2)] == ["n2", "n3"]
    assert annotations.delete_note(cur, "n1") and not annotations.delete_note(cur, "n1")
