"""Stopping a background job from the lifespan: cancel its loop, let its worker thread finish."""

from __future__ import annotations

import asyncio
import logging


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
