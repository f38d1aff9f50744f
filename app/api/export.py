"""GET /api/export: a window of traffic streamed as a replayable trace (Mooncake, AIPerf) or as
records (Parquet, CSV); GET /api/export/summary: what that export would hold, as JSON."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import StreamingResponse

from app.api.params import FilterDep
from app.server.deps import ClockDep, DbDep, SettingsDep
from app.services import export

router = APIRouter(tags=["export"])
SUMMARY_HEADER = "X-Tokenshape-Export"  # the summary, JSON in ASCII (app/cli/export.py reads it)

Format = Annotated[
    Literal["mooncake", "vllm", "aiperf", "parquet", "csv"],
    Query(
        description="mooncake (a trace AIPerf replays), vllm (Mooncake lines with fresh "
        "hash_ids, for vllm bench serve's timed_trace), aiperf (single_turn prompts), "
        "parquet or csv (the canonical records)"
    ),
]
MaxRequests = Annotated[
    int | None,
    Query(
        ge=1,
        description="at most N requests: a stratified sample keeping the ISL × OSL mix "
        "and the arrival pattern",
    ),
]
Speedup = Annotated[
    float,
    Query(ge=0.001, le=1_000_000, description="compress time by F (24: a day in an hour)"),
]
Peak = Annotated[
    float | None,
    Query(gt=0, le=1000, description="the busiest hour of the window with its rate scaled by N"),
]
Scale = Annotated[float, Query(gt=0, le=1000, description="scale the request rate by N")]
Seed = Annotated[int, Query(description="sampling and prompt seed")]
HashBlock = Annotated[
    int,
    Query(ge=1, le=1_000_000, description="format vllm: prompt tokens per hash id (default 512)"),
]


def _ask(
    flt: FilterDep,
    format: Format = "mooncake",
    max_requests: MaxRequests = None,
    speedup: Speedup = 1.0,
    peak: Peak = None,
    scale: Scale = 1.0,
    seed: Seed = 0,
    hash_block: HashBlock = export.DEFAULT_HASH_BLOCK,
) -> export.ExportAsk:
    """The export's parameters, shared by the file and its summary."""
    return export.ExportAsk(
        flt=flt,
        fmt=format,
        max_requests=max_requests,
        speedup=speedup,
        peak=peak,
        scale=scale,
        seed=seed,
        hash_block=hash_block,
    )


AskDep = Annotated[export.ExportAsk, Depends(_ask)]


def _plan(settings, clock, ask: export.ExportAsk, cur) -> export.Plan:
    try:
        return export.plan(cur, ask, clock(), tz=settings.tz)
    except export.ExportError as exc:
        raise HTTPException(422, detail=f"invalid parameters: {exc}") from None


@router.get("/api/export/summary")
def export_summary(
    db: DbDep,
    settings: SettingsDep,
    clock: ClockDep,
    ask: AskDep,
) -> dict:
    """What GET /api/export would write for the same parameters: counts, the distance of its
    ISL × OSL shape and arrival pattern from the source window, and notes."""
    the_plan = _plan(settings, clock, ask, db.cursor())
    return {**the_plan.summary.as_dict(), "lines": the_plan.summary.lines()}


@router.get(
    "/api/export",
    response_class=StreamingResponse,
    responses={200: {"description": "the export's bytes; its summary in X-Tokenshape-Export"}},
)
def export_file(
    db: DbDep,
    settings: SettingsDep,
    clock: ClockDep,
    ask: AskDep,
) -> StreamingResponse:
    """The export, streamed a batch of rows at a time (a window of any size in bounded
    memory); the summary of /api/export/summary rides in the X-Tokenshape-Export header."""
    # The stream outlives this call and is read from other threads: a connection of its own.
    cur = db.new_cursor()
    try:
        the_plan = _plan(settings, clock, ask, cur)
    except BaseException:
        cur.close()
        raise

    def body() -> Iterator[bytes]:
        try:
            yield from export.chunks(cur, the_plan)
        finally:
            cur.close()

    summary = {**the_plan.summary.as_dict(), "lines": the_plan.summary.lines()}
    return StreamingResponse(
        body(),
        media_type=export.MEDIA_TYPES[ask.fmt],
        headers={
            "Content-Disposition": f'attachment; filename="{export.filename(the_plan)}"',
            SUMMARY_HEADER: json.dumps(summary, ensure_ascii=True, default=str),
        },
    )
