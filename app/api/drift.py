"""Drift of every profiled engine's traffic from its bounds and from the week before: /api/drift"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request
from fastapi.responses import Response

from app.api import csv
from app.api.csv import FormatQuery
from app.api.params import Time, utc
from app.server.deps import ClockDep, DbDep
from app.services.rightsizing import drift_report
from app.storage.schema import EARLIEST, FUTURE_SLACK

router = APIRouter(tags=["drift"])
COLUMNS = ("engine", "kind", "severity", "message", "value")  # format=csv: a row per finding


@router.get(
    "/api/drift",
    summary="Drift of every engine's traffic from its bounds",
    response_model=dict[str, Any],
    responses=csv.RESPONSES,
)
def get_drift(
    request: Request,
    db: DbDep,
    clock: ClockDep,
    end: Annotated[
        Time | None,
        Query(description="End of the last week (exclusive), ISO 8601; default now."),
    ] = None,
    format: FormatQuery = "json",
) -> dict[str, Any] | Response:
    """Per engine: requests beyond the bounds, over-provisioning and week-over-week change of
    the last 7 days before `end` against the 7 days before those, each with a severity. The
    answer's `links.csv` is the same as CSV: one row per finding (engine, kind, severity,
    message, value)."""
    when = utc(end) or clock()
    if not EARLIEST <= when <= clock() + FUTURE_SLACK:
        raise HTTPException(
            422, detail="invalid parameters: end: must be between 2000-01-01 and tomorrow"
        )
    report = drift_report(db, when)
    if format == "csv":
        rows = [
            [e["engine"], *(f[c] for c in COLUMNS[1:])]
            for e in report["engines"]
            for f in e["findings"]
        ]
        return csv.answer("drift", COLUMNS, rows)
    return {**report, "links": csv.links(request)}
