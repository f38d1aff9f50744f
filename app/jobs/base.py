"""One lifecycle for every background job: start from the lifespan, stop before the database
closes, thread work awaited on the way out."""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self, TypeVar

T = TypeVar("T")


async def stop_job(
    task: asyncio.Task | None,
    worker: asyncio.Future | None,
    *,
    timeout: float,
    log: logging.Logger,
    what: str,
) -> None:
    """Cancel the job's loop, then wait (up to `timeout`) for the thread work it started.

    The thread cannot be cancelled, and the database it uses must stay open until it ends."""
    if task is not None:
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
    if worker is not None and not worker.done():
        try:
            await asyncio.wait_for(asyncio.shield(worker), timeout=timeout)
        except Exception as exc:  # noqa: BLE001 - shutting down either way
            log.warning("%s in progress ended with %s", what, exc)


class Job:
    """A loop run in the background: `run` is the loop, `in_thread` its blocking work.

    `start` and `stop` (or `async with job:`) are all the lifespan needs. `stop` sets
    `stopping` (blocking work checks it between chunks), cancels the loop and waits up to
    `stop_timeout_s` for the thread work in progress: a thread cannot be cancelled, and the
    database it uses stays open until it ends."""

    name = "job"  # the asyncio task is named tokenshape-<name>
    what = "the job"  # how the log names the work in progress if stopping cuts it short
    stop_timeout_s = 60.0
    log = logging.getLogger("tokenshape.jobs")

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self._task: asyncio.Task | None = None
        self._worker: asyncio.Future | None = None

    async def run(self) -> None:
        """The job's loop (subclasses)."""
        raise NotImplementedError

    async def in_thread(self, fn: Callable[..., T], *args: Any) -> T:
        """Run blocking work in a worker thread; `stop` waits for it instead of abandoning it."""
        self._worker = asyncio.ensure_future(asyncio.to_thread(fn, *args))
        return await asyncio.shield(self._worker)

    def start(self) -> None:
        """Run in the background (from the app's lifespan)."""
        self._task = asyncio.create_task(self.run(), name=f"tokenshape-{self.name}")

    async def stop(self) -> None:
        """Stop between chunks and wait for the work in progress (the database stays open)."""
        self.stopping.set()
        await stop_job(
            self._task, self._worker, timeout=self.stop_timeout_s, log=self.log, what=self.what
        )
        self._task = None

    async def __aenter__(self) -> Self:
        self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
