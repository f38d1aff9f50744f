"""The composition root: FastAPI app, routers, Dash, and the lifespan that runs the writer."""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import httpx
from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from app import __version__
from app.api import admin, backup, drift, engines, health, latency, metrics, openapi, shapes
from app.auth import routes as auth_routes
from app.auth.gate import INGEST_PATHS, WARM_UP_HEADER, AuthGate
from app.config import Settings
from app.cron import parse_cron
from app.dashboard.prefetched import PrefetchPages
from app.dashboard.shell import ADMIN_OUTPUTS, ADMIN_PAGES, mount
from app.metrics import install as install_metrics
from app.reports.schedule import ReportScheduler
from app.reports.send import deliver_week
from app.retention import RetentionJob
from app.storage import report_runs, sessions, users
from app.storage.database import Database
from app.storage.writer import Writer
from ingest import routes as ingest_routes
from ingest.lane import IngestLane
from ingest.ratelimit import Limit, RateLimiter

log = logging.getLogger("tokenshape")


def utc_now() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


async def _warm_up_dash(app: FastAPI) -> None:
    """Let Dash finish its first-request setup before a browser comes.

    Dash Pages registers its title callback on the first request; the page served by that very
    request lacks the callback's script and the browser logs an error. One internal request
    here makes every real page load complete. It carries a per-process key the auth gate
    admits, since there is no user yet."""
    transport = httpx.ASGITransport(app=app)
    headers = {WARM_UP_HEADER: app.state.warm_up_key}
    async with httpx.AsyncClient(
        transport=transport, base_url="http://tokenshape", headers=headers
    ) as client:
        await client.get("/_dash-layout")


