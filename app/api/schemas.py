"""Response bodies of the JSON API (never ORM rows)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from app.api.schemas_damage import DamageOut


class DatabaseHealth(BaseModel):
    """The database file and what it holds."""

    ok: bool
    path: str
    revision: str
    requests: int
    rejects: int
    rollup_hours: int = 0  # hours with hourly rollups
    stale_rollup_hours: int = 0  # hours written since their rollup was built (read raw)
    # Hours each rollup tier holds (days for `daily_days`) and hours by source (raw: rebuilt
    # from raw rows; sealed: raw rows pruned, the rollups are the record; lake: imported).
    rollup_tiers: dict[str, int] = {}
    error: str | None = None


class WriterHealth(BaseModel):
    """The single writer's queue and counters."""

    running: bool
    pending_rows: int
    incoming_requests: int  # ingest requests being read or parsed now
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


class ReportsHealth(BaseModel):
    """The weekly email: whether it is scheduled, when next, and the last attempt."""

    scheduled: bool
    next_run: str | None = None
    last_week: str | None = None
    last_status: str | None = None
    last_error: str | None = None
    in_doubt: list[str] = Field(
        default_factory=list,
        description="Weeks whose email may have been sent (no answer after DATA, or a send "
        "cut short): never resent automatically; resend with POST /api/reports/send "
        '{"week": …, "resend": true} or on the Reports page.',
    )


class LakePushHealth(BaseModel):
    """The lake push job (TOKENSHAPE_PUSH_URL): this node's rollups to a central node."""

    url: str = Field(description="The central node; '(log in to see)' to anonymous callers.")
    origin: str = Field(description="The name the hours are recorded under there.")
    every_s: float = Field(description="Seconds between rounds (TOKENSHAPE_PUSH_EVERY_S).")
    rounds: int = Field(description="Rounds done since the server started, failed ones too.")
    next_round: str | None = Field(None, description="When the next round starts.")
    last_success: str | None = Field(None, description="When a round last completed.")
    last_hours: int = Field(
        0, description="Hours the last complete round pushed (0: nothing was new)."
    )
    last_rows: dict[str, int] = Field({}, description="Its rows per table kind.")
    hours_pushed: int = Field(0, description="Hours pushed since the server started.")
    built_after: str | None = Field(
        None, description="The next round sends the hours rebuilt after this (null: all)."
    )
    last_error: str | None = Field(
        None, description="Why the last round failed; null once a round succeeds."
    )
    consecutive_failures: int = Field(0, description="Rounds failed in a row.")


class Health(BaseModel):
    """GET /api/health."""

    status: str
    problem: str | None = None  # why the status is "degraded", in words
    version: str
    database: DatabaseHealth
    writer: WriterHealth
    reports: ReportsHealth
    lake_push: LakePushHealth | None = Field(
        None, description="The lake push job; null when TOKENSHAPE_PUSH_URL is not set."
    )
    damage: list[DamageOut] = Field(
        default_factory=list,
        description="Damaged files moved to the quarantine folder and not yet acknowledged "
        '(POST /api/health/acknowledge); while any are listed the status is "warning".',
    )


class SamplingOut(BaseModel):
    """Present when the window holds sampled rows: its counts are estimates."""

    rows: int = Field(description="Rows stored in the window.")
    estimated_requests: int = Field(description="Requests they stand for: Σ 1/sample_rate.")
    min_rate: float | None = Field(description="Lowest sample rate among the rows.")
    max_rate: float | None = Field(description="Highest sample rate among the rows.")
    note: str | None = Field(description='In words: "estimated from a 1% sample of 2.3M requests".')


SamplingField = Field(
    default=None,
    description="How the window was sampled; absent when no row was (counts are then exact).",
)
AnsweredField = Field(
    default=None,
    description=(
        "Which rollup tiers answered the window and what they could not count, in words "
        "(e.g. a tenant filter further back than the hourly rollups at full grain); absent "
        "when raw rows alone answered."
    ),
)
RawOnlyField = Field(
    default=None,
    description=(
        "Set when this answer read raw rows only (exact=true, a bucket or time zone the "
        "rollups cannot answer, or a view that always reads raw rows) over a window some of "
        "whose hours have no raw rows left (sealed by retention, imported from the lake): how "
        "many hours, how many of the window's requests the answer counts, and which narrower "
        "window holds them all, in words; absent (or null) when every request of the window "
        "was counted."
    ),
)
LinksField = Field(
    default=None,
    description=(
        'Where the same answer is as CSV: {"csv": this path and query with format=csv} '
        "(relative); a route with several tables adds csv_<table> for each other one "
        "(format=csv&table=<table>)."
    ),
)


class HeatmapOut(BaseModel):
    """GET /api/heatmap: counts[i][j] counts requests in ISL bin i and OSL bin j.

    Bins are half-open [edges[k], edges[k+1]); the last bin of each axis is open-ended."""

    bins: str
    isl_edges: list[int]
    osl_edges: list[int]
    counts: list[list[int]]
    total: int
    answered_from: str | None = AnsweredField
    raw_only_note: str | None = RawOnlyField
    sampling: SamplingOut | None = SamplingField
    links: dict[str, str] | None = LinksField


