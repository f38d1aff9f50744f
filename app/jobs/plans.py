"""The plans warmer: computes the fleet's replica plans and money in the background.

A fleet's plans run the performance model for every engine (seconds each when nothing is cached:
the library loads its GPU tables, the corrections are fitted, each hour is searched); the
Overview, Rightsizing and Seasonal pages and the email read the same cached answers
(app/services/economics.py keeps them five minutes). Recomputing them a little more often than
that keeps every page's plans warm; a page asked before the first round is done computes its
own."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from app.jobs.base import Job

log = logging.getLogger("tokenshape.plans")

FIRST_DELAY_S = 5.0  # after start-up's own work (the writer's recovery, Dash's warm-up)


class PlanWarmer(Job):
    """Runs `compute` (the fleet's plans) in a worker thread every `every_s` seconds."""

    name = "plans"
    what = "plans: the fleet's replica plans"
    stop_timeout_s = 120.0
    log = log

    def __init__(
        self,
        compute: Callable[[], object],
        *,
        every_s: float,
        first_delay_s: float = FIRST_DELAY_S,
        sleep: Callable[[float], Awaitable[None]] | None = None,
    ):
        super().__init__()
        self.compute = compute
        self.every_s = every_s
        self.first_delay_s = first_delay_s
        self.sleep = sleep or asyncio.sleep
        self.runs = 0
        self.last_error: str | None = None

    async def run(self) -> None:
        """Compute, sleep, repeat; an error is logged and the next round tries again."""
        await self.sleep(self.first_delay_s)
        while not self.stopping.is_set():
            try:
                await self.in_thread(self.compute)
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 - a bad round must not end the job
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("computing the fleet's plans failed: %s", self.last_error)
            self.runs += 1
            await self.sleep(self.every_s)
