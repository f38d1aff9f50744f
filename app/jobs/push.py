"""The lake push job: a running server pushes its own clean hourly rollups to a central node
every TOKENSHAPE_PUSH_EVERY_S seconds, in the rounds `tokenshape lake push` makes."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Any

from app.jobs.base import Job
from app.services import lake
from app.storage.database import Database

log = logging.getLogger("tokenshape.push")

FIRST_DELAY_S = 10.0  # after start-up's own work (the writer's recovery and rebuilds)


class _Stopped(Exception):
    """The server is stopping: a wait between retries ended early."""


class PushJob(Job):
    """Pushes the hours rebuilt since its last complete round, then sleeps `every_s`.

    The first round sends every clean full-grain hour; a later one only the hours rebuilt
    after the newest one the last complete round covered (kept in memory: a restart sends
    every hour again, which is safe, an import being idempotent). A failed round changes
    nothing, so the next one sends its hours again. Each round runs in a worker thread on
    cursors of its own; retries wait on `stopping`, so a stop does not sit out a backoff."""

    name = "push"
    what = "lake push: the round"
    stop_timeout_s = 30.0
    log = log

    def __init__(
        self,
        db: Database,
        *,
        url: str,
        token: str,
        every_s: float,
        clock: Callable[[], datetime],
        origin: str = "",
        give_up_after_s: float = lake.GIVE_UP_AFTER_S,
        tz: str = "UTC",
        hours_per_request: int = lake.HOURS_PER_REQUEST,
        first_delay_s: float = FIRST_DELAY_S,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ):
        super().__init__()
        self.db = db
        self.url = url
        self.origin = origin or lake.default_origin()
        self.every_s = every_s
        self.clock = clock
        self.tz = tz
        self.hours_per_request = hours_per_request
        self.first_delay_s = first_delay_s
        self.sleep = sleep or asyncio.sleep
        self._token = token
        self.pusher = lake.Pusher(
            url, token, self.origin, give_up_after=give_up_after_s, sleep=self._wait
        )
        # The next round sends the hours rebuilt after this (None: every clean hour).
        self.built_after: datetime | None = None
        self.rounds = 0  # rounds done, failed ones included
        self.failed_rounds = 0
        self.consecutive_failures = 0
        self.hours_pushed = 0  # hours sent since the server started (an hour resent counts again)
        self.last_success: datetime | None = None
        self.last_hours = 0  # what the last complete round sent (0: nothing was new)
        self.last_rows: dict[str, int] = {}
        self.last_error: str | None = None  # why the last round failed; None once one succeeds
        self.next: datetime | None = None

    def _wait(self, seconds: float) -> None:
        """The pusher's sleep between retries (in the worker thread), cut short by a stop."""
        if self.stopping.wait(seconds):
            raise _Stopped()

    def _secret_free(self, text: str) -> str:
        """`text` without the token (no answer should carry it; this makes sure)."""
        return text.replace(self._token, "[redacted]") if self._token else text

    def push_now(self) -> lake.PushRound | str | None:
        """One round (call from a worker thread): what it sent, why it failed, or None when a
        stop cut it short. Failures are answers, not exceptions: `stop` waits for this work
        and would log an exception again."""
        try:
            return lake.push_round(
                self.db,
                self.pusher,
                tz=self.tz,
                built_after=self.built_after,
                hours_per_request=self.hours_per_request,
                stopping=self.stopping.is_set,
            )
        except (_Stopped, lake.PushStopped):
            return None
        except lake.PushError as exc:
            return self._secret_free(str(exc))
        except Exception as exc:  # noqa: BLE001 - a database error: the next round tries again
            return self._secret_free(f"{type(exc).__name__}: {exc}")

    async def push_once(self) -> lake.PushRound | None:
        """One round and its bookkeeping; None when it failed or a stop cut it short."""
        out = await self.in_thread(self.push_now)
        if out is None:
            return None
        self.rounds += 1
        if isinstance(out, str):
            self._failed(out)
            return None
        if self.consecutive_failures:
            log.info(
                "lake push to %s works again (failures before: %d)",
                self.url,
                self.consecutive_failures,
            )
        self.built_after = out.built_until
        self.last_success = self.clock()
        self.last_hours, self.last_rows = out.hours, dict(out.rows)
        self.hours_pushed += out.hours
        self.last_error = None
        self.consecutive_failures = 0
        if out.hours and out.first is not None and out.last is not None:
            log.info(
                "lake push: %d hours (%s to %s UTC) in %d requests to %s as origin %r: %s",
                out.hours,
                f"{out.first:%Y-%m-%d %H:00}",
                f"{out.last + timedelta(hours=1):%Y-%m-%d %H:00}",
                out.requests,
                self.url,
                self.origin,
                ", ".join(f"{t} {n:,}" for t, n in sorted(out.rows.items())) or "no rows",
            )
        return out

    def _failed(self, reason: str) -> None:
        self.last_error = reason
        self.failed_rounds += 1
        self.consecutive_failures += 1
        log.error(
            "lake push to %s failed: %s (failures in a row: %d); the next round, in %g s, "
            "sends these hours again",
            self.url,
            reason,
            self.consecutive_failures,
            self.every_s,
        )

    async def run(self) -> None:
        """A round after the first delay (at most `every_s`), then one `every_s` after each
        round ends."""
        delay = min(self.first_delay_s, self.every_s)
        self.next = self.clock() + timedelta(seconds=delay)
        await self.sleep(delay)
        while not self.stopping.is_set():
            await self.push_once()
            self.next = self.clock() + timedelta(seconds=self.every_s)
            await self.sleep(self.every_s)

    async def stop(self) -> None:
        """Stop the loop (a round in progress ends at its next retry), then the HTTP client."""
        await super().stop()
        self.pusher.close()

    def state(self) -> dict[str, Any]:
        """What /api/health shows (times as ISO 8601; the token never)."""

        def iso(when: datetime | None) -> str | None:
            return when.isoformat() if when is not None else None

        return {
            "url": self.url,
            "origin": self.origin,
            "every_s": self.every_s,
            "rounds": self.rounds,
            "next_round": iso(self.next),
            "last_success": iso(self.last_success),
            "last_hours": self.last_hours,
            "last_rows": dict(self.last_rows),
            "hours_pushed": self.hours_pushed,
            "built_after": iso(self.built_after),
            "last_error": self.last_error,
            "consecutive_failures": self.consecutive_failures,
        }
