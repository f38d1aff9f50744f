"""The ingest lane (ingest/lane) refuses handlers it would call wrongly."""

from __future__ import annotations

import pytest
from fastapi import APIRouter, Depends
from starlette.requests import Request

from ingest import routes as ingest_routes
from ingest.lane import routes_for


def test_the_lane_refuses_a_handler_it_would_call_wrongly():
    router = APIRouter()

    @router.post("/v1/requests")
    async def other(request: Request) -> None:
        """A handler with parameters the lane does not pass."""

    with pytest.raises(TypeError, match="the ingest lane calls"):
        routes_for(router, frozenset({"/v1/requests"}))
    guarded = APIRouter(dependencies=[Depends(lambda: None)])
    guarded.post("/v1/logs")(ingest_routes.post_logs)
    with pytest.raises(TypeError, match="runs no route dependencies"):
        routes_for(guarded, frozenset({"/v1/logs"}))
    with pytest.raises(LookupError, match="/v1/nope"):
        routes_for(ingest_routes.router, frozenset({"/v1/requests", "/v1/logs", "/v1/nope"}))
