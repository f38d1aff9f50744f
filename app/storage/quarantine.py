"""Damaged files moved aside, never deleted: each with a note of what was recovered and lost,
shown by /api/health and /metrics until an operator acknowledges it.

The folder sits beside the database (`tokenshape.duckdb.quarantine/`), private like the
journal. Each unit is the damaged file as it was found plus `<name>.json`: what it was, what
was wrong, how many rows were recovered and lost, when, and whether an operator has
acknowledged it (`tokenshape quarantine ack`, or POST /api/health/acknowledge).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from app.storage.files import PRIVATE_FILE, fsync_dir, private_dir

log = logging.getLogger("tokenshape.quarantine")


@dataclass(frozen=True)
class Damage:
    """One quarantined unit and what its damage cost."""

    name: str  # the file's name in the quarantine folder
    kind: str  # journal segment, database file, database WAL
    original: str  # where it was found
    problem: str  # what was wrong, in words
    recovered_rows: int
    lost_rows: int | None  # None: the damaged part's rows cannot be counted
    at: str  # ISO 8601, UTC
    acknowledged: bool = False

    def sentence(self) -> str:
        """The damage in one line, for the log and the health answer."""
        lost = "an uncountable number of" if self.lost_rows is None else f"{self.lost_rows:,}"
        return (
            f"{self.kind} {self.original} was damaged ({self.problem}): "
            f"{self.recovered_rows:,} rows recovered, {lost} rows lost; the file is kept as "
            f"{self.name} in the quarantine folder"
        )


def folder_for(beside: Path) -> Path:
    """The quarantine folder of the database that `beside` (its file, or its journal) has."""
    name = beside.name.removesuffix(".journal")
    return beside.with_name(name + ".quarantine")


def quarantine(
    folder: Path,
    path: Path,
    *,
    kind: str,
    problem: str,
    recovered_rows: int,
    lost_rows: int | None,
    now: datetime | None = None,
    companions: Iterable[Path] = (),
) -> Damage:
    """Move `path` into `folder` with its note, and say so at ERROR naming the file.

    `companions` (a database file's WAL) go with it, named as the unit plus their own suffix
    (`…-tokenshape.duckdb.wal`), so the pair still opens together."""
    private_dir(folder)
    when = (now or datetime.now(UTC)).astimezone(UTC)
    name = f"{when:%Y%m%dT%H%M%SZ}-{path.name}"
    target = folder / name
    n = 1
    while target.exists() or target.with_name(target.name + ".json").exists():
        n += 1
        target = folder / f"{name}.{n}"
    shutil.move(str(path), target)
    for companion in companions:
        if companion.exists():
            suffix = companion.name.removeprefix(path.name) or f".{companion.name}"
            shutil.move(str(companion), target.with_name(target.name + suffix))
    damage = Damage(
        name=target.name,
        kind=kind,
        original=str(path),
        problem=problem,
        recovered_rows=recovered_rows,
        lost_rows=lost_rows,
        at=when.isoformat(),
    )
    _write_note(target.with_name(target.name + ".json"), damage)
    fsync_dir(folder)
    log.error("%s", damage.sentence())
    return damage


def _write_note(path: Path, damage: Damage) -> None:
    fd = os.open(
        path.with_suffix(path.suffix + ".tmp"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE
    )
    with os.fdopen(fd, "w") as fh:
        json.dump(asdict(damage), fh, indent=2)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(path.with_suffix(path.suffix + ".tmp"), path)


def listed(folder: Path) -> list[Damage]:
    """Every quarantined unit with its note, oldest first (a note that cannot be read is
    listed as such, never skipped)."""
    if not folder.is_dir():
        return []
    found = []
    for note in sorted(folder.glob("*.json")):
        try:
            found.append(Damage(**json.loads(note.read_text())))
        except (OSError, ValueError, TypeError) as exc:
            found.append(
                Damage(note.stem, "note", str(note), f"its note cannot be read: {exc}", 0, None, "")
            )
    return found


def open_damage(folder: Path) -> list[Damage]:
    """The quarantined units no operator has acknowledged yet."""
    return [d for d in listed(folder) if not d.acknowledged]


def acknowledge(folder: Path, name: str | None = None) -> int:
    """Mark one unit (or every one) as seen by an operator; returns how many changed. The
    files stay: removing them is the operator's call."""
    changed = 0
    for damage in open_damage(folder):
        if name is not None and damage.name != name:
            continue
        note = folder / f"{damage.name}.json"
        if not note.exists():
            continue
        _write_note(note, Damage(**(asdict(damage) | {"acknowledged": True})))
        changed += 1
    return changed
