"""Engine profiles (DESIGN §7): one JSON document per engine name, linked by requests.engine;
and their history (profile_versions), each change recorded in the change's own transaction."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import duckdb

from app.storage.rows import first_row, transaction


def get_profile(cur: duckdb.DuckDBPyConnection, name: str) -> dict[str, Any] | None:
    """The stored profile of an engine, or None when it has none."""
    row = first_row(cur, "SELECT profile FROM engines WHERE name = ?", [name])
    return json.loads(row[0]) if row else None


def put_profile(
    cur: duckdb.DuckDBPyConnection, name: str, profile: dict[str, Any], now: datetime
) -> None:
    """Create or replace an engine's profile."""
    cur.execute(
        "INSERT INTO engines (name, model, framework, profile, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (name) DO UPDATE SET model = excluded.model, "
        "framework = excluded.framework, profile = excluded.profile, "
        "updated_at = excluded.updated_at",
        [
            name,
            profile.get("model"),
            profile.get("framework"),
            json.dumps(profile, sort_keys=True),
            now,
            now,
        ],
    ).fetchall()


def delete_profile(cur: duckdb.DuckDBPyConnection, name: str) -> bool:
    """Delete an engine's profile; False when there was none."""
    rows = cur.execute("DELETE FROM engines WHERE name = ? RETURNING name", [name]).fetchall()
    return bool(rows)


def list_profiles(cur: duckdb.DuckDBPyConnection) -> dict[str, dict[str, Any]]:
    """Every stored profile by engine name."""
    rows = cur.execute("SELECT name, profile FROM engines ORDER BY name").fetchall()
    return {name: json.loads(profile) for name, profile in rows}


# --- Profile history: every change as a version, written in the change's own transaction ---

ACTIONS = ("create", "edit", "delete", "restore")
_VERSION_COLUMNS = "engine, seq, changed_at, author, action, before_json, after_json, summary"


@dataclass(frozen=True)
class Version:
    """One change of an engine's profile: who, when, the profile before and after, in words."""

    engine: str
    seq: int
    at: datetime
    author: str
    action: str  # one of ACTIONS
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    summary: str


class ProfileExists(ValueError):
    """A deleted profile cannot be restored: the engine has a profile again."""

    def __init__(self, name: str, current: Version | None):
        self.engine, self.current = name, current
        super().__init__(name)


class NothingToRestore(LookupError):
    """The engine's last recorded change is not a delete: there is no deleted profile."""

    def __init__(self, name: str, last: Version | None):
        self.engine, self.last = name, last
        super().__init__(name)


def _version(row: tuple) -> Version:
    engine, seq, at, author, action, before, after, summary = row
    return Version(
        engine,
        seq,
        at,
        author,
        action,
        json.loads(before) if before is not None else None,
        json.loads(after) if after is not None else None,
        summary,
    )


def _dump(profile: dict[str, Any] | None) -> str | None:
    return None if profile is None else json.dumps(profile, sort_keys=True)


def _record(
    cur: duckdb.DuckDBPyConnection,
    name: str,
    now: datetime,
    author: str,
    action: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    summary: str,
) -> Version:
    row = first_row(
        cur,
        "INSERT INTO profile_versions (" + _VERSION_COLUMNS + ") SELECT ?, coalesce(max(seq), 0) "
        "+ 1, ?, ?, ?, ?, ?, ? FROM profile_versions WHERE engine = ? RETURNING "
        + _VERSION_COLUMNS,
        [name, now, author, action, _dump(before), _dump(after), summary, name],
    )
    assert row is not None
    return _version(row)


Change = Callable[[dict[str, Any] | None], dict[str, Any] | None]
Describe = Callable[[dict[str, Any] | None, dict[str, Any] | None], str]


def change_profile(
    con: duckdb.DuckDBPyConnection,
    name: str,
    change: Change,
    now: datetime,
    author: str,
    describe: Describe,
) -> Version | None:
    """Change a profile and record the version in one transaction: `change(stored)` gives the
    new profile (None deletes it; an exception leaves everything as it was), `describe(before,
    after)` the change in words. None when nothing changed (then nothing is written)."""

    def work(cur: duckdb.DuckDBPyConnection) -> Version | None:
        before = get_profile(cur, name)
        after = change(before)
        if after == before:
            return None
        if after is None:
            cur.execute("DELETE FROM engines WHERE name = ?", [name]).fetchall()
            action = "delete"
        else:
            put_profile(cur, name, after, now)
            action = "create" if before is None else "edit"
        return _record(cur, name, now, author, action, before, after, describe(before, after))

    # Racing writers of one engine collide on its row or on its next version number: the
    # loser starts again from the winner's profile.
    return transaction(con, work, retry_duplicates=True)


def restore_profile(
    con: duckdb.DuckDBPyConnection, name: str, now: datetime, author: str, summary: str
) -> Version:
    """Store again the profile the engine's last change deleted, recording it (one
    transaction). ProfileExists when the engine has a profile now (a newer one: it is never
    replaced), NothingToRestore when its last change was not a delete."""

    def work(cur: duckdb.DuckDBPyConnection) -> Version:
        last = last_version(cur, name)
        if get_profile(cur, name) is not None:
            raise ProfileExists(name, last)
        if last is None or last.action != "delete" or last.before is None:
            raise NothingToRestore(name, last)
        # No ON CONFLICT: a profile created meanwhile by another writer fails this insert.
        cur.execute(
            "INSERT INTO engines (name, model, framework, profile, created_at, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [
                name,
                last.before.get("model"),
                last.before.get("framework"),
                _dump(last.before),
                now,
                now,
            ],
        ).fetchall()
        return _record(cur, name, now, author, "restore", None, last.before, summary)

    try:
        return transaction(con, work)
    except duckdb.ConstraintException:
        raise ProfileExists(name, last_version(con, name)) from None


def last_version(cur: duckdb.DuckDBPyConnection, name: str) -> Version | None:
    """The engine's latest recorded change, or None."""
    row = first_row(
        cur,
        f"SELECT {_VERSION_COLUMNS} FROM profile_versions WHERE engine = ? "
        "ORDER BY seq DESC LIMIT 1",
        [name],
    )
    return _version(row) if row else None


def versions(cur: duckdb.DuckDBPyConnection, name: str, limit: int = 100) -> list[Version]:
    """The engine's recorded changes, newest first."""
    rows = cur.execute(
        f"SELECT {_VERSION_COLUMNS} FROM profile_versions WHERE engine = ? "
        "ORDER BY seq DESC LIMIT ?",
        [name, limit],
    ).fetchall()
    return [_version(r) for r in rows]


def versions_between(
    cur: duckdb.DuckDBPyConnection,
    start: datetime | None,
    end: datetime | None,
    engine: str | None = None,
    limit: int = 500,
) -> list[Version]:
    """Every engine's changes in [start, end) (open bounds when None), oldest first; only
    `engine`'s when given; at most `limit`, the newest kept."""
    rows = cur.execute(
        f"SELECT {_VERSION_COLUMNS} FROM profile_versions WHERE (? IS NULL OR changed_at >= ?) "
        "AND (? IS NULL OR changed_at < ?) AND (? IS NULL OR engine = ?) "
        "ORDER BY changed_at DESC, engine, seq DESC LIMIT ?",
        [start, start, end, end, engine, engine, limit],
    ).fetchall()
    return [_version(r) for r in reversed(rows)]
