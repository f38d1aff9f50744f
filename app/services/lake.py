"""Lake rollups in and out, for the CLI and the API: importing the Spark job's layout (a folder,
object storage, or a tar of it posted to /v1/rollups), and pushing this node's own rollups to a
central node through that same route.

The wire format of /v1/rollups: an uncompressed tar of the layout (docs/lake-import.md), as
`tar -cf - -C OUT .` makes it from the job's --output folder; the tier manifests travel in
it, so an upload is checked exactly as a folder is. A push sends its clean hours (rebuilt
from raw rows or sealed, none waiting for a rebuild) in tars of up to `hours_per_request`
contiguous hours, and halves a request the central node finds too big (413)."""

from __future__ import annotations

import random
import re
import socket
import tarfile
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from email.utils import parsedate_to_datetime
from pathlib import Path, PurePosixPath

import httpx
import tenacity

from app.storage import lake as store
from app.storage.database import Database
from app.storage.lake import ImportResult, LakeBusy, LakeError, LakeUnreadable

__all__ = [
    "ImportResult",
    "LakeBusy",
    "LakeError",
    "LakeUnreadable",
    "PushError",
    "PushGaveUp",
    "PushRound",
    "Pusher",
    "UploadError",
    "default_origin",
    "import_path",
    "import_upload",
    "push_round",
]

ROUTE = "/v1/rollups"
TAR_TYPE = "application/x-tar"
HOURS_PER_REQUEST = 24
GIVE_UP_AFTER_S = 600.0
REQUEST_TIMEOUT_S = 120.0
# Members of a layout tar: the manifests and the tables' Parquet files (in day=… folders).
_MEMBER = re.compile(
    r"^(?:_manifest\.json|(?:hourly|daily)/_manifest\.json|"
    r"(?:hourly|daily)/(?:shapes|values|gaps|ttft)/(?:day=[0-9-]+/)?[^/]+\.parquet)$"
)
# 408: a slow body the server gave up on; resending is safe (an import is idempotent).
RETRYABLE = {408, 429, 500, 502, 503, 504}
FINAL = {
    400: "the central node could not read the rollups",
    401: "the token is not valid there",
    403: "the token lacks the ingest scope there",
    404: "no /v1/rollups there: is --url a tokenshape server of this version?",
    415: "the central node does not take this format",
    422: "the central node refused the rollups",
}
# One import at a time per process: two would only conflict in the same tables and retry.
_importing = threading.Lock()


class UploadError(LakeUnreadable):
    """A posted body that is not a usable tar of the layout."""


class PushError(RuntimeError):
    """Pushing cannot go on (a final answer from the central node); the message says why."""


class PushGaveUp(PushError):
    """The central node did not take a request within the give-up deadline."""


class _TooBig(Exception):
    """The central node answered 413."""


class _Temporary(Exception):
    """A failure worth another try (a connection error, 408/429/5xx)."""

    def __init__(self, reason: str, retry_after: float | None = None):
        super().__init__(reason)
        self.retry_after = retry_after


# --- import -----------------------------------------------------------------------------------


