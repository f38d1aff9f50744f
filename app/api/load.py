"""GET /api/load and /api/latency/inflight: requests in flight per engine, and latency by the
requests in flight at arrival (exact, from raw rows)."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Annotated, Literal

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response
from pydantic import BaseModel, Field

from app.analytics import load
from app.analytics.bins import LOG2_EDGES
from app.analytics.windows import BUCKETS
from app.api import csv
from app.api.csv import FormatQuery
from app.api.params import FilterDep
from app.api.schemas import LinksField, RawOnlyField
from app.api.shapes import raw_only
from app.server.deps import DbDep, SettingsDep

router = APIRouter(tags=["load"])
MAX_BUCKETS = 5000  # per engine: a year of hours, two weeks of 5-minute buckets


class LoadPoint(BaseModel):
    """Requests in flight on one engine over one time bucket."""

    engine: str | None = Field(description="null for requests that name no engine")
    bucket: datetime = Field(description="the bucket's start, in the server's time zone")
    inflight_mean: float = Field(
        description="time-weighted mean: time in flight inside the bucket / its length"
    )
    inflight_max: int = Field(description="the most in flight at once for a positive time")


class LoadOut(BaseModel):
    """GET /api/load: in-flight counts per engine and bucket, every bucket of the window."""

    bucket: str = Field(description="5m, 1h or 1d")
    tz: str
    start: datetime | None = Field(description="the window the series covers")
    end: datetime | None
    points: list[LoadPoint]
    raw_only_note: str | None = RawOnlyField
    links: dict[str, str] | None = LinksField


class InflightLevel(BaseModel):
    """The requests that arrived with inflight_lo..inflight_hi requests in flight on their
    engine (itself included), and their latencies (ms; null when none of them has the value)."""

    engine: str | None = Field(description="null for no engine, or when per_engine=false")
    inflight_lo: int
    inflight_hi: int = Field(description="inclusive; the last level's is the most seen in it")
    isl_from: int | None = Field(
        None, description="with by_isl=true: the log2 ISL bin [isl_from, next isl_from)"
    )
    inflight_mean: float
    requests: int
    ttft_p50: float | None
    ttft_p90: float | None
    ttft_p99: float | None
    itl_p50: float | None
    itl_p90: float | None
    itl_p99: float | None
    isl_mean: float
    osl_mean: float


class InflightOut(BaseModel):
    """GET /api/latency/inflight: latency by the requests in flight at arrival."""

    edges: list[int] = Field(description="lower edges of the in-flight levels")
    levels: list[InflightLevel]
    raw_only_note: str | None = RawOnlyField
    links: dict[str, str] | None = LinksField


def _number(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def _engine(value) -> str | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


@router.get(
    "/api/load",
    response_model=LoadOut,
    summary="Requests in flight per engine",
    responses=csv.RESPONSES,
)
def inflight(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    settings: SettingsDep,
    bucket: Annotated[
        Literal["5m", "1h", "1d"] | None,
        Query(description="bucket length; default 5m up to a day, 1h up to 31 days, else 1d"),
    ] = None,
    format: FormatQuery = "json",
) -> LoadOut | Response:
    """The time-weighted mean and the most requests in flight per engine and time bucket
    (exact, from raw rows). An open start or end of the window falls back to the first start
    or the last end of the kept requests. A request is in flight on its engine from started_at
    to started_at + e2e_ms (requests without e2e_ms count nowhere); an engine's load is all of
    its requests whatever the filter, which picks the engines (those of the requests it keeps).
    As CSV: the points."""
    cur = db.cursor()
    start, end = load.series_window(cur, flt)
    chosen = bucket or load.bucket_for(start, end)
    if start is not None and end is not None:
        count = (end - start).total_seconds() / BUCKETS[chosen]
        if count > MAX_BUCKETS:
            raise HTTPException(
                422,
                detail=f"invalid parameters: bucket: {chosen} makes {count:,.0f} buckets of "
                f"this window, more than {MAX_BUCKETS:,}; choose a longer bucket or a "
                "shorter window",
            )
    frame = load.inflight_series(cur, flt, chosen, settings.tz)
    points = [
        LoadPoint(
            engine=_engine(r["engine"]),
            bucket=r["bucket"],
            inflight_mean=float(r["inflight_mean"]),
            inflight_max=int(r["inflight_max"]),
        )
        for r in frame.to_dict("records")
    ]
    body = LoadOut(
        bucket=chosen,
        tz=settings.tz,
        start=start,
        end=end,
        points=points,
        **raw_only(cur, flt),
        links=csv.links(request),
    )
    return csv.listed("load", body, "points", LoadPoint) if format == "csv" else body


@router.get(
    "/api/latency/inflight",
    response_model=InflightOut,
    summary="Latency by requests in flight at arrival",
    responses=csv.RESPONSES,
)
def latency_by_inflight(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    by_isl: Annotated[
        bool, Query(description="split each level by log2 ISL bin too (adds isl_from)")
    ] = False,
    per_engine: Annotated[
        bool, Query(description="one row per engine and level; false pools the engines")
    ] = True,
    format: FormatQuery = "json",
) -> InflightOut | Response:
    """TTFT and ITL p50/p90/p99, mean ISL and OSL of the kept requests, by how many requests
    were in flight on their engine when each arrived, itself included (levels 1, 2, 3-4, 5-8,
    9-16 …; exact, from raw rows). A request is in flight from started_at to started_at +
    e2e_ms; an engine's load is all of its requests whatever the filter, which picks the
    requests read (and so the engines). As CSV: the levels."""
    frame = load.latency_by_inflight(
        db.cursor(), flt, isl_edges=LOG2_EDGES if by_isl else None, per_engine=per_engine
    )
    levels = []
    for r in frame.to_dict("records"):
        levels.append(
            InflightLevel(
                engine=_engine(r["engine"]),
                inflight_lo=int(r["inflight_lo"]),
                inflight_hi=int(r["inflight_hi"]),
                isl_from=int(r["isl_from"]) if by_isl else None,
                inflight_mean=float(r["inflight_mean"]),
                requests=int(r["requests"]),
                **{
                    f"{m}_{p}": _number(r[f"{m}_{p}"])
                    for m in ("ttft", "itl")
                    for p in load.QUANTILE_NAMES
                },
                isl_mean=float(r["isl_mean"]),
                osl_mean=float(r["osl_mean"]),
            )
        )
    body = InflightOut(
        edges=list(load.INFLIGHT_EDGES),
        levels=levels,
        **raw_only(db.cursor(), flt),
        links=csv.links(request),
    )
    return (
        csv.listed("latency-inflight", body, "levels", InflightLevel) if format == "csv" else body
    )
