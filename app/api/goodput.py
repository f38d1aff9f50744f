"""GET /api/goodput: the SLO ledger — goodput over time, per ISL × OSL cell, tenant and engine,
and the likely causes of the misses (exact, from raw rows)."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.api import csv
from app.api.csv import FormatQuery
from app.api.params import FilterDep
from app.api.schemas import LinksField, RawOnlyField
from app.server.deps import DbDep, SettingsDep
from app.services import slo
from app.sizing.slo import Fleet

router = APIRouter(tags=["goodput"])


class SloOut(BaseModel):
    """Latency targets (ms) at one percentile; `source` is engine or fleet."""

    ttft_ms: float | None
    itl_ms: float | None
    e2e_ms: float | None
    percentile: float
    source: str
    words: str = Field(description="e.g. 'TTFT p95 ≤ 500 ms, ITL p95 ≤ 50 ms'")


class SlosOut(BaseModel):
    """Whose targets apply: the fleet's default, and each engine's with a profile."""

    default: SloOut | None = Field(description="for requests with no engine or no profile")
    engines: dict[str, SloOut]


class Counts(BaseModel):
    """Weighted request counts of a group and its goodput against its target."""

    requests: float | None = Field(
        description="requests with an SLO (good + missed + not measured)"
    )
    good: float | None
    missed: float | None
    not_measured: float | None = Field(
        description="a targeted value not reported (and none above its target): left out"
    )
    no_slo: float | None = Field(description="requests neither their engine nor the fleet targets")
    goodput: float | None = Field(description="good / (good + missed); null when neither")
    target: float | None = Field(description="the SLO percentile as a share (0.95)")
    met: bool | None = Field(description="goodput ≥ target")


class TimePoint(Counts):
    """One time bucket."""

    t: str = Field(description="the bucket's start, in the server's time zone")


class CellOut(Counts):
    """One ISL × OSL cell of the heat map's bins, pooled over engines."""

    isl_from: int
    osl_from: int
    cause: str | None = Field(description="the likely cause of the cell's misses, if it misses")


class TenantOut(Counts):
    """One tenant (null: requests naming none)."""

    tenant: str | None


class CauseOut(BaseModel):
    """One cause of misses, in words with its numbers."""

    kind: str = Field(
        description="queueing, prefill, ttft, decode-engine, decode-load, decode, output-length"
    )
    label: str
    words: str
    missed: float = Field(description="the misses on the measure this cause explains")


class EngineCauseOut(BaseModel):
    """One kind of cause summed over an engine's missing shapes."""

    kind: str
    label: str
    missed: float
    example: str | None


class EngineOut(Counts):
    """One engine (null: requests naming none) with its targets, attainment and causes."""

    engine: str | None
    slo: SloOut | None
    ttft_pq_ms: float | None = Field(description="TTFT at the engine's SLO percentile")
    itl_pq_ms: float | None = Field(description="ITL at the engine's SLO percentile")
    causes: list[EngineCauseOut]
    words: str


class MissOut(Counts):
    """One engine's ISL × OSL cell that misses its SLO, with its causes."""

    engine: str | None
    isl_from: int
    osl_from: int
    shape: str
    excess_missed: float | None = Field(description="misses beyond what the percentile allows")
    ttft_pq_ms: float | None
    itl_pq_ms: float | None
    isl_p50: float | None
    osl_p50: float | None
    causes: list[CauseOut]
    words: str


class Window(BaseModel):
    """The filter's window (null: open)."""

    start: str | None
    end: str | None


class GoodputOut(BaseModel):
    """GET /api/goodput."""

    exact: bool = Field(description="always true: computed from raw rows, not rollups")
    rule: str = Field(description="how a request is judged, in words")
    window: Window
    slo: SlosOut
    set: bool = Field(description="false when no target is set anywhere")
    how_to_set: str | None = Field(description="with set=false: how to set a target")
    totals: Counts | None
    bucket: str | None = Field(description="over_time's bucket: 5m, 1h or 1d")
    bins: str | None
    over_time: list[TimePoint]
    by_cell: list[CellOut]
    by_tenant: list[TenantOut]
    by_engine: list[EngineOut]
    misses: list[MissOut] = Field(description="cells that miss, the most excess misses first")
    sampled: bool = Field(description="counts are estimates from sampled rows")
    raw_only_note: str | None = RawOnlyField
    links: dict[str, str] | None = LinksField


# format=csv: each table of the answer, its item model and the columns it leads with.
TABLES: dict[str, tuple[type[BaseModel], tuple[str, ...]]] = {
    "over_time": (TimePoint, ("t",)),
    "by_cell": (CellOut, ("isl_from", "osl_from")),
    "by_tenant": (TenantOut, ("tenant",)),
    "by_engine": (EngineOut, ("engine",)),
    "misses": (MissOut, ("engine", "isl_from", "osl_from", "shape")),
}
Table = Annotated[
    Literal["over_time", "by_cell", "by_tenant", "by_engine", "misses"],
    Query(
        description="format=csv: which table (over_time, the default, by_cell, by_tenant, "
        "by_engine or misses); nested values (an engine's slo, a miss's causes) are JSON text"
    ),
]


@router.get(
    "/api/goodput",
    response_model=GoodputOut,
    summary="Goodput and the SLO ledger",
    responses=csv.RESPONSES,
)
def get_goodput(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    settings: SettingsDep,
    bins: Annotated[
        Literal["log2", "log2half"], Query(description="the heat map's bins for by_cell")
    ] = "log2",
    format: FormatQuery = "json",
    table: Table = "over_time",
) -> GoodputOut | Response:
    """The share of requests that met every latency target of their engine (its profile's
    slo_* fields, else the fleet's TOKENSHAPE_SLO_*), over time, per ISL × OSL cell, tenant
    and engine, and the likely causes of the cells that miss (queueing, prefill, decode on the
    engine or under load), in words with their numbers. Exact, from raw rows, weighted by
    sampling; see `rule` for how a request is judged. As CSV: one of its tables (`table`)."""
    rep = slo.report(db, flt, Fleet.of(settings), tz=settings.tz, bins=bins)
    others = tuple(t for t in TABLES if t != "over_time")
    body = GoodputOut.model_validate(
        {**slo.report_dict(rep, flt), "links": csv.links(request, tables=others)}
    )
    if format == "csv":
        model, first = TABLES[table]
        header = csv.columns(model, first)
        rows = csv.records(header, csv.dumped(body)[table])
        return csv.answer(f"goodput-{table.replace('_', '-')}", header, rows)
    return body
