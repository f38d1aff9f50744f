"""Every router of the app, collected in one place, in the order they must be matched."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI

from app.api import (
    admin,
    backup,
    compare,
    drift,
    engines,
    export,
    goodput,
    health,
    latency,
    load,
    metrics,
    openapi,
    performance,
    reports,
    rollups,
    shapes,
)
from app.api.annotations import router as annotations_router  # `annotations`: __future__'s
from app.auth import routes as auth_routes


def include(app: FastAPI, ingest: APIRouter) -> None:
    """Add the login, admin, ingest (`ingest`, from the composition root) and API routers,
    then the 404 for unknown /api paths and the OpenAPI document as the app answers."""
    app.include_router(auth_routes.router)
    app.include_router(admin.router)
    app.include_router(backup.router)
    app.include_router(ingest)
    app.include_router(rollups.router)  # /v1/rollups: lake imports and pushes
    app.include_router(health.router)
    app.include_router(shapes.router)
    app.include_router(latency.router)
    app.include_router(load.router)
    app.include_router(goodput.router)
    app.include_router(engines.router)
    app.include_router(annotations_router)  # /api/annotations: notes and profile changes
    app.include_router(performance.router)
    app.include_router(drift.router)
    app.include_router(export.router)
    app.include_router(compare.router)  # /api/compare: a benchmark beside production
    app.include_router(reports.router)  # /api/reports: the weekly email, previewed or sent
    app.include_router(metrics.router)
    app.include_router(openapi.unknown)  # after every /api router, before Dash's pages
    openapi.install(app)  # the document as the app answers: plain 422s, the gate's 401/403
