"""Notes on the timeline ("deployed vLLM 0.33"): a time, a text, an optional engine, who."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from app.storage.rows import first_row, transaction

_COLUMNS = "id, happened_at, text, engine, author, created_at"


@dataclass(frozen=True)
class Note:
    """One stored note."""

    id: str
    at: datetime
    text: str
    engine: str | None
    author: str
    created_at: datetime


def add_note(
    cur: duckdb.DuckDBPyConnection,
    note_id: str,
    at: datetime,
    text: str,
    engine: str | None,
    author: str,
    now: datetime,
) -> Note:
    """Store a note (one statement, so one transaction)."""
    row = first_row(
        cur,
        f"INSERT INTO annotations ({_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?) RETURNING {_COLUMNS}",
        [note_id, at, text, engine, author, now],
    )
    assert row is not None
    return Note(*row)


def get_note(cur: duckdb.DuckDBPyConnection, note_id: str) -> Note | None:
    """The note with this id, or None."""
    row = first_row(cur, f"SELECT {_COLUMNS} FROM annotations WHERE id = ?", [note_id])
    return Note(*row) if row else None


def delete_note(cur: duckdb.DuckDBPyConnection, note_id: str) -> bool:
    """Delete a note; False when there was none. Of racing deletes of one note, DuckDB
    refuses all but the first writer ("Conflict on delete"); retried, they find it gone."""
    return transaction(
        cur,
        lambda c: (
            first_row(c, "DELETE FROM annotations WHERE id = ? RETURNING id", [note_id]) is not None
        ),
    )


def notes_between(
    cur: duckdb.DuckDBPyConnection,
    start: datetime | None,
    end: datetime | None,
    engine: str | None = None,
    limit: int = 500,
) -> list[Note]:
    """The notes in [start, end) (open bounds when None), oldest first; with `engine`, that
    engine's and the fleet-wide ones (no engine); at most `limit`, the newest kept."""
    rows = cur.execute(
        f"SELECT {_COLUMNS} FROM annotations WHERE (? IS NULL OR happened_at >= ?) "
        "AND (? IS NULL OR happened_at < ?) AND (? IS NULL OR engine IS NULL OR engine = ?) "
        "ORDER BY happened_at DESC, id LIMIT ?",
        [start, start, end, end, engine, engine, limit],
    ).fetchall()
    return [Note(*r) for r in reversed(rows)]
