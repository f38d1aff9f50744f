"""Annotations: the notes people add to the timeline and every engine-profile change, as one
list the API, the Changes and notes page, the CLI and the charts' markers share."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from app.analytics.filters import time_problem
from app.services.profiles import check_name, current_author
from app.storage import annotations as notes
from app.storage import engines
from app.storage.database import Database

MAX_TEXT = 500
MAX_LIST = 1000
DEFAULT_SPAN = timedelta(days=30)


@dataclass(frozen=True)
class Annotation:
    """A note ("note") or a profile change ("profile") at a moment on the timeline."""

    id: str
    kind: str  # note | profile
    at: datetime
    text: str
    engine: str | None
    author: str

    def as_dict(self) -> dict[str, object]:
        """The JSON the API answers (times in UTC, ISO 8601)."""
        return {
            "id": self.id,
            "kind": self.kind,
            "at": self.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "text": self.text,
            "engine": self.engine,
            "author": self.author,
            "deletable": self.kind == "note",
        }


def check_text(text: object) -> str:
    """The note's text, stripped; ValueError naming the rule it breaks (empty, too long, a
    control character)."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError('text: empty; say what happened, e.g. "deployed vLLM 0.33"')
    text = text.strip()
    if len(text) > MAX_TEXT:
        raise ValueError(f"text: {len(text):,} characters; at most {MAX_TEXT}, shorten it")
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ValueError("text: holds a control character (e.g. a newline); write one line")
    return text


def check_time(name: str, value: datetime) -> datetime:
    """An aware time (UTC when it names no zone) inside the supported range; ValueError
    naming `name` otherwise."""
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    if (problem := time_problem(name, aware)) is not None:
        raise ValueError(problem)
    return aware


def parse_time(name: str, text: str) -> datetime:
    """An ISO 8601 time typed on a command line or in a form; ValueError naming `name` and
    giving an example when it is not one."""
    try:
        value = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ValueError(
            f"{name}: {text[:40]!r} is not an ISO 8601 time; use e.g. 2026-11-20T08:00:00Z"
        ) from None
    return check_time(name, value)


def add_note(
    db: Database,
    text: str,
    now: datetime,
    at: datetime | None = None,
    engine: str | None = None,
    author: str | None = None,
) -> Annotation:
    """Store a note at `at` (default now) about `engine` (default the whole fleet); ValueError
    naming the field that is wrong."""
    clean = check_text(text)
    when = check_time("at", at) if at is not None else now
    engine = engine.strip() if isinstance(engine, str) and engine.strip() else None
    if engine is not None:
        try:
            check_name(engine)
        except ValueError as exc:
            raise ValueError(str(exc).replace("engine name", "engine", 1)) from None
    note = notes.add_note(
        db.cursor(),
        secrets.token_hex(6),
        when,
        clean,
        engine,
        author or current_author(),
        now,
    )
    return _of_note(note)


def delete_note(db: Database, note_id: str) -> bool:
    """Delete a note; False when there is none with that id."""
    return notes.delete_note(db.cursor(), note_id)


def _of_note(n: notes.Note) -> Annotation:
    return Annotation(n.id, "note", n.at, n.text, n.engine, n.author)


def _of_version(v: engines.Version) -> Annotation:
    return Annotation(
        f"profile:{v.engine}:{v.seq}",
        "profile",
        v.at,
        f"{v.engine}: {v.summary}",
        v.engine,
        v.author,
    )


def between(
    db: Database,
    start: datetime | None,
    end: datetime | None,
    engine: str | None = None,
    limit: int = MAX_LIST,
) -> list[Annotation]:
    """Notes and profile changes in [start, end), oldest first; with `engine`, that engine's
    changes and notes and the fleet-wide notes; at most `limit`, the newest kept."""
    cur = db.cursor()
    found = [_of_note(n) for n in notes.notes_between(cur, start, end, engine, limit)]
    found += [_of_version(v) for v in engines.versions_between(cur, start, end, engine, limit)]
    found.sort(key=lambda a: a.at)  # stable: each list is in order already
    return found[-limit:]


def window(
    start: datetime | None, end: datetime | None, now: datetime
) -> tuple[datetime, datetime | None]:
    """A listing's bounds: `start` defaults to DEFAULT_SPAN before `end` (else before now),
    `end` to none (notes planned ahead are listed too); ValueError naming the bound that is
    out of range, or start not before end."""
    end = check_time("end", end) if end is not None else None
    start = check_time("start", start) if start is not None else (end or now) - DEFAULT_SPAN
    if end is not None and start >= end:
        raise ValueError("start: must be before end")
    return start, end
