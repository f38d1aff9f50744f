"""The composition root: the Runtime, the routers, Dash, and the lifespan that runs them."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import datetime

from fastapi import FastAPI

from app import __version__
from app.api import routers
from app.auth.gate import INGEST_PATHS, AuthGate
from app.config import Settings
from app.dashboard.shell import ADMIN_OUTPUTS, mount, warm_up
from app.dashboard.speedups.prefetched import PrefetchPages
from app.reports.send import deliver_week
from app.server import errors, headers, metrics
from app.server.body_limit import BodyLimit
from app.server.runtime import Runtime, utc_now
from app.storage.database import Database
from ingest import routes as ingest_routes
from ingest.lane import IngestLane

log = logging.getLogger("tokenshape")


def create_app(
    settings: Settings | None = None,
    *,
    clock: Callable[[], datetime] = utc_now,
    db: Database | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """Build the app; the database opens and the writer and jobs start in the lifespan."""
    settings = settings or Settings()
    runtime = Runtime.build(settings, db=db, clock=clock, monotonic=monotonic)

    def send_week(week, stop):
        return deliver_week(runtime.db, settings, week, clock=clock, stop=stop)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        async with runtime.running(send_week):
            await warm_up(app, runtime.auth.warm_up_key)
            log.info(
                "tokenshape %s serving %s (revision %s)",
                __version__,
                runtime.db.path,
                runtime.db.revision,
            )
            yield

    app = FastAPI(
        title="tokenshape",
        version=__version__,
        summary="The real ISL x OSL shape of LLM serving traffic, and engines sized to it.",
        lifespan=lifespan,
    )
    app.state.runtime = runtime
    if not settings.auth_enabled and not settings.loopback:
        log.warning(
            "logins are OFF while listening on %s: anyone who can reach it can read and change "
            "everything (set TOKENSHAPE_AUTH=on)",
            settings.host,
        )
    errors.install(app)
    routers.include(app, ingest_routes.router)
    mount(app, runtime)  # last: Dash adds a catch-all GET route for its pages
    # Inside the gate: a page's queries start only for a caller the gate let in, as that caller.
    app.add_middleware(PrefetchPages)
    app.add_middleware(
        AuthGate,
        state=runtime.auth,
        enabled=settings.auth_enabled,
        # Open mode lets everyone change things only where "everyone" is this machine's
        # users, or where the operator said TOKENSHAPE_AUTH=off outright.
        open_role="admin" if settings.loopback or settings.auth == "off" else "viewer",
        loopback_only=settings.loopback,
        clock=clock,
        # /admin itself renders a viewer's page (403, saying why); its callbacks stay refused.
        admin_pages=frozenset(),
        admin_outputs=ADMIN_OUTPUTS,
    )
    # Outside the gate (ingest routes check their own tokens), inside the metrics.
    app.add_middleware(IngestLane, router=ingest_routes.router, paths=INGEST_PATHS)
    # Outside both: a body over its route's cap is refused before a byte of it is read.
    app.add_middleware(BodyLimit)
    metrics.install(app, runtime.metrics)  # after Dash's middleware: counts its answers too
    # Around everything, Starlette's 500s included: security headers, then gzip (not /v1/*).
    headers.install(app, settings)
    return app
