"""Query parameters shared by the analytics routes, turned into an analytics Filter."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import Depends, HTTPException, Query
from pydantic import AfterValidator

from app.analytics.filters import Filter, time_problem

_LIST = "Repeat the parameter to keep several values."


def _supported(value: datetime) -> datetime:
    # Named by FastAPI's 422 with the parameter's place (query.start …): year 1 or 9999 with
    # an offset overflows every calendar the window meets.
    if (problem := time_problem("time", value)) is not None:
        raise ValueError(problem.removeprefix("time: "))
    return value


# A time parameter of any route: ISO 8601, 1970-01-01 ≤ t < 2200-01-01 (UTC).
Time = Annotated[datetime, AfterValidator(_supported)]


def utc(value: datetime | None) -> datetime | None:
    """An aware datetime (UTC when the value had no zone)."""
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


async def filter_params(
    start: Annotated[
        Time | None, Query(description="Window start, ISO 8601 (UTC if no zone).")
    ] = None,
    end: Annotated[Time | None, Query(description="Window end (exclusive), ISO 8601.")] = None,
    model: Annotated[list[str] | None, Query(description=f"Models. {_LIST}")] = None,
    engine: Annotated[list[str] | None, Query(description=f"Engines. {_LIST}")] = None,
    gateway: Annotated[list[str] | None, Query(description=f"Gateways. {_LIST}")] = None,
    tenant: Annotated[list[str] | None, Query(description=f"Tenants. {_LIST}")] = None,
    status: Annotated[list[str] | None, Query(description=f"ok, error, cancelled. {_LIST}")] = None,
) -> Filter:
    """The filter of an analytics request; 422 naming the parameter when it is inconsistent."""
    start, end = utc(start), utc(end)
    if start is not None and end is not None and start >= end:
        raise HTTPException(422, detail="invalid parameters: start: must be before end")
    bad = [s for s in status or [] if s not in ("ok", "error", "cancelled")]
    if bad:
        raise HTTPException(
            422, detail=f"invalid parameters: status: {bad[0]!r} is not ok, error or cancelled"
        )
    return Filter(
        start,
        end,
        tuple(model or ()),
        tuple(engine or ()),
        tuple(gateway or ()),
        tuple(tenant or ()),
        tuple(status or ()),
    )


FilterDep = Annotated[Filter, Depends(filter_params)]
