"""GET /api/compare: a benchmark run beside the production traffic of the same engine."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query

from app.api.params import Time, utc
from app.api.schemas_compare import CompareOut
from app.server.deps import ClockDep, DbDep, FleetDep
from app.server.errors import ErrorResponse
from app.services import compare as service

router = APIRouter(tags=["compare"])
ANSWERS: dict[int | str, dict[str, Any]] = {
    422: {
        "model": ErrorResponse,
        "description": "A parameter is missing or inconsistent, or a side holds no requests: "
        "the answer names the parameter and what to do.",
    }
}


@router.get(
    "/api/compare",
    response_model=CompareOut,
    responses=ANSWERS,
    summary="Benchmark vs production for one engine",
)
def get_compare(
    db: DbDep,
    clock: ClockDep,
    fleet: FleetDep,
    engine: Annotated[str, Query(description="The engine, as its production requests name it.")],
    benchmark: Annotated[
        str,
        Query(
            description="The gateway the benchmark was imported under "
            "(`tokenshape import FILE --format aiperf --gateway NAME`)."
        ),
    ],
    start: Annotated[
        Time | None, Query(description="Production window start (default: 7 days before end).")
    ] = None,
    end: Annotated[
        Time | None, Query(description="Production window end, exclusive (default: now).")
    ] = None,
    bench_start: Annotated[
        Time | None, Query(description="Benchmark window start (default: its first row).")
    ] = None,
    bench_end: Annotated[
        Time | None, Query(description="Benchmark window end (default: after its last row).")
    ] = None,
    bins: Annotated[
        Literal["log2", "log2half"], Query(description="The heat maps' bins, the same on both.")
    ] = "log2",
    min_samples: Annotated[
        int,
        Query(
            ge=1,
            le=1_000_000,
            description="Measured requests each side needs in a cell before its ratio is given.",
        ),
    ] = service.MIN_SAMPLES,
    match_tvd: Annotated[
        float,
        Query(gt=0, le=1, description="The largest total variation distance that is a match."),
    ] = service.MATCH_TVD,
) -> CompareOut:
    """Production (the engine's requests from every gateway but the benchmark's, in the window)
    beside the benchmark (the gateway's rows naming the engine, else a model of it, else all of
    them, as `match` says): both ISL × OSL heat maps on the same bins, their total variation
    distance in words, TTFT and ITL p50/p90/p99 per cell with benchmark ÷ production where both
    sides have `min_samples` measured requests, goodput of each against the engine's SLO, and
    the performance model's prediction for the production load. Requests with status ok,
    exact, from raw rows."""
    try:
        found = service.compare(
            db,
            engine,
            benchmark,
            now=clock(),
            fleet=fleet,
            start=utc(start),
            end=utc(end),
            bench_start=utc(bench_start),
            bench_end=utc(bench_end),
            bins=bins,
            min_samples=min_samples,
            threshold=match_tvd,
        )
    except service.CompareError as exc:
        raise HTTPException(422, detail=f"invalid parameters: {exc.param}: {exc}") from None
    return CompareOut.model_validate(service.comparison_dict(found))
