"""The daily retention job: prunes old requests and rejects."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta

from app.jobs.base import Job
from app.storage import retention
from app.storage.database import Database

log = logging.getLogger("tokenshape.retention")

EVERY = timedelta(days=1)
FIRST_DELAY_S = 60.0  # not in the middle of start-up, when gateways reconnect and catch up
NAP_S = 3600.0


class RetentionJob(Job):
    """Deletes what is past retention once a day; ingest goes on meanwhile.

    The prune runs in a worker thread on its own cursor, a day of rows per transaction, so the
    event loop and the writer never wait for it. The clock and the sleep are injected, so tests
    drive days in an instant."""

    name = "retention"
    what = "retention: the prune"
    stop_timeout_s = 120.0
    log = log

    def __init__(
        self,
        db: Database,
        *,
        request_days: int,
        reject_days: int,
        tz: str = "UTC",
        tier_days: tuple[int, int, int] | None = None,
        clock: Callable[[], datetime],
        sleep: Callable[[float], Awaitable[None]] | None = None,
        first_delay_s: float = FIRST_DELAY_S,
        after_prune: Callable[[], Awaitable[object]] | None = None,
    ):
        super().__init__()
        self.db = db
        self.request_days, self.reject_days = request_days, reject_days
        self.tz, self.tier_days = tz, tier_days
        self.clock = clock
        self.sleep = sleep or asyncio.sleep
        self.first_delay_s = first_delay_s
        self.after_prune = after_prune  # the writer's reindex: forget the deleted keys
        self.last: retention.PruneResult | str | None = None  # for logs and tests
        self.next: datetime | None = None
        self.runs = 0

    def prune_now(self) -> retention.PruneResult:
        """One prune on a cursor of its own (call from a worker thread)."""
        con = self.db.new_cursor()
        try:
            return retention.prune(
                con,
                self.clock(),
                request_days=self.request_days,
                reject_days=self.reject_days,
                stop=self.stopping,
                tz=self.tz,
                tier_days=self.tier_days,
            )
        finally:
            con.close()

    async def _until(self, when: datetime) -> None:
        # Naps of at most an hour: a suspended host or a changed clock is noticed.
        while (left := (when - self.clock()).total_seconds()) > 0:
            await self.sleep(min(left, NAP_S))

    async def run(self, rounds: int | None = None) -> None:
        """Prune after the first delay, then every day; `rounds` (for tests) stops after that
        many prunes."""
        self.next = self.clock() + timedelta(seconds=self.first_delay_s)
        while rounds is None or self.runs < rounds:
            await self._until(self.next)
            started = self.clock()
            try:
                result = await self.in_thread(self.prune_now)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the server keeps serving; the next day tries again
                log.error("retention: pruning failed: %s: %s", type(exc).__name__, exc)
                self.last = f"{type(exc).__name__}: {exc}"
            else:
                self.last = result
                if result.chunks:
                    log.info(
                        "retention: deleted %s in %d chunks",
                        ", ".join(f"{n:,} {t}" for t, n in result.deleted.items()),
                        result.chunks,
                    )
                if result.deleted.get("requests") and self.after_prune is not None:
                    try:
                        await self.after_prune()
                    except Exception as exc:  # the old index stays: still correct, larger
                        log.warning("retention: rebuilding the dedupe index failed: %s", exc)
            self.runs += 1
            self.next = started + EVERY
