"""Engine profiles (DESIGN §7): one JSON document per engine name, linked by requests.engine."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import duckdb

from app.storage.rows import first_row


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
