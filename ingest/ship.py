"""`tokenshape ship`: send an NDJSON log (a file, a growing file or stdin) to a server.

Batches of lines are gzipped and posted; 429/503 wait for Retry-After (with jitter), other
temporary failures back off exponentially (tenacity, with jitter) until a batch has failed for
`give_up_after` seconds (ShipGaveUp); what the contract says is final (400, 401, 403, 413, 415)
is not retried. A checkpoint beside the file holds the byte offset the server has
acknowledged, so an interrupted run resumes where it stopped (and a re-send would only count
as duplicates: records dedupe on request_id). `--follow` keeps reading a growing file and
starts over when it is rotated.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import BinaryIO

import httpx
import tenacity

ROUTES = {"ndjson": "/v1/requests", "litellm": "/v1/litellm"}
MAX_BATCH_BYTES = 1 << 20
# 408: the server gave up on a slow body (TOKENSHAPE_BODY_TIMEOUT_S); sending again is safe.
RETRYABLE = {408, 429, 500, 502, 503, 504}
FINAL = {
    400: "the server could not use the batch",
    401: "the token is not valid",
    403: "the token lacks the ingest scope",
    413: "a batch is over the server's limit",
    415: "the server does not take this format",
}


GIVE_UP_AFTER_S = 600.0  # --give-up-after's default: ten minutes without a batch taken
REQUEST_TIMEOUT_S = 60.0


class ShipError(RuntimeError):
    """Shipping cannot go on (a final answer from the server); the message says why."""


class ShipGaveUp(ShipError):
    """The server did not take a batch within the give-up deadline (it kept failing)."""

    def __init__(self, url: str, seconds: float, last: str):
        super().__init__(
            f"gave up on {url} after {seconds:.1f} s of retries; the last try failed with: {last}"
        )
        self.url, self.seconds, self.last = url, seconds, last


@dataclass
class ShipStats:
    """What the server answered over the whole run."""

    accepted: int = 0
    duplicates: int = 0
    rejected: int = 0
    batches: int = 0
    retries: int = 0
    first_errors: list[str] = field(default_factory=list)


@dataclass
class Checkpoint:
    """The acknowledged byte offset of a file (and the file's identity, to notice rotation)."""

    path: Path | None
    inode: int = 0
    offset: int = 0

    @classmethod
    def load(cls, path: Path | None, source: Path | None) -> Checkpoint:
        """The saved checkpoint when it belongs to the same file, else a fresh one."""
        cp = cls(path)
        if path is None or source is None or not path.exists():
            return cp
        try:
            saved = json.loads(path.read_text())
            st = source.stat()
        except (ValueError, OSError):
            return cp
        if saved.get("inode") == st.st_ino and saved.get("offset", 0) <= st.st_size:
            cp.inode, cp.offset = st.st_ino, int(saved["offset"])
        return cp

    def save(self) -> None:
        """Write atomically, so a kill leaves the old or the new checkpoint, never half."""
        if self.path is None:
            return
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps({"inode": self.inode, "offset": self.offset}))
        os.replace(tmp, self.path)


def _batches(
    fh: BinaryIO, start: int, size: int, final: bool = False
) -> Iterator[tuple[bytes, int]]:
    """(body, end offset) of up to `size` complete lines (or about 1 MiB) from `start`; with
    `final` (not following), a last line without a newline counts too."""
    fh.seek(start)
    lines: list[bytes] = []
    used, offset = 0, start
    for line in iter(fh.readline, b""):
        if not line.endswith(b"\n"):
            if not final:
                break  # a line still being written: wait for its end
            offset += len(line)
            if line.strip():
                lines.append(line + b"\n")
            break
        offset += len(line)
        if line.strip():
            lines.append(line)
            used += len(line)
        if len(lines) >= size or used >= MAX_BATCH_BYTES:
            yield b"".join(lines), offset
            lines, used = [], 0
    if lines or offset > start:
        yield b"".join(lines), offset


