"""GET /api/heatmap, /api/quantiles, /api/shapes: the shape of the traffic as JSON."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from app.analytics import rollups, sampling, shapes
from app.analytics.filters import Filter
from app.analytics.rollups.missing import raw_only_note
from app.api import csv
from app.api.csv import FormatQuery
from app.api.params import FilterDep
from app.api.schemas import HeatmapOut, Quantiles, QuantilesOut, SamplingOut, ShapesOut
from app.server.deps import DbDep

router = APIRouter(tags=["shapes"])
MEASURES = ("isl", "osl", "ttft_ms", "itl_ms", "e2e_ms")  # the rows of the quantiles' CSV


def sampled(cur, flt) -> dict:
    """The `sampling` key of a view whose window holds sampled rows; else nothing, and the
    routes leave the key out (`response_model_exclude_unset`)."""
    info = sampling.sampling(cur, flt)
    return {"sampling": SamplingOut(**info.as_dict())} if info.sampled else {}


def answered(cur, flt, seconds: int | None = None, tz: str = "UTC") -> dict:
    """The `answered_from` key of a view the rollups answered (which tiers, what they could not
    count); else nothing, and the routes leave the key out."""
    text = rollups.coverage(cur, flt, seconds, tz)
    return {"answered_from": text} if text else {}


def raw_only(cur, flt: Filter) -> dict:
    """The `raw_only_note` key of a view that read raw rows only, over a window some of whose
    hours have none left (sealed, imported); else nothing, and the routes leave the key out."""
    text = raw_only_note(cur, flt)
    return {"raw_only_note": text} if text else {}


def source(
    cur, flt: Filter, seconds: int | None = None, tz: str = "UTC", *, rolled: bool = True
) -> dict:
    """`answered_from` when the rollups answered the view (`rolled`: it may read them, at
    `seconds` in `tz`), else `raw_only_note` when raw rows alone could not count the window."""
    return (answered(cur, flt, seconds, tz) if rolled else {}) or raw_only(cur, flt)


@router.get(
    "/api/heatmap",
    response_model=HeatmapOut,
    response_model_exclude_unset=True,
    responses=csv.RESPONSES,
)
def heatmap(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    bins: Annotated[
        Literal["log2", "log2half", "linear"],
        Query(description="log2 (0, 16, 32 … 128k), log2half, or linear"),
    ] = "log2",
    isl_width: Annotated[int | None, Query(ge=1, description="linear bins: ISL bin width")] = 256,
    osl_width: Annotated[int | None, Query(ge=1, description="linear bins: OSL bin width")] = 64,
    format: FormatQuery = "json",
) -> HeatmapOut | Response:
    """ISL x OSL request counts for the window. As CSV: one row per cell (isl_from,
    osl_from, requests), every cell of the grid, empty ones too."""
    hm = shapes.heatmap(db.cursor(), flt, bins=bins, isl_width=isl_width, osl_width=osl_width)
    if format == "csv":
        cells = [
            [isl, osl, int(n)]
            for isl, row in zip(hm.isl_edges, hm.counts.tolist(), strict=True)
            for osl, n in zip(hm.osl_edges, row, strict=True)
        ]
        return csv.answer("heatmap", ("isl_from", "osl_from", "requests"), cells)
    return HeatmapOut(
        bins=bins,
        isl_edges=list(hm.isl_edges),
        osl_edges=list(hm.osl_edges),
        counts=hm.counts.tolist(),
        total=hm.total,
        **sampled(db.cursor(), flt),
        **source(db.cursor(), flt, rolled=bins != "linear"),
        links=csv.links(request),
    )


@router.get(
    "/api/quantiles",
    response_model=QuantilesOut,
    response_model_by_alias=True,
    response_model_exclude_unset=True,
    responses=csv.RESPONSES,
)
def quantiles(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    exact: Annotated[
        bool,
        Query(description="exact quantiles from raw rows even for long windows (slower)"),
    ] = False,
    format: FormatQuery = "json",
) -> QuantilesOut | Response:
    """p50, p90, p99, p99.9 and max of ISL, OSL, TTFT, ITL and E2E.

    Windows of 24 whole hours or more come from hourly rollups, within ±0.99% (see
    `relative_error`); shorter windows, or `exact=true`, are exact. As CSV: one row per
    measure (measure, p50, p90, p99, p99.9, max)."""
    found = shapes.quantiles(db.cursor(), flt, exact=exact)
    body = QuantilesOut.model_validate(
        {
            **found,
            "relative_error": found.relative_error,
            **sampled(db.cursor(), flt),
            **source(db.cursor(), flt, rolled=not exact),
            "links": csv.links(request),
        }
    )
    if format == "csv":
        out = csv.dumped(body)
        header = csv.columns(Quantiles)
        rows = [[m, *(out[m][h] for h in header)] for m in MEASURES]
        return csv.answer("quantiles", ("measure", *header), rows)
    return body


@router.get(
    "/api/shapes",
    response_model=ShapesOut,
    response_model_exclude_unset=True,
    responses=csv.RESPONSES,
)
def four_shapes(
    request: Request,
    db: DbDep,
    flt: FilterDep,
    long_isl: Annotated[int, Query(ge=1, description="ISL at or above this is long")] = 1024,
    long_osl: Annotated[int, Query(ge=1, description="OSL at or above this is long")] = 256,
    format: FormatQuery = "json",
) -> ShapesOut | Response:
    """How many requests are long-in/short-out, long/long, short-in/long-out, short/short.
    As CSV: one row per shape (shape, requests, share)."""
    on_edges = long_isl in shapes.HALF_OCTAVE_EDGES and long_osl in shapes.HALF_OCTAVE_EDGES
    counts = shapes.four_shapes(db.cursor(), flt, long_isl=long_isl, long_osl=long_osl)
    total = sum(counts.values())
    shares = {k: (v / total if total else 0.0) for k, v in counts.items()}
    if format == "csv":
        rows = [[k, v, shares[k]] for k, v in counts.items()]
        return csv.answer("shapes", ("shape", "requests", "share"), rows)
    return ShapesOut(
        long_isl=long_isl,
        long_osl=long_osl,
        total=total,
        counts=counts,
        shares=shares,
        **sampled(db.cursor(), flt),
        **source(db.cursor(), flt, rolled=on_edges),
        links=csv.links(request),
    )
