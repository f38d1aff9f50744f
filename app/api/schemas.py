"""Response bodies of the JSON API (never ORM rows)."""

from __future__ import annotations

from pydantic import BaseModel


class DatabaseHealth(BaseModel):
    """The database file and what it holds."""

    ok: bool
    path: str
    revision: str
    requests: int
    rejects: int
    error: str | None = None


class WriterHealth(BaseModel):
    """The single writer's queue and counters."""

    running: bool
    pending_rows: int
    capacity_rows: int
    flushes: int
    batches: int
    rows_accepted: int
    rows_duplicate: int
    rows_rejected: int
    saturated_answers: int
    last_flush_ms: float
    last_error: str | None


class Health(BaseModel):
    """GET /api/health."""

    status: str
    version: str
    database: DatabaseHealth
    writer: WriterHealth
