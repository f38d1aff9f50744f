"""The running system in one typed object: built once by `create_app`, entered from the
lifespan, and the only thing routes, middleware and pages read from `app.state`."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from threading import Event
from typing import Any

from starlette.requests import HTTPConnection

from app.auth.state import AuthState
from app.config import Settings
from app.jobs.cron import Cron, check_setting
from app.jobs.plans import PlanWarmer
from app.jobs.push import PushJob
from app.jobs.retention import RetentionJob
from app.jobs.schedule import ReportScheduler
from app.server.metrics import Metrics
from app.server.ratelimit import Limit, RateLimiter
from app.services import report_runs
from app.services.credentials import Credentials
from app.services.economics import fleet_money
from app.sizing.slo import Fleet
from app.storage.database import Database
from app.storage.recovery import recover
from app.storage.write.writer import Writer

log = logging.getLogger("tokenshape")

SendWeek = Callable[[str, Event], Any]  # (ISO week, stop event) -> the send's outcome


def utc_now() -> datetime:
    """The real clock."""
    return datetime.now(UTC)


@dataclass
class Runtime:
    """Database, writer, auth state, rate limiter, metrics and jobs of one server."""

    settings: Settings
    db: Database
    clock: Callable[[], datetime]
    auth: AuthState
    rate_limiter: RateLimiter
    metrics: Metrics
    report_cron: Cron  # TOKENSHAPE_REPORT_CRON, parsed (and so checked) when built
    writer: Writer | None = None  # set when the lifespan starts it
    retention: RetentionJob | None = None
    report_scheduler: ReportScheduler | None = None
    plan_warmer: PlanWarmer | None = None
    lake_push: PushJob | None = None  # TOKENSHAPE_PUSH_URL set: rollups to a central node

    @classmethod
    def build(
        cls,
        settings: Settings,
        *,
        db: Database | None = None,
        clock: Callable[[], datetime] = utc_now,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> Runtime:
        """Everything that needs no open database; `running()` opens and starts the rest."""
        report_cron = check_setting(settings.report_cron)
        database = db or Database(settings.db)
        runtime = cls(
            settings=settings,
            db=database,
            clock=clock,
            auth=AuthState(database, settings, clock, settings.auth_enabled),
            rate_limiter=RateLimiter(
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
            ),
            metrics=Metrics(database, lambda: runtime.writer, lambda: runtime.lake_push),
            report_cron=report_cron,
        )
        return runtime

    def _first_user(self) -> None:
        creds = Credentials(self.db, self.auth)
        first_password = self.settings.admin_password.get_secret_value()
        if first_password and not creds.users():
            creds.add_user("admin", first_password, "admin")
            log.info("created user 'admin' from TOKENSHAPE_ADMIN_PASSWORD (no user existed)")
        if self.settings.auth_enabled and not creds.users():
            log.warning(
                "logins are on and there is no user yet: add one with "
                "`tokenshape user add NAME --role admin` (stop the server first), or start "
                "once with TOKENSHAPE_ADMIN_PASSWORD set"
            )
        elif not self.settings.auth_enabled:
            log.info("logins are off: every page says so (TOKENSHAPE_AUTH=on to require them)")

    @asynccontextmanager
    async def running(self, send_week: SendWeek) -> AsyncIterator[Runtime]:
        """Open the database, start the writer and the jobs; on the way out stop them in
        reverse order and close the database (`send_week` delivers one week's email)."""
        settings = self.settings
        async with AsyncExitStack() as stack:
            if not self.db.is_open:
                # A damaged file or WAL is quarantined and rebuilt from what reads (health
                # shows it); a newer, read-only or locked file stops the start in one line.
                recover(self.db.path)
                self.db.open()
            stack.callback(self.db.close)
            self.auth.load_signing_key()
            self._first_user()
            writer = Writer(
                self.db,
                capacity_rows=settings.writer_queue_rows,
                flush_rows=settings.writer_flush_rows,
                flush_ms=settings.writer_flush_ms,
                raw_chars=settings.reject_raw_chars,
                observer=self.metrics,
                rollup_settle_s=settings.rollup_settle_s,
                tz=settings.tz,
            )
            self.writer = await stack.enter_async_context(writer)
            # Stopped in reverse order: the email first, then retention, the writer, the database.
            # Always: the rollup tiers prune by their own retention even when raw rows stay.
            self.retention = RetentionJob(
                self.db,
                request_days=settings.retention_days,
                reject_days=settings.reject_retention_days,
                tz=settings.tz,
                tier_days=settings.tier_days,
                clock=self.clock,
                after_prune=writer.reindex,
            )
            await stack.enter_async_context(self.retention)
            if settings.report_to and settings.smtp_host:
                self.report_scheduler = ReportScheduler(
                    self.report_cron,
                    settings.report_tz,
                    send_week,
                    lambda week: report_runs.sent(self.db, week),
                    self.clock,
                )
                await stack.enter_async_context(self.report_scheduler)
                log.info(
                    "weekly email on: '%s' in %s to %s",
                    settings.report_cron,
                    settings.report_tz,
                    settings.report_to,
                )
            if settings.push_url:
                self.lake_push = PushJob(
                    self.db,
                    url=settings.push_url,
                    token=settings.push_token.get_secret_value(),
                    origin=settings.push_origin,
                    every_s=settings.push_every_s,
                    give_up_after_s=settings.push_give_up_s,
                    tz=settings.tz,
                    clock=self.clock,
                )
                await stack.enter_async_context(self.lake_push)
                log.info(
                    "lake push on: every %g s to %s as origin %r",
                    settings.push_every_s,
                    settings.push_url,
                    self.lake_push.origin,
                )
            if settings.plans_refresh_s:
                self.plan_warmer = PlanWarmer(self._warm_plans, every_s=settings.plans_refresh_s)
                await stack.enter_async_context(self.plan_warmer)
            yield self

    def _warm_plans(self) -> None:
        """The fleet's plans for the default window, as the pages ask for them."""
        settings = self.settings
        # The seasonal plans behind the money also fit each engine's calibration, which the
        # recommendations of the same hour share.
        fleet_money(self.db, now=self.clock(), tz=settings.tz, fleet=Fleet.of(settings))


def of(conn: HTTPConnection) -> Runtime:
    """The Runtime of the app serving this request."""
    return conn.app.state.runtime
