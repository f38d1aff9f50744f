"""Response bodies of the JSON API (never ORM rows)."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
    journal_rows: int
    moved_rows: int
    last_move_error: str | None


class Health(BaseModel):
    """GET /api/health."""

    status: str
    version: str
    database: DatabaseHealth
    writer: WriterHealth


class HeatmapOut(BaseModel):
    """GET /api/heatmap: counts[i][j] counts requests in ISL bin i and OSL bin j.

    Bins are half-open [edges[k], edges[k+1]); the last bin of each axis is open-ended."""

    bins: str
    isl_edges: list[int]
    osl_edges: list[int]
    counts: list[list[int]]
    total: int


class Quantiles(BaseModel):
    """Exact quantiles and maximum of one measure; null when the window has no values."""

    p50: float | None
    p90: float | None
    p99: float | None
    p99_9: float | None = Field(alias="p99.9")
    max: float | None

    model_config = {"populate_by_name": True}


class QuantilesOut(BaseModel):
    """GET /api/quantiles."""

    isl: Quantiles
    osl: Quantiles
    ttft_ms: Quantiles
    itl_ms: Quantiles
    e2e_ms: Quantiles


class ShapesOut(BaseModel):
    """GET /api/shapes: requests of each of the four shapes, with the thresholds used."""

    long_isl: int
    long_osl: int
    total: int
    counts: dict[str, int]
    shares: dict[str, float]