class _Temporary(Exception):
    """A failure worth another try (a connection error, 408/429/5xx)."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.retry_after = retry_after


def _retry_after(value: str | None) -> float | None:
    """Seconds a Retry-After header asks for (a number or an HTTP date), None if it is not one."""
    if not value:
        return None
    value = value.strip()
    if value.replace(".", "", 1).isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _post(
    client: httpx.Client,
    route: str,
    body: bytes,
    stats: ShipStats,
    sleep: Callable[[float], None],
    max_wait: float,
    give_up_after: float = GIVE_UP_AFTER_S,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Post one batch until the server takes it. Raises ShipError on a final answer, and
    ShipGaveUp when it was not taken within `give_up_after` seconds (0: never give up)."""
    data = gzip.compress(body)
    started = clock()

    def remaining() -> float:
        return started + give_up_after - clock() if give_up_after else float("inf")

    def attempt() -> dict:
        try:
            r = client.post(
                route,
                content=data,
                headers={"Content-Encoding": "gzip", "Content-Type": "application/x-ndjson"},
                # A server that never answers must not hold the run past its deadline either.
                timeout=min(REQUEST_TIMEOUT_S, max(1.0, remaining())),
            )
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise ShipError(f"the URL is not usable ({exc}); use e.g. http://host:8050") from None
        except httpx.TransportError as exc:
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            raise _Temporary(reason) from exc
        if r.status_code == 200:
            try:
                return r.json()
            except ValueError:
                raise ShipError(
                    "200 without a JSON answer: is --url a tokenshape server?"
                ) from None
        if r.status_code in FINAL:
            try:
                detail = (
                    r.json().get("detail", "")
                    if "json" in r.headers.get("content-type", "")
                    else ""
                )
            except ValueError:
                detail = ""
            raise ShipError(f"{r.status_code}: {FINAL[r.status_code]}: {detail}".rstrip(": "))
        if r.status_code not in RETRYABLE:
            raise ShipError(f"{r.status_code}: unexpected answer: {r.text[:200]}")
        raise _Temporary(
            f"HTTP {r.status_code} {r.reason_phrase}".rstrip(),
            _retry_after(r.headers.get("retry-after")) if r.status_code in (429, 503) else None,
        )

    backoff = tenacity.wait_exponential_jitter(initial=1, max=max_wait, jitter=1)

    def wait(state: tenacity.RetryCallState) -> float:
        assert state.outcome is not None
        exc = state.outcome.exception()
        if isinstance(exc, _Temporary) and exc.retry_after is not None:
            # What the server asked for, with jitter so many shippers do not return at once.
            seconds = min(exc.retry_after, max_wait) * random.uniform(1.0, 1.25)
        else:
            seconds = backoff(state)
        return max(0.0, min(seconds, remaining()))  # a last try at the deadline, not after it

    def stop(state: tenacity.RetryCallState) -> bool:
        return remaining() <= 0

    def counted(state: tenacity.RetryCallState) -> None:
        stats.retries += 1
        if stats.retries % 10 == 0:
            assert state.outcome is not None
            print(f"ship: still retrying ({state.outcome.exception()})", file=sys.stderr)

    retrying = tenacity.Retrying(
        retry=tenacity.retry_if_exception_type(_Temporary),
        wait=wait,
        stop=stop,
        sleep=sleep,
        before_sleep=counted,
        reraise=True,
    )
    try:
        return retrying(attempt)
    except _Temporary as exc:
        url = str(client.base_url).rstrip("/") + route
        raise ShipGaveUp(url, clock() - started, str(exc)) from None


def ship(
    source: Path | None,
    url: str,
    token: str,
    *,
    fmt: str = "ndjson",
    batch: int = 1000,
    follow: bool = False,
    checkpoint: Path | None = None,
    progress: Callable[[int], None] | None = None,
    sleep: Callable[[float], None] = time.sleep,
    max_wait: float = 60.0,
    client: httpx.Client | None = None,
    idle_stop: Callable[[], bool] | None = None,
    give_up_after: float = GIVE_UP_AFTER_S,
    clock: Callable[[], float] = time.monotonic,
) -> ShipStats:
    """Ship a file (or stdin when source is None) to the server; returns the totals. Raises
    ShipGaveUp when a batch is not taken within `give_up_after` seconds (0: retry forever)."""
    if fmt not in ROUTES:
        raise ShipError(f"ship takes --format {' or '.join(ROUTES)}; use `import` for other files")
    stats = ShipStats()
    own = client is None
    client = client or httpx.Client(
        base_url=url, headers={"Authorization": f"Bearer {token}"}, timeout=REQUEST_TIMEOUT_S
    )
    cp = Checkpoint.load(checkpoint, source)
    try:
        while True:
            try:
                fh = source.open("rb") if source is not None else sys.stdin.buffer
            except FileNotFoundError:
                if not follow:
                    raise
                sleep(0.5)  # between a rotation's rename and the new file
                continue
            try:
                if source is not None:
                    inode = os.fstat(fh.fileno()).st_ino
                    if inode != cp.inode:  # a new or rotated file: from its start
                        cp.inode, cp.offset = inode, 0
                start = cp.offset if source is not None else 0
                chunks = (
                    _batches(fh, start, batch, final=not follow)
                    if source is not None
                    else _stdin(fh, batch)
                )
                for body, end in chunks:
                    if body:
                        answer = _post(
                            client,
                            ROUTES[fmt],
                            body,
                            stats,
                            sleep,
                            max_wait,
                            give_up_after,
                            clock,
                        )
                        stats.batches += 1
                        stats.accepted += answer.get("accepted", 0)
                        stats.duplicates += answer.get("duplicates", 0)
                        stats.rejected += answer.get("rejected", 0)
                        for e in answer.get("errors", []):
                            if len(stats.first_errors) < 10:
                                stats.first_errors.append(
                                    f"item {e.get('index')}: {e.get('message')}"
                                )
                        if progress:
                            progress(body.count(b"\n"))
                    cp.offset = end
                    cp.save()
            finally:
                if source is not None:
                    fh.close()
            if not follow or source is None:
                return stats
            if idle_stop and idle_stop():
                return stats
            sleep(0.5)
            try:
                if source.stat().st_ino != cp.inode or source.stat().st_size < cp.offset:
                    cp.inode, cp.offset = 0, 0  # rotated or truncated: start the new file over
            except FileNotFoundError:
                pass  # between a rotation's rename and the new file
    finally:
        if own:
            client.close()


def _stdin(fh: BinaryIO, size: int) -> Iterator[tuple[bytes, int]]:
    lines: list[bytes] = []
    for line in iter(fh.readline, b""):
        if line.strip():
            lines.append(line if line.endswith(b"\n") else line + b"\n")
        if len(lines) >= size:
            yield b"".join(lines), 0
            lines = []
    if lines:
        yield b"".join(lines), 0
