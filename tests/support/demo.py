"""Demo traffic (app.services.demo) seeded once into template files, copied per test."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from app.services import demo
from tests.support.database import assert_closed, copy_database, open_migrated

END = datetime(2026, 11, 23, tzinfo=UTC)  # the fixed end most seeded views use


def seed_template(
    migrated: Path,
    dest: Path,
    *,
    requests: int,
    days: int,
    end: datetime | None = None,
    sample_rate: float | None = None,
) -> Path:
    """A copy of the migrated template with `demo.seed(...)` traffic in it, closed again.

    Unsampled by default (the platform scaled down to `requests`); a `sample_rate` keeps that
    share of a bigger platform (requests / sample_rate; 0.001 × ~33M: the production volume)."""
    copy_database(migrated, dest)
    with open_migrated(dest) as db:
        demo.seed(db, requests=requests, days=days, end=end, sample_rate=sample_rate)
    assert_closed(dest)
    return dest