def import_path(
    db: Database,
    path: str | Path,
    *,
    tz: str,
    origin: str | None = None,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import the layout at `path` (a folder, s3://, gs://) into the tiers, on a cursor of its
    own; `tz` is this node's zone (its daily tier's days)."""
    with _importing:
        con = db.new_cursor()
        try:
            return store.import_layout(con, str(path), tz=tz, origin=origin, progress=progress)
        finally:
            con.close()


def unpack(archive: Path, dest: Path) -> int:
    """Extract the layout's members of a tar into `dest` (regular files only, never outside
    it); other entries such as Spark's _SUCCESS and .crc files are skipped. Returns the
    files extracted."""
    try:
        tar = tarfile.open(archive, mode="r:")  # uncompressed: Parquet is compressed already
    except (tarfile.TarError, OSError) as exc:
        raise UploadError(
            f"the body is not an uncompressed tar archive ({exc}); send the layout as "
            f"{TAR_TYPE}, made with `tar -cf - -C OUT .` from the lake job's --output"
        ) from None
    extracted = 0
    manifests = 0
    try:
        with tar:
            for member in tar:
                name = member.name
                while name.startswith("./"):
                    name = name[2:]
                if member.isdir() or name in ("", "."):
                    continue
                parts = PurePosixPath(name).parts
                if name.startswith("/") or ".." in parts:
                    raise UploadError(f"the archive's member {member.name!r} points outside it")
                if not _MEMBER.match(name):
                    continue  # not part of the layout (Spark's _SUCCESS, .crc, a README)
                if not member.isfile():
                    raise UploadError(
                        f"the archive's {name} is a link or a device: put the files themselves"
                    )
                target = dest.joinpath(*parts)
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if source is None:
                    continue
                with source, target.open("wb") as out:
                    while chunk := source.read(1 << 20):
                        out.write(chunk)
                extracted += 1
                manifests += name.endswith("_manifest.json") and "/" in name
    except tarfile.TarError as exc:
        raise UploadError(f"the tar archive is damaged ({exc}); send it again") from None
    if not manifests:
        raise UploadError(
            "the archive holds no hourly/_manifest.json or daily/_manifest.json at its top: "
            "make it inside the lake job's --output folder, `tar -cf - -C OUT .`"
        )
    return extracted


def import_upload(db: Database, archive: Path, *, tz: str, origin: str | None) -> ImportResult:
    """Import a posted tar of the layout (unpacked beside it, then removed)."""
    with tempfile.TemporaryDirectory(prefix="unpacked-", dir=archive.parent) as tmp:
        unpack(archive, Path(tmp))
        try:
            return import_path(db, tmp, tz=tz, origin=origin)
        except LakeError as exc:
            # The sender knows the layout's names, not this server's temporary folder.
            message = str(exc).replace(tmp + "/", "")
            raise type(exc)(message) from None


# --- push -------------------------------------------------------------------------------------


def default_origin() -> str:
    """This node's name, as the hours it pushes are recorded under at the central node."""
    return socket.gethostname() or "tokenshape"


def _retry_after(value: str | None) -> float | None:
    """Seconds a Retry-After header asks for (a number or an HTTP date). A copy of
    ingest/ship.py's: the shipping client may import nothing of the server, nor the
    services anything of ingest (import-linter), and no lower module is shared by both."""
    if not value:
        return None
    value = value.strip()
    if value.replace(".", "", 1).isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, not the host's local time
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - time.time())


class PushStopped(Exception):
    """A round cut short between requests because the caller is stopping."""


@dataclass
class Pusher:
    """Posts layout tars to a central node's /v1/rollups, retrying what may pass later as
    `tokenshape ship` does (Retry-After honoured, exponential backoff with jitter, a deadline)."""

    url: str
    token: str = field(repr=False)
    origin: str
    give_up_after: float = GIVE_UP_AFTER_S
    max_wait: float = 60.0
    sleep: Callable[[float], None] = time.sleep
    clock: Callable[[], float] = time.monotonic
    client: httpx.Client | None = None
    retries: int = 0

    def __post_init__(self) -> None:
        if self.client is None:
            self.client = httpx.Client(
                base_url=self.url,
                headers={"Authorization": f"Bearer {self.token}"},
                timeout=REQUEST_TIMEOUT_S,
            )

    def close(self) -> None:
        """Close the HTTP client."""
        if self.client is not None:
            self.client.close()

    def post(self, body: bytes) -> dict:
        """Post one tar until the central node takes it; its answer. Raises _TooBig on 413,
        PushError on a final answer, PushGaveUp past the deadline (0: never give up)."""
        assert self.client is not None
        client = self.client
        started = self.clock()

        def remaining() -> float:
            return started + self.give_up_after - self.clock() if self.give_up_after else 1e18

        def attempt() -> dict:
            try:
                r = client.post(
                    ROUTE,
                    params={"origin": self.origin},
                    content=body,
                    headers={"Content-Type": TAR_TYPE},
                    timeout=min(REQUEST_TIMEOUT_S, max(1.0, remaining())),
                )
            except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
                raise PushError(
                    f"the URL is not usable ({exc}); use e.g. http://host:8050"
                ) from None
            except httpx.TransportError as exc:
                raise _Temporary(f"{type(exc).__name__}: {exc}".rstrip(": ")) from exc
            if r.status_code == 200:
                try:
                    return r.json()
                except ValueError:
                    raise PushError("200 without a JSON answer: is --url a tokenshape?") from None
            if r.status_code == 413:
                raise _TooBig()
            if r.status_code in FINAL:
                detail = _detail(r)
                raise PushError(f"{r.status_code}: {FINAL[r.status_code]}: {detail}".rstrip(": "))
            if r.status_code not in RETRYABLE:
                raise PushError(f"{r.status_code}: unexpected answer: {r.text[:200]}")
            raise _Temporary(
                f"HTTP {r.status_code} {r.reason_phrase}".rstrip(),
                _retry_after(r.headers.get("retry-after")) if r.status_code in (429, 503) else None,
            )

        backoff = tenacity.wait_exponential_jitter(initial=1, max=self.max_wait, jitter=1)

        def wait(state: tenacity.RetryCallState) -> float:
            assert state.outcome is not None
            exc = state.outcome.exception()
            if isinstance(exc, _Temporary) and exc.retry_after is not None:
                seconds = min(exc.retry_after, self.max_wait) * random.uniform(1.0, 1.25)
            else:
                seconds = backoff(state)
            return max(0.0, min(seconds, remaining()))

        def counted(state: tenacity.RetryCallState) -> None:
            self.retries += 1

        retrying = tenacity.Retrying(
            retry=tenacity.retry_if_exception_type(_Temporary),
            wait=wait,
            stop=lambda state: remaining() <= 0,
            sleep=self.sleep,
            before_sleep=counted,
            reraise=True,
        )
        try:
            return retrying(attempt)
        except _Temporary as exc:
            raise PushGaveUp(
                f"gave up on {self.url.rstrip('/')}{ROUTE} after {self.clock() - started:.1f} s "
                f"of retries; the last try failed with: {exc}"
            ) from None