def create_app(
    settings: Settings | None = None,
    *,
    clock: Callable[[], datetime] = utc_now,
    db: Database | None = None,
    monotonic: Callable[[], float] = time.monotonic,
) -> FastAPI:
    """Build the app; the database opens and the writer starts in the lifespan, not here."""
    settings = settings or Settings()
    database = db or Database(settings.db)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if not database.is_open:
            database.open()
        app.state.signing_key = sessions.signing_key(database.cursor())
        first_password = settings.admin_password.get_secret_value()
        if first_password and not users.list_users(database.cursor()):
            users.add(database.cursor(), "admin", first_password, "admin")
            log.info("created user 'admin' from TOKENSHAPE_ADMIN_PASSWORD (no user existed)")
        if settings.auth_enabled and not users.list_users(database.cursor()):
            log.warning(
                "logins are on and there is no user yet: add one with "
                "`tokenshape user add NAME --role admin` (stop the server first), or start "
                "once with TOKENSHAPE_ADMIN_PASSWORD set"
            )
        elif not settings.auth_enabled:
            log.info("logins are off: every page says so (TOKENSHAPE_AUTH=on to require them)")
        writer = Writer(
            database,
            capacity_rows=settings.writer_queue_rows,
            flush_rows=settings.writer_flush_rows,
            flush_ms=settings.writer_flush_ms,
            raw_chars=settings.reject_raw_chars,
            observer=app.state.metrics,
            rollup_settle_s=settings.rollup_settle_s,
        )
        await writer.start()
        app.state.writer = writer
        scheduler = None
        if settings.report_to and settings.smtp_host:
            scheduler = ReportScheduler(
                parse_cron(settings.report_cron),
                settings.report_tz,
                lambda week, stop: deliver_week(database, settings, week, clock=clock, stop=stop),
                lambda week: report_runs.sent(database.cursor(), week),
                clock,
            )
            scheduler.start()
            log.info(
                "weekly email on: '%s' in %s to %s",
                settings.report_cron,
                settings.report_tz,
                settings.report_to,
            )
        app.state.report_scheduler = scheduler
        pruner = None
        if settings.retention_days or settings.reject_retention_days:
            pruner = RetentionJob(
                database,
                request_days=settings.retention_days,
                reject_days=settings.reject_retention_days,
                clock=clock,
                after_prune=writer.reindex,
            )
            pruner.start()
        app.state.retention = pruner
        await _warm_up_dash(app)
        log.info(
            "tokenshape %s serving %s (revision %s)", __version__, database.path, database.revision
        )
        try:
            yield
        finally:
            if scheduler is not None:
                await scheduler.stop()
            if pruner is not None:
                await pruner.stop()
            await writer.stop()
            database.close()

    app = FastAPI(
        title="tokenshape",
        version=__version__,
        summary="The real ISL x OSL shape of LLM serving traffic, and engines sized to it.",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.db = database
    app.state.clock = clock
    app.state.token_cache = {}
    app.state.warm_up_key = secrets.token_urlsafe(32)
    app.state.token_touched = {}
    app.state.session_cache = {}
    app.state.login_failures = {}
    app.state.login_slots = asyncio.Semaphore(2)
    app.state.auth_enabled = settings.auth_enabled
    if not settings.auth_enabled and not settings.loopback:
        log.warning(
            "logins are OFF while listening on %s: anyone who can reach it can read and change "
            "everything (set TOKENSHAPE_AUTH=on)",
            settings.host,
        )
    app.state.rate_limiter = RateLimiter(
        Limit(
            settings.rate_limit_requests,
            settings.rate_limit_requests_burst,
            "RATE_LIMIT_REQUESTS",
            "requests",
        ),
        Limit(
            settings.rate_limit_records,
            settings.rate_limit_records_burst,
            "RATE_LIMIT_RECORDS",
            "records",
        ),
        monotonic,
    )

    @app.exception_handler(RequestValidationError)
    async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'][1:]) or e['loc'][0]}: {e['msg']}"
            + (" (use ISO 8601, e.g. 2026-11-20T10:00:00Z)" if "datetime" in e["msg"] else "")
            for e in exc.errors()
        )
        return JSONResponse({"detail": f"invalid parameters: {problems}"}, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        # FastAPI's answer to a JSON body that is not UTF-8 names nothing and is a 400 where
        # every other bad body is a 422: say what is wrong, like the rest.
        if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
            return JSONResponse(
                {"detail": "invalid parameters: body: not valid JSON (send UTF-8 JSON)"},
                status_code=422,
            )
        return await http_exception_handler(request, exc)

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Logged with its traceback for the operator; the client gets a plain sentence.
        log.exception("unexpected error on %s %s", request.method, request.url.path)
        return JSONResponse(
            {
                "detail": f"internal error ({type(exc).__name__}); nothing from this request was "
                "stored. Retry later; if it persists, see the server log."
            },
            status_code=500,
        )

    app.include_router(auth_routes.router)
    app.include_router(admin.router)
    app.include_router(backup.router)
    app.include_router(ingest_routes.router)
    app.include_router(health.router)
    app.include_router(shapes.router)
    app.include_router(latency.router)
    app.include_router(engines.router)
    app.include_router(drift.router)
    app.include_router(metrics.router)
    app.include_router(openapi.unknown)  # after every /api router, before Dash's pages
    openapi.install(app)  # the document as the app answers: plain 422s, the gate's 401/403
    mount(
        app,
        database,
        clock,
        settings.tz,
        seasonal_threshold=settings.seasonal_threshold,
        settings=settings,
    )  # last: Dash adds a catch-all GET route for its pages
    # Open mode lets everyone change things only where "everyone" is this machine's users, or
    # where the operator said TOKENSHAPE_AUTH=off outright.
    # Inside the gate: a page's queries start only for a caller the gate let in, as that caller.
    app.add_middleware(PrefetchPages)
    app.add_middleware(
        AuthGate,
        state=app.state,
        enabled=settings.auth_enabled,
        open_role="admin" if settings.loopback or settings.auth == "off" else "viewer",
        loopback_only=settings.loopback,
        clock=clock,
        admin_pages=ADMIN_PAGES,
        admin_outputs=ADMIN_OUTPUTS,
    )
    # Outside the gate (ingest routes check their own tokens), inside the metrics.
    app.add_middleware(IngestLane, router=ingest_routes.router, paths=INGEST_PATHS)
    install_metrics(app, database)  # after Dash's middleware, so it counts Dash's answers too
    return app
