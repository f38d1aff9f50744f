"""GET /api/latency/* and /api/traffic: how fast requests were served, and how many came."""

from __future__ import annotations

import math
from typing import Annotated

from fastapi import APIRouter, Query

from app.analytics import latency, traffic, windows
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


def _clean(record: dict) -> dict:
    """NaN (no data in a bucket) becomes null in JSON."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in record.items()}


@router.get("/api/latency/trend", response_model=TrendOut, response_model_exclude_unset=True)
def latency_trend(
    db: DbDep, flt: FilterDep, settings: SettingsDep, exact: ExactDep = False
) -> TrendOut:
    """p50/p90/p99 of TTFT, ITL and E2E per time bucket (5 min, 1 h or 1 d from the window).
    Hourly and daily buckets of windows of a day or more come from hourly rollups (within
    ±0.99%, see `relative_error`); `exact=true` reads raw rows."""
    cur = db.cursor()
    start, end, _ = windows.span(cur, flt)
    bucket = windows.bucket_for(start, end)
    frame = latency.trend(cur, flt, bucket, settings.tz, exact=exact)
    seconds = windows.BUCKETS[bucket]
    points = [TrendPoint(**_clean(r)) for r in frame.to_dict("records")]
    return TrendOut(
        bucket=bucket,
        points=points,
        relative_error=frame.attrs["relative_error"],
        **sampled(cur, flt),
        **source(cur, flt, seconds, settings.tz, rolled=not exact),
    )


@router.get("/api/latency/ttft-vs-isl", response_model=TtftVsIslOut)
def ttft_vs_isl(db: DbDep, flt: FilterDep, exact: ExactDep = False) -> TtftVsIslOut:
    """Median and p90 TTFT per log2 ISL bin, and the fitted ms per 1,000 input tokens.
    Windows of a day or more are read from hourly rollups (medians and p90s within ±0.99%,
    see `relative_error`); `exact=true` reads raw rows."""
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
    return TtftVsIslOut(
        bins=bins,
        slope_ms_per_1k_tokens=slope,
        relative_error=frame.attrs["relative_error"],
        **(raw_only(db.cursor(), flt) if not frame.attrs["relative_error"] else {}),
    )


@router.get("/api/latency/itl-by-position", response_model=ItlByPositionOut)
def itl_by_position(db: DbDep, flt: FilterDep, exact: ExactDep = False) -> ItlByPositionOut:
    """Median and p90 inter-token gap per output-token position bucket. Windows of a day or
    more are read from hourly rollups (within ±0.99%, see `relative_error`); shorter windows,
    or `exact=true`, are exact."""
    frame = latency.itl_by_position(db.cursor(), flt, exact=exact)
    return ItlByPositionOut(
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
    )


@router.get("/api/latency/e2e", response_model=E2eOut)
def e2e(db: DbDep, flt: FilterDep) -> E2eOut:
    """The distribution of time to completion."""
    frame = latency.e2e_distribution(db.cursor(), flt)
    counts = [int(c) for c in frame["requests"]]
    return E2eOut(
        edges_ms=[int(e) for e in frame["e2e_from_ms"]],
        counts=counts,
        total=sum(counts),
        **raw_only(db.cursor(), flt),
    )


@router.get("/api/traffic", response_model=TrafficOut, response_model_exclude_unset=True)
def traffic_view(db: DbDep, flt: FilterDep, settings: SettingsDep) -> TrafficOut:
    """Requests/s and tokens/s over time, and the weekday x hour-of-day matrix."""
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
    return TrafficOut(
        bucket=bucket,
        tz=settings.tz,
        points=points,
        weekday_hour=matrix.tolist(),
        **sampled(cur, flt),
        **source(cur, flt, seconds, settings.tz),
    )
