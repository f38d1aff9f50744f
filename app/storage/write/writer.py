"""The single writer: a bounded queue of batches, group commit, answers after the commit."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import functools
import logging
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from app.storage import rollups
from app.storage.batches import Batch, WriteResult
from app.storage.database import Database
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.journal import Journal
from app.storage.write.store import RequestStore

if TYPE_CHECKING:
    import numpy as np

log = logging.getLogger("tokenshape.writer")

# DuckDB writes an insert of a whole row group (122,880 rows) straight to the database's
# blocks instead of through its WAL; measured, a mover that waits for that much under steady
# traffic spends 2.3 us per row instead of 3.6. Rows wait at most MOVE_AFTER_S to be visible,
# and move as soon as traffic pauses for QUIET_S: long enough that a stall of a few lock-step
# shippers does not cut a row group short (at 0.05 s a 1M-record load moved in pieces of
# 4-40k rows, and their WAL writes and re-compressed row groups doubled DuckDB's CPU).
# When no ingest request is arriving or queued either, traffic has stopped rather than
# stalled, and the rows move after IDLE_S (or twice the flushes' pace, if longer): a burst's
# last rows become visible ~0.2 s sooner.
MOVE_ROWS = 122_880
MOVE_AFTER_S = 1.0
QUIET_S = 0.25
IDLE_S = 0.05
REBUILD_EVERY_S = 10.0


class WriterSaturated(Exception):
    """The queue is full; the client should retry after `retry_after` seconds."""

    def __init__(self, retry_after: int = 1):
        super().__init__("the writer queue is full")
        self.retry_after = retry_after


class WriterStopped(Exception):
    """The writer is not running (server starting up or shutting down)."""


def failure_reason(exc: BaseException) -> str:
    """A storage error in words a client can act on (the full error goes to the log)."""
    text = str(exc)
    code = exc.errno if isinstance(exc, OSError) else None
    if code in (errno.ENOSPC, errno.EDQUOT) or "No space left on device" in text:
        return "the server's disk is full"
    if code == errno.EROFS or "Read-only file system" in text:
        return "the server's disk is read-only"
    if code == errno.EACCES or "Permission denied" in text:
        return "the server may not write its database files"
    return type(exc).__name__


class FlushObserver(Protocol):
    """Told about every flush (the server's metrics); called on the event loop, so quick."""

    def flushed(self, seconds: float, batches: list[Batch], results: list[WriteResult]) -> None:
        """A flush committed: its duration and each batch's result."""

    def flush_failed(self, seconds: float, batches: list[Batch]) -> None:
        """A flush's transaction failed: nothing of these batches was stored."""


@dataclass
class WriterStats:
    """Counters shown by /api/health."""

    flushes: int = 0
    batches: int = 0
    rows_accepted: int = 0
    rows_duplicate: int = 0
    rows_rejected: int = 0
    last_flush_ms: float = 0.0
    last_error: str | None = None
    saturated: int = 0


class Writer:
    """Owns the only write connection; one transaction per flush of queued batches."""

    def __init__(
        self,
        db: Database,
        *,
        capacity_rows: int = 200_000,
        flush_rows: int = 50_000,
        flush_ms: float = 5.0,
        raw_chars: int = 4096,
        observer: FlushObserver | None = None,
        rollup_settle_s: float = rollups.SETTLE_S,
        tz: str = "UTC",
    ):
        self.db = db
        self.observer = observer
        self.capacity_rows = capacity_rows
        self.flush_rows = flush_rows
        self.flush_s = flush_ms / 1000
        self.raw_chars = raw_chars
        self.stats = WriterStats()
        self._queue: asyncio.Queue[tuple[Batch, asyncio.Future[WriteResult]]] | None = None
        self._pending_rows = 0
        self._task: asyncio.Task[None] | None = None
        self._indexing: asyncio.Future[None] | None = None  # the last flush's index add
        # One thread owns the write connection for its whole life: DuckDB connections are
        # not thread-safe, and a single writer thread serialises commits by construction.
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tokenshape-writer")
        self._store: RequestStore | None = None
        self._mover: threading.Thread | None = None
        self._move_wanted = threading.Event()
        self._stopping = False
        self._incoming = 0  # ingest requests being read or parsed: see incoming()
        self._last_flush = 0.0  # time.monotonic() of the last committed flush
        self._prev_flush = 0.0  # ... and of the one before it
        self.last_move_error: str | None = None
        self._rebuild_due = 0.0  # time.monotonic() when rollups are next rebuilt
        self.rollup_settle_s = rollup_settle_s
        self.tz = tz  # the daily rollup tier's days are this zone's

    @property
    def journal_dir(self):
        """Where acknowledged rows wait (fsynced) until the mover has them in DuckDB."""
        return self.db.path.with_name(self.db.path.name + ".journal")

    @property
    def running(self) -> bool:
        """True while the flush loop is alive."""
        return self._task is not None and not self._task.done()

    @property
    def pending_rows(self) -> int:
        """Rows queued or being flushed."""
        return self._pending_rows

    async def start(self) -> None:
        """Open the write connection, load the dedupe index and start the flush loop."""
        loop = asyncio.get_running_loop()
        con = await loop.run_in_executor(self._executor, self.db.new_cursor)
        journal = Journal(self.journal_dir, REQUESTS_SCHEMA)
        self._store = await loop.run_in_executor(
            self._executor, lambda: RequestStore(con, self.raw_chars, journal)
        )
        self._queue = asyncio.Queue()
        self._task = asyncio.create_task(self._run(), name="tokenshape-writer")
        self._stopping = False
        self._mover = threading.Thread(
            target=self._move_loop,
            args=(self.db.new_cursor(),),
            name="tokenshape-mover",
            daemon=True,
        )
        self._mover.start()

    def _move_loop(self, con) -> None:
        """Move journaled rows into DuckDB whenever there are some; big moves are cheap ones."""
        assert self._store is not None
        store = self._store
        try:
            while True:
                self._move_wanted.wait(timeout=0.5)
                self._move_wanted.clear()
                try:
                    while store.unmoved_rows:
                        # Gather before every move: what came during a long move is only a
                        # fraction of a row group, and small moves cost DuckDB more per row.
                        self._gather(store)
                        store.move(con)
                    if self.last_move_error is not None:
                        log.warning("moving journaled rows into the database works again")
                    self.last_move_error = None
                except Exception as exc:  # rows stay journaled; try again on the next wake-up
                    error = f"{type(exc).__name__}: {exc}"
                    if error != self.last_move_error:  # once, not twice a second while it lasts
                        log.error("moving journaled rows into the database failed: %s", exc)
                    self.last_move_error = error
                    if self._stopping:
                        # Stopping must not wait for a disk that stays full: the rows are safe
                        # in the journal's segments, and the next start stores them.
                        log.error(
                            "stopping with %d acknowledged rows still in the journal %s; "
                            "they are stored when the server next starts",
                            store.unmoved_rows,
                            self.journal_dir,
                        )
                        return
                    time.sleep(0.5)
                if self._stopping and not store.unmoved_rows:
                    return
                self._rebuild_rollups(con)
        finally:
            con.close()

    def _rebuild_rollups(self, con) -> None:
        """Rebuild settled dirty hours' rollups here, where nothing else writes them: every
        REBUILD_EVERY_S, or, while a backlog remains (an upgrade's backfill, late rows
        scattered over many hours), again as soon as the mover has moved what came meanwhile.

        One `rebuild` is one transaction bounded by rows (rollups.REBUILD_ROWS: ~0.5 s here,
        longer only for an hour that alone holds more), so journaled rows wait at most that
        long for their move: between two calls the loop moves first. (Waiting for the loop's
        next wake-up after each call held a catch-up to ~46 hours a second.)"""
        if time.monotonic() < self._rebuild_due:
            return
        try:
            done = rollups.rebuild(con, settle_s=self.rollup_settle_s, tz=self.tz)
        except Exception as exc:  # queries read those hours raw meanwhile: slower, still right
            log.error("rebuilding hourly rollups failed (retrying later): %s", exc)
            done = 0
        if done:
            self._move_wanted.set()  # more may be due: come back without the loop's wait
        else:
            self._rebuild_due = time.monotonic() + REBUILD_EVERY_S

    def _gather(self, store: RequestStore) -> None:
        """While flushes keep coming, let journaled rows gather up to a row group (bounded).

        A lone flush (the one before it longer than QUIET_S ago) moves at once, so a record
        shipped on its own is queryable a moment after its answer."""
        if self._last_flush - self._prev_flush >= QUIET_S:
            return
        since = time.monotonic()
        while (
            not self._stopping
            and store.unmoved_rows < MOVE_ROWS
            and time.monotonic() - since < MOVE_AFTER_S
            and not self._quiet()
        ):
            time.sleep(0.01)

    def _quiet(self) -> bool:
        """No flush for QUIET_S; or, with no ingest request arriving or queued, for IDLE_S and
        twice the last gap between flushes (a shipper that sends every 150 ms is only counted
        from its handler's start, so it looks idle between its batches: it still gathers)."""
        gap = time.monotonic() - self._last_flush
        if gap >= QUIET_S:
            return True
        pace = self._last_flush - self._prev_flush
        return gap >= max(IDLE_S, 2 * pace) and not self._incoming and not self._pending_rows

    @contextlib.contextmanager
    def incoming(self) -> Iterator[None]:
        """Mark an ingest request as arriving while its body is read and parsed (event loop),
        so the mover does not take a pause between shippers' batches for the end of traffic."""
        self._incoming += 1
        try:
            yield
        finally:
            self._incoming -= 1

    @property
    def unmoved_rows(self) -> int:
        """Acknowledged rows not yet visible to queries."""
        return self._store.unmoved_rows if self._store is not None else 0

    async def stop(self) -> None:
        """Flush what is queued, then stop the loop and close the write connection."""
        if self._task is not None and self._queue is not None:
            await self._queue.join()
            await self._indexed()
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        self._task = None
        if self._mover is not None:
            self._stopping = True
            self._move_wanted.set()
            await asyncio.get_running_loop().run_in_executor(None, self._mover.join)
            self._mover = None
        if self._store is not None:
            store = self._store
            self._store = None
            loop = asyncio.get_running_loop()
            # The journal closed and a checkpoint taken on the connection's own thread: the
            # moved segments kept for it go now, not replayed at the next start.
            await loop.run_in_executor(self._executor, store.close)
            await loop.run_in_executor(self._executor, store.con.close)
        self._executor.shutdown(wait=True)

    async def __aenter__(self) -> Writer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def submit(self, batch: Batch) -> WriteResult:
        """Queue a batch and wait until it is committed; raises WriterSaturated when full."""
        if self._queue is None or not self.running:
            raise WriterStopped("the writer is not running")
        rows = batch.row_count
        # An oversized batch is still taken when the queue is empty, so it can never starve.
        # Also refuse when the mover falls far behind: that backlog lives in memory.
        if (self._pending_rows and self._pending_rows + rows > self.capacity_rows) or (
            self.unmoved_rows > 5 * self.capacity_rows
        ):
            self.stats.saturated += 1
            raise WriterSaturated(retry_after=1)
        future: asyncio.Future[WriteResult] = asyncio.get_running_loop().create_future()
        self._pending_rows += rows
        self._queue.put_nowait((batch, future))
        return await asyncio.shield(future)

    async def _run(self) -> None:
        assert self._queue is not None
        queue = self._queue
        loop = asyncio.get_running_loop()
        while True:
            items = [await queue.get()]
            rows = items[0][0].row_count
            deadline = loop.time() + self.flush_s
            while rows < self.flush_rows:
                if queue.empty():
                    timeout = deadline - loop.time()
                    if timeout <= 0:
                        break
                    try:
                        item = await asyncio.wait_for(queue.get(), timeout)
                    except TimeoutError:
                        break
                else:
                    item = queue.get_nowait()
                items.append(item)
                rows += item[0].row_count
            await self._flush(items, rows)

    async def _flush(self, items: list, rows: int) -> None:
        assert self._store is not None and self._queue is not None
        batches = [batch for batch, _ in items]
        loop = asyncio.get_running_loop()
        started = time.perf_counter()
        try:
            await self._indexed()
            started = time.perf_counter()  # the flush's own time, not the last one's index add
            screened = self._store.screen(batches)  # here, on the loop: see its docstring
            results = await loop.run_in_executor(
                self._executor,
                functools.partial(self._store.write, index_later=True),
                batches,
                screened,
            )
        except Exception as exc:  # the batch is not stored; every waiter gets the error
            log.error("writer flush of %d batches failed: %s", len(batches), exc)
            self.stats.last_error = f"{type(exc).__name__}: {exc}"
            for _, future in items:
                if not future.done():
                    future.set_exception(exc)
            self._observe("flush_failed", time.perf_counter() - started, batches)
        else:
            elapsed = time.perf_counter() - started
            self.stats.flushes += 1
            self.stats.batches += len(batches)
            self.stats.last_flush_ms = elapsed * 1000
            self.stats.last_error = None
            self._prev_flush, self._last_flush = self._last_flush, time.monotonic()
            self._move_wanted.set()
            for (_, future), result in zip(items, results, strict=True):
                self.stats.rows_accepted += result.accepted
                self.stats.rows_duplicate += result.duplicates
                self.stats.rows_rejected += result.rejected
                if not future.done():
                    future.set_result(result)
            # After the answers: the senders' next batches arrive while the writer thread
            # indexes these keys, instead of after (about 1 ms of each 4,000-row flush).
            self._indexing = loop.run_in_executor(self._executor, self._store.index_pending)
            self._observe("flushed", elapsed, batches, results)
        finally:
            self._pending_rows -= rows
            for _ in items:
                self._queue.task_done()

    async def _indexed(self) -> None:
        """Wait for the last flush's index add; a failure is logged, and the next write
        retries it (that write fails rather than dedupe against an incomplete index)."""
        indexing, self._indexing = self._indexing, None
        if indexing is None:
            return
        try:
            await indexing
        except Exception as exc:
            log.error("adding stored keys to the dedupe index failed (retrying): %s", exc)
            self.stats.last_error = f"dedupe index: {type(exc).__name__}: {exc}"

    async def reindex(self) -> int:
        """Rebuild the dedupe index from what is stored (after a prune); returns its size."""
        store = self._store
        if store is None:
            return 0
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self._executor, store.begin_reindex)
        hashes: np.ndarray | None = None
        try:

            def read() -> np.ndarray:
                con = self.db.new_cursor()
                try:
                    return store.live_hashes(con)
                finally:
                    con.close()

            hashes = await asyncio.to_thread(read)
        finally:
            size = await loop.run_in_executor(self._executor, store.finish_reindex, hashes)
        return size

    def _observe(self, event: str, *args) -> None:
        # After the waiters have their answers: a failing observer must never hold one up.
        if self.observer is None:
            return
        try:
            getattr(self.observer, event)(*args)
        except Exception as exc:
            log.warning("the writer's flush observer failed: %s", exc)

    def state(self) -> dict:
        """Writer health for /api/health."""
        s = self.stats
        return {
            "running": self.running,
            "pending_rows": self._pending_rows,
            "incoming_requests": self._incoming,
            "capacity_rows": self.capacity_rows,
            "flushes": s.flushes,
            "batches": s.batches,
            "rows_accepted": s.rows_accepted,
            "rows_duplicate": s.rows_duplicate,
            "rows_rejected": s.rows_rejected,
            "saturated_answers": s.saturated,
            "last_flush_ms": round(s.last_flush_ms, 2),
            "last_error": s.last_error,
            "journal_rows": self.unmoved_rows,
            "moved_rows": self._store.moved_rows if self._store is not None else 0,
            "last_move_error": self.last_move_error,
        }
