"""Predicted latency and throughput: /api/performance (what-ifs) and per engine."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, HTTPException, Query
from pydantic import ValidationError

from app.api.params import Time, utc
from app.server.deps import ClockDep, DbDep
from app.server.errors import ErrorResponse
from app.services.perfmodel import PerfModelError
from app.services.performance import (
    Mode,
    engine_performance,
    predict,
    prediction_dict,
    profile_for,
)
from app.services.profiles import NoProfile, load_profile, problem
from app.services.rightsizing import DEFAULT_WINDOW, window_note
from app.sizing.perf import Shape

router = APIRouter(tags=["performance"])
ANSWERS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "The engine has no stored profile."},
    422: {"model": ErrorResponse, "description": "The model cannot answer for these values."},
}
Framework = Literal["trtllm", "vllm", "sglang", "nim"]
Dtype = Literal["bf16", "fp16", "fp8", "int8", "fp4", "int4"]
KvDtype = Literal["bf16", "fp16", "fp8", "int8"]


def _invalid(exc: Exception) -> HTTPException:
    text = problem(exc) if isinstance(exc, ValidationError) else str(exc)
    return HTTPException(422, detail=f"invalid parameters: {text}")


@router.get("/api/performance", responses=ANSWERS, summary="Predict one replica's performance")
def get_performance(
    model: Annotated[str, Query(description="A catalog model or a Hugging Face id.")],
    gpu: Annotated[str, Query(description="A catalog GPU.")],
    isl: Annotated[int, Query(ge=1, le=10_000_000, description="Input tokens per request.")],
    osl: Annotated[int, Query(ge=1, le=10_000_000, description="Output tokens per request.")],
    framework: Framework = "vllm",
    tp: Annotated[int, Query(ge=1, le=64)] = 1,
    pp: Annotated[int, Query(ge=1, le=64)] = 1,
    weight_dtype: Dtype = "bf16",
    kv_dtype: KvDtype = "bf16",
    memory_fraction: Annotated[float, Query(gt=0, le=1)] = 0.9,
    max_num_tokens: Annotated[int | None, Query(ge=1, le=10_000_000)] = None,
    concurrency: Annotated[
        float | None, Query(ge=1, le=100_000, description="Requests in flight.")
    ] = None,
    rate: Annotated[
        float | None, Query(gt=0, le=1_000_000, description="Arrivals per second.")
    ] = None,
    max_throughput: Annotated[
        bool, Query(description="Search the batch size with the most output tokens/s.")
    ] = False,
) -> dict[str, Any]:
    """TTFT, ITL, output tokens/s and requests/s of one replica (same as `tokenshape perf`)."""
    given = sum(
        x is not None and x is not False for x in (concurrency, rate, max_throughput or None)
    )
    if given != 1:
        raise HTTPException(
            422,
            detail="invalid parameters: give exactly one of concurrency, rate or max_throughput",
        )
    try:
        profile = profile_for(
            model=model,
            gpu=gpu,
            tensor_parallel=tp,
            pipeline_parallel=pp,
            framework=framework,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            memory_fraction=memory_fraction,
            max_num_tokens=max_num_tokens,
        )
        mode: Mode = "max-throughput" if max_throughput else "rate" if rate else "concurrency"
        shapes = [Shape(isl, osl)]
        eng, p = predict(profile, shapes, mode=mode, concurrency=concurrency, rate=rate)
    except (ValidationError, PerfModelError, ValueError) as exc:
        raise _invalid(exc) from None
    return prediction_dict(eng, p, shapes)


@router.get(
    "/api/engines/{name}/performance",
    responses=ANSWERS,
    summary="An engine's predicted performance at its own traffic, raw and calibrated",
)
def get_engine_performance(
    name: str,
    db: DbDep,
    clock: ClockDep,
    isl: Annotated[
        int | None, Query(ge=1, le=10_000_000, description="Default: the observed mix.")
    ] = None,
    osl: Annotated[
        int | None, Query(ge=1, le=10_000_000, description="Default: the observed mix.")
    ] = None,
    concurrency: Annotated[
        float | None,
        Query(ge=1, le=100_000, description="Default: the busiest hour's requests in flight."),
    ] = None,
    start: Annotated[Time | None, Query(description="Window start (default: 7 days ago).")] = None,
    end: Annotated[Time | None, Query(description="Window end (default: now).")] = None,
) -> dict[str, Any]:
    """The observed ISL × OSL mix evaluated cell by cell at the observed load, with the
    decode and prefill corrections fitted to the engine's own latencies."""
    end = utc(end) or clock()
    start = utc(start) or end - DEFAULT_WINDOW
    if start >= end:
        raise HTTPException(422, detail="invalid parameters: start: must be before end")
    try:
        profile = load_profile(db, name)
    except NoProfile as exc:
        raise HTTPException(404, detail=str(exc)) from None
    try:
        out = engine_performance(
            db, name, profile, start=start, end=end, isl=isl, osl=osl, concurrency=concurrency
        )
    except LookupError as exc:
        raise HTTPException(422, detail=f"invalid parameters: {exc.args[0]}") from None
    except (PerfModelError, ValueError) as exc:
        raise _invalid(exc) from None
    return out | {"raw_only_note": window_note(db, name, start, end, clock())}
