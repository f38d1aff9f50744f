"""Drift of every profiled engine's traffic from its bounds and from the week before: /api/drift"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from app.api.params import utc
from app.server.deps import ClockDep, DbDep
from app.services.rightsizing import drift_report
from app.storage.schema import EARLIEST, FUTURE_SLACK

router = APIRouter(tags=["drift"])


@router.get("/api/drift", summary="Drift of every engine's traffic from its bounds")
def get_drift(
    db: DbDep,
    clock: ClockDep,
    end: Annotated[
        datetime | None,
        Query(description="End of the last week (exclusive), ISO 8601; default now."),
    ] = None,
) -> dict[str, Any]:
    """Per engine: requests beyond the bounds, over-provisioning and week-over-week change of
    the last 7 days before `end` against the 7 days before those, each with a severity."""
    when = utc(end) or clock()
    if not EARLIEST <= when <= clock() + FUTURE_SLACK:
        raise HTTPException(
            422, detail="invalid parameters: end: must be between 2000-01-01 and tomorrow"
        )
    return drift_report(db, when)
