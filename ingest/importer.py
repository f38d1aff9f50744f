"""`tokenshape import`: a file's batches (ingest.formats.files) into the store, then rollups."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from app.storage import rollups
from app.storage.database import Database
from app.storage.write.store import RequestStore
from ingest.formats.files import FORMATS, batches


@dataclass
class ImportStats:
    """What an import stored, skipped and rejected."""

    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    first_errors: list[str] = field(default_factory=list)


def import_file(
    db: Database,
    path: Path,
    fmt: str,
    *,
    gateway: str,
    model: str | None = None,
    raw_chars: int = 4096,
    progress: Callable[[int], None] | None = None,
    now: datetime | None = None,
    tokenizer: Path | None = None,
    tz: str = "UTC",
) -> ImportStats:
    """Validate and store a whole file through the same rules as the HTTP route."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: choose one of {', '.join(FORMATS)}")
    received_at = now or datetime.now(UTC)
    store = RequestStore(db.new_cursor(), raw_chars)
    stats = ImportStats()
    try:
        for batch, items in batches(path, fmt, gateway, model, received_at, tokenizer):
            (result,) = store.write([batch])
            stats.accepted += result.accepted
            stats.duplicates += result.duplicates
            stats.rejected += result.rejected
            for r in batch.rejects:
                if len(stats.first_errors) < 10:
                    where = f"record {r.index}" if r.index is not None else "file"
                    stats.first_errors.append(f"{where}: {r.reason}")
            if progress:
                progress(items)
        rollups.rebuild_all(store.con, tz)  # the dashboard reads whole hours from them at once
    finally:
        store.con.close()
    return stats
