"""GET /api/latency/* and /api/traffic: how fast requests were served, and how many came."""

from __future__ import annotations

import math
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.analytics import latency, traffic, windows
from app.api import csv
from app.api.csv import FormatQuery
from app.api.params import FilterDep
from app.api.schemas import (
    E2eOut,
    ItlByPositionOut,
    PositionBin,
    TrafficOut,
    TrafficPoint,
    TrendOut,
    TrendPoint,
    TtftBin,
    TtftVsIslOut,
)
from app.api.shapes import raw_only, sampled, source
from app.server.deps import DbDep, SettingsDep

router = APIRouter(tags=["latency and traffic"])
ExactDep = Annotated[
    bool, Query(description="exact quantiles from raw rows even for long windows (slower)")
]
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
TrafficTable = Annotated[
    Literal["points", "weekday_hour"],
    Query(
        description="format=csv: points (rates per bucket, the default) or weekday_hour "
        "(weekday, hour, requests: the 7 x 24 matrix in long form)"
    ),
]


def _clean(record: dict) -> dict:
    """NaN (no data in a bucket) becomes null in JSON."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}


@router.get(
    "/api/latency/trend",
    response_model=TrendOut,
    response_model_exclude_unset=True,
    responses=csv.RESPONSES,
)
def latency_trend(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    settings: SettingsDep,
    exact: ExactDep = False,
    format: FormatQuery = "json",
) -> TrendOut | Response:
    """p50/p90/p99 of TTFT, ITL and E2E per time bucket (5 min, 1 h or 1 d from the window).
    Hourly and daily buckets of windows of a day or more come from hourly rollups (within
    ±0.99%, see `relative_error`); `exact=true` reads raw rows. As CSV: the points."""
    cur = db.cursor()
    start, end, _ = windows.span(cur, flt)
    bucket = windows.bucket_for(start, end)
    frame = latency.trend(cur, flt, bucket, settings.tz, exact=exact)
    seconds = windows.BUCKETS[bucket]
    points = [TrendPoint(**_clean(r)) for r in frame.to_dict("records")]
    body = TrendOut(
        bucket=bucket,
        points=points,
        relative_error=frame.attrs["relative_error"],
        **sampled(cur, flt),
        **source(cur, flt, seconds, settings.tz, rolled=not exact),
        links=csv.links(request),
    )
    return csv.listed("latency-trend", body, "points", TrendPoint) if format == "csv" else body


@router.get("/api/latency/ttft-vs-isl", response_model=TtftVsIslOut, responses=csv.RESPONSES)
def ttft_vs_isl(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    exact: ExactDep = False,
    format: FormatQuery = "json",
) -> TtftVsIslOut | Response:
    """Median and p90 TTFT per log2 ISL bin, and the fitted ms per 1,000 input tokens.
    Windows of a day or more are read from hourly rollups (medians and p90s within ±0.99%,
    see `relative_error`); `exact=true` reads raw rows. As CSV: the bins (not the slope)."""
    frame, slope = latency.ttft_vs_isl(db.cursor(), flt, exact=exact)
    bins = [
        TtftBin(
            isl_from=int(r["isl_from"]),
            requests=int(r["requests"]),
            ttft_p50=float(r["ttft_p50"]),
            ttft_p90=float(r["ttft_p90"]),
        )
        for r in frame.to_dict("records")
    ]
    body = TtftVsIslOut(
        bins=bins,
        slope_ms_per_1k_tokens=slope,
        relative_error=frame.attrs["relative_error"],
        **(raw_only(db.cursor(), flt) if not frame.attrs["relative_error"] else {}),
        links=csv.links(request),
    )
    return csv.listed("ttft-vs-isl", body, "bins", TtftBin) if format == "csv" else body


@router.get(
    "/api/latency/itl-by-position", response_model=ItlByPositionOut, responses=csv.RESPONSES
)
def itl_by_position(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    exact: ExactDep = False,
    format: FormatQuery = "json",
) -> ItlByPositionOut | Response:
    """Median and p90 inter-token gap per output-token position bucket. Windows of a day or
    more are read from hourly rollups (within ±0.99%, see `relative_error`); shorter windows,
    or `exact=true`, are exact. As CSV: the bins."""
    frame = latency.itl_by_position(db.cursor(), flt, exact=exact)
    body = ItlByPositionOut(
        relative_error=frame.attrs["relative_error"],
        **(raw_only(db.cursor(), flt) if not frame.attrs["relative_error"] else {}),
        bins=[
            PositionBin(
                position_from=int(r["position_from"]),
                gaps=int(r["gaps"]),
                itl_p50=float(r["itl_p50"]),
                itl_p90=float(r["itl_p90"]),
            )
            for r in frame.to_dict("records")
        ],
        links=csv.links(request),
    )
    return csv.listed("itl-by-position", body, "bins", PositionBin) if format == "csv" else body


@router.get("/api/latency/e2e", response_model=E2eOut, responses=csv.RESPONSES)
def e2e(
    request: Request, db: DbDep, flt: FilterDep, format: FormatQuery = "json"
) -> E2eOut | Response:
    """The distribution of time to completion. As CSV: one row per bin (e2e_from_ms,
    requests)."""
    frame = latency.e2e_distribution(db.cursor(), flt)
    counts = [int(c) for c in frame["requests"]]
    edges = [int(e) for e in frame["e2e_from_ms"]]
    if format == "csv":
        return csv.answer("e2e", ("e2e_from_ms", "requests"), zip(edges, counts, strict=True))
    return E2eOut(
        edges_ms=edges,
        counts=counts,
        total=sum(counts),
        **raw_only(db.cursor(), flt),
        links=csv.links(request),
    )


@router.get(
    "/api/traffic",
    response_model=TrafficOut,
    response_model_exclude_unset=True,
    responses=csv.RESPONSES,
)
def traffic_view(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    settings: SettingsDep,
    format: FormatQuery = "json",
    table: TrafficTable = "points",
) -> TrafficOut | Response:
    """Requests/s and tokens/s over time, and the weekday x hour-of-day matrix. As CSV: the
    points, or with table=weekday_hour the matrix (weekday, hour, requests)."""
    cur = db.cursor()
    start, end, _ = windows.span(cur, flt)
    bucket = windows.bucket_for(start, end)
    frame = traffic.rates(cur, flt, bucket, settings.tz)
    points = [
        TrafficPoint(
            bucket=r["bucket"],
            requests=int(r["requests"]),
            requests_per_s=float(r["requests_per_s"]),
            input_tokens_per_s=float(r["input_tokens_per_s"]),
            output_tokens_per_s=float(r["output_tokens_per_s"]),
        )
        for r in frame.to_dict("records")
    ]
    matrix = traffic.hour_weekday(cur, flt, settings.tz)
    seconds = windows.BUCKETS[bucket]
    body = TrafficOut(
        bucket=bucket,
        tz=settings.tz,
        points=points,
        weekday_hour=matrix.tolist(),
        **sampled(cur, flt),
        **source(cur, flt, seconds, settings.tz),
        links=csv.links(request, tables=("weekday_hour",)),
    )
    if format == "csv" and table == "weekday_hour":
        cells = [
            [day, hour, n]
            for day, row in zip(WEEKDAYS, body.weekday_hour, strict=True)
            for hour, n in enumerate(row)
        ]
        return csv.answer("traffic-weekday-hour", ("weekday", "hour", "requests"), cells)
    return csv.listed("traffic", body, "points", TrafficPoint) if format == "csv" else body