class Quantiles(BaseModel):
    """Quantiles and maximum of one measure; null when the window has no values."""

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
    relative_error: float = Field(
        description=(
            "0 when the quantiles are exact (DuckDB's quantile_cont on raw rows); else the most "
            "any quantile may be off, relative to its value: windows of a day or more are "
            "read from hourly rollups (±0.99%). Maxima are always exact."
        )
    )
    answered_from: str | None = AnsweredField
    raw_only_note: str | None = RawOnlyField
    sampling: SamplingOut | None = SamplingField
    links: dict[str, str] | None = LinksField


class ShapesOut(BaseModel):
    """GET /api/shapes: requests of each of the four shapes, with the thresholds used."""

    long_isl: int
    long_osl: int
    total: int
    counts: dict[str, int]
    shares: dict[str, float]
    answered_from: str | None = AnsweredField
    raw_only_note: str | None = RawOnlyField
    sampling: SamplingOut | None = SamplingField
    links: dict[str, str] | None = LinksField


class TrendPoint(BaseModel):
    """One time bucket of the latency trend (milliseconds; null without data)."""

    bucket: datetime
    requests: int
    ttft_ms_p50: float | None
    ttft_ms_p90: float | None
    ttft_ms_p99: float | None
    itl_ms_p50: float | None
    itl_ms_p90: float | None
    itl_ms_p99: float | None
    e2e_ms_p50: float | None
    e2e_ms_p90: float | None
    e2e_ms_p99: float | None


class TrendOut(BaseModel):
    """GET /api/latency/trend: bucket is 5m, 1h or 1d, chosen from the window."""

    bucket: str
    points: list[TrendPoint]
    relative_error: float = Field(
        description=(
            "0 when the percentiles are exact (DuckDB's quantile_cont on raw rows); else the "
            "most any of them may be off, relative to its value: hourly and daily buckets of "
            "windows of a day or more are read from hourly rollups (±0.99%) when the time zone "
            "keeps whole-hour offsets. Request counts are always exact."
        )
    )
    answered_from: str | None = AnsweredField
    raw_only_note: str | None = RawOnlyField
    sampling: SamplingOut | None = SamplingField
    links: dict[str, str] | None = LinksField


class TtftBin(BaseModel):
    """TTFT over the requests of one ISL bin [isl_from, next isl_from)."""

    isl_from: int
    requests: int
    ttft_p50: float
    ttft_p90: float


class TtftVsIslOut(BaseModel):
    """GET /api/latency/ttft-vs-isl: binned TTFT and an OLS slope in ms per 1k input tokens."""

    bins: list[TtftBin]
    slope_ms_per_1k_tokens: float | None
    relative_error: float = Field(
        description=(
            "0 when the medians and p90s are exact (DuckDB's quantile_cont on raw rows); else "
            "the most any of them may be off, relative to its value: windows of a day or more "
            "are read from hourly rollups (±0.99%). Counts and the slope are exact."
        )
    )
    raw_only_note: str | None = RawOnlyField
    links: dict[str, str] | None = LinksField


class PositionBin(BaseModel):
    """Inter-token gaps at output positions [position_from, next position_from)."""

    position_from: int
    gaps: int
    itl_p50: float
    itl_p90: float


class ItlByPositionOut(BaseModel):
    """GET /api/latency/itl-by-position (from requests that carry token_gaps_ms)."""

    bins: list[PositionBin]
    relative_error: float = Field(
        description=(
            "0 when the medians and p90s are exact (DuckDB's quantile_cont over every gap); "
            "else the most any of them may be off, relative to its value: windows of a day or "
            "more are read from hourly rollups (±0.99%). Gap counts are always exact."
        )
    )
    raw_only_note: str | None = RawOnlyField
    links: dict[str, str] | None = LinksField


class E2eOut(BaseModel):
    """GET /api/latency/e2e: requests per time-to-completion bin (ms; last bin open-ended)."""

    edges_ms: list[int]
    counts: list[int]
    total: int
    raw_only_note: str | None = RawOnlyField
    links: dict[str, str] | None = LinksField


class TrafficPoint(BaseModel):
    """Requests and tokens per second over one time bucket."""

    bucket: datetime
    requests: int
    requests_per_s: float
    input_tokens_per_s: float
    output_tokens_per_s: float


class TrafficOut(BaseModel):
    """GET /api/traffic: rates per bucket and the weekday x hour matrix in the time zone."""

    bucket: str
    tz: str
    points: list[TrafficPoint]
    weekday_hour: list[list[int]] = Field(
        description="7 rows (Monday first) x 24 hours of request counts, in tz."
    )
    answered_from: str | None = AnsweredField
    raw_only_note: str | None = RawOnlyField
    sampling: SamplingOut | None = SamplingField
    links: dict[str, str] | None = LinksField