def _detail(r: httpx.Response) -> str:
    try:
        return (
            str(r.json().get("detail", "")) if "json" in r.headers.get("content-type", "") else ""
        )
    except ValueError:
        return ""


@dataclass
class PushRound:
    """What one push sent: hours, requests, rows per table, and the newest rebuild it covered
    (the next round sends only hours rebuilt after it)."""

    hours: int = 0
    requests: int = 0
    rows: dict[str, int] = field(default_factory=dict)
    first: datetime | None = None
    last: datetime | None = None
    built_until: datetime | None = None


def runs(hours: list[datetime], size: int) -> list[list[datetime]]:
    """`hours` (sorted) cut into contiguous runs of at most `size` hours: a manifest's
    partition covers [from, to), so one request never spans a gap."""
    out: list[list[datetime]] = []
    for h in hours:
        if out and h - out[-1][-1] == timedelta(hours=1) and len(out[-1]) < size:
            out[-1].append(h)
        else:
            out.append([h])
    return out


def _tar(folder: Path, dest: Path) -> bytes:
    with tarfile.open(dest, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(folder).as_posix())
    return dest.read_bytes()


def _send(db: Database, pusher: Pusher, hours: list[datetime], tz: str, out: PushRound) -> None:
    """Export `hours`, post them; halve on 413 down to one hour."""
    with tempfile.TemporaryDirectory(prefix="tokenshape-push-") as tmp:
        con = db.new_cursor()
        try:
            rows = store.export_hours(con, Path(tmp, "layout"), hours, tz=tz)
        finally:
            con.close()
        body = _tar(Path(tmp, "layout"), Path(tmp, "layout.tar"))
    try:
        pusher.post(body)
    except _TooBig:
        if len(hours) == 1:
            raise PushError(
                f"the rollups of the hour {hours[0]:%Y-%m-%d %H:00} UTC ({len(body):,} bytes) "
                "are over the central node's body limit: raise TOKENSHAPE_MAX_BODY_BYTES there"
            ) from None
        half = len(hours) // 2
        _send(db, pusher, hours[:half], tz, out)
        _send(db, pusher, hours[half:], tz, out)
        return
    out.requests += 1
    out.hours += len(hours)
    for table, n in rows.items():
        out.rows[table] = out.rows.get(table, 0) + n


def push_round(
    db: Database,
    pusher: Pusher,
    *,
    tz: str,
    since: datetime | None = None,
    built_after: datetime | None = None,
    hours_per_request: int = HOURS_PER_REQUEST,
    stopping: Callable[[], bool] | None = None,
) -> PushRound:
    """Push this node's clean full-grain hours from `since`, rebuilt after `built_after`;
    `stopping` is asked between requests (a server shutting down): PushStopped then."""
    con = db.new_cursor()
    try:
        found = store.clean_hours(con, since, built_after)
    finally:
        con.close()
    out = PushRound()
    if not found:
        out.built_until = built_after
        return out
    hours = [h for h, _ in found]
    out.first, out.last = hours[0], hours[-1]
    for chunk in runs(hours, hours_per_request):
        if stopping is not None and stopping():
            raise PushStopped(f"stopped after {out.requests} requests of this round")
        _send(db, pusher, chunk, tz, out)
    # Only once every hour went: a failed round is sent whole again (an import is idempotent).
    out.built_until = max(b for _, b in found)
    return out
