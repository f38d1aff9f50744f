"""Response body of GET /api/compare: benchmark vs production for one engine."""

from __future__ import annotations

from pydantic import BaseModel, Field

from app.api.goodput import SloOut
from app.api.schemas import RawOnlyField, SamplingOut


class WindowOut(BaseModel):
    """A side's window as asked (null: open on that side)."""

    start: str | None
    end: str | None


class MeasureOut(BaseModel):
    """One latency of one side, in ms (null without values)."""

    p50: float | None
    p90: float | None
    p99: float | None
    mean: float | None = Field(
        description="TTFT: the mean over requests; ITL: the mean per output token "
        "(token-weighted), as the performance model states its figures"
    )


class LatencyOut(BaseModel):
    """TTFT and ITL over a side's requests with status ok (exact, weighted)."""

    ttft: MeasureOut
    itl: MeasureOut


class GoodputTotals(BaseModel):
    """A side judged against the engine's SLO (weighted counts)."""

    requests: float | None
    good: float | None
    missed: float | None
    not_measured: float | None = Field(description="a targeted value not reported: left out")
    goodput: float | None = Field(description="good / (good + missed)")
    target: float | None = Field(description="the SLO percentile as a share (0.95)")
    met: bool | None


class SideOut(BaseModel):
    """One side of the comparison: which requests, their shape and their latency."""

    window: WindowOut
    first: str | None = Field(description="the side's first request (or the window's start)")
    last: str | None = Field(description="its last request (or the window's end)")
    gateways: list[str] = Field(description="production: the engine's other gateways")
    match: str = Field(
        description="how the side was chosen: engine (rows naming the engine), model (the "
        "benchmark's rows naming a model of the engine) or gateway (all the gateway's rows)"
    )
    match_words: str
    requests: int = Field(description="requests with status ok (weighted by sampling)")
    rows: int = Field(description="stored rows, every status")
    not_ok: float | None = Field(description="requests failed or cancelled, counted apart")
    counts: list[list[int]] = Field(description="counts[i][j]: ISL bin i, OSL bin j")
    shares: list[list[float]] = Field(description="counts as shares of the side's requests")
    latency: LatencyOut
    in_flight: float | None = Field(description="requests in flight, see in_flight_words")
    in_flight_words: str
    goodput: GoodputTotals | None = Field(description="null when the engine has no SLO")
    sampling: SamplingOut | None = Field(None, description="null when no row was sampled")
    raw_only_note: str | None = RawOnlyField


class ShapeOut(BaseModel):
    """How far apart the two heat maps are."""

    tvd: float = Field(
        description="total variation distance of the shares: ½ Σ |production − benchmark| "
        "(0: the same shape, 1: no cell in common)"
    )
    threshold: float = Field(description="a TVD at or under it is a match (match_tvd)")
    matches: bool
    words: str = Field(description="the verdict in one sentence, with the cells that differ most")


class HeadlineOut(BaseModel):
    """One measure's benchmark ÷ production over the cells compared."""

    measure: str = Field(description="ttft or itl")
    cells: int = Field(description="cells with min_samples measured requests on both sides")
    production_share: float = Field(description="their share of production's requests")
    p50: float | None = Field(description="production-weighted geometric mean of the ratios")
    p90: float | None
    words: str


class CellQuantilesOut(BaseModel):
    """TTFT and ITL p50, p90 and p99 of one cell."""

    ttft_p50: float | None
    ttft_p90: float | None
    ttft_p99: float | None
    itl_p50: float | None
    itl_p90: float | None
    itl_p99: float | None


class CellSideOut(CellQuantilesOut):
    """One side in one cell: requests, share, rows measured and quantiles (ms)."""

    requests: int
    share: float | None
    ttft_n: int = Field(description="rows that measured TTFT")
    itl_n: int = Field(description="rows that measured ITL")
    goodput: float | None = Field(description="against the engine's SLO; null without one")


class CellRatioOut(CellQuantilesOut):
    """benchmark ÷ production; null where a side has fewer than min_samples measured rows."""


class CellOut(BaseModel):
    """One ISL × OSL cell either side has requests in."""

    isl_from: int
    osl_from: int
    shape: str = Field(description="e.g. 'ISL 256–512 × OSL 128–256'")
    production: CellSideOut
    benchmark: CellSideOut
    ratio: CellRatioOut | None = Field(description="null when no ratio could be taken")


class FiguresOut(BaseModel):
    """The model's latencies (ms) for one replica."""

    ttft_ms: float | None = Field(description="mean over requests")
    itl_ms: float | None = Field(description="mean per output token")
    e2e_ms: float | None


class PredictionOut(BaseModel):
    """The performance model at production's mix and busiest hour (as
    /api/engines/{name}/performance gives it), raw and calibrated to production."""

    available: bool
    why_not: str | None = Field(description="why there is no prediction (no profile, say)")
    concurrency: float | None = Field(None, description="requests in flight per replica")
    concurrency_from: str | None = None
    observed_peak_in_flight: float | None = None
    mix: str | None = None
    model: FiguresOut | None = None
    calibrated: FiguresOut | None = None
    source: str | None = None
    error: str = Field(description="the model's stated error against published figures")


class CompareOut(BaseModel):
    """GET /api/compare."""

    engine: str
    bins: str
    isl_edges: list[int]
    osl_edges: list[int]
    production: SideOut
    benchmark: SideOut
    shape: ShapeOut
    min_samples: int
    headlines: list[HeadlineOut]
    cells: list[CellOut] = Field(description="the cells production sends most first")
    slo: SloOut | None = Field(description="the engine's SLO both sides are judged against")
    how_to_set: str | None = Field(description="with slo=null: how to set one")
    prediction: PredictionOut
    notes: list[str]
