"""POST /v1/rollups: rollups computed elsewhere (Apache Spark over a data lake, or a regional
tokenshape's `lake push`) imported into this node's rollup tiers.

The body is an uncompressed tar of the lake layout (app/services/lake.py, docs/lake-import.md):
spooled to a temporary file as it arrives, within TOKENSHAPE_MAX_BODY_BYTES and
TOKENSHAPE_BODY_TIMEOUT_S, checked as `tokenshape lake import` checks a folder, then imported
hour by hour. An `ingest` or `admin` token; the hours are recorded under `origin` (default:
the token's gateway)."""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect

from app.auth.bearer import TokenInfo, require_scope
from app.server import runtime
from app.server.deps import DbDep, SettingsDep
from app.server.errors import ErrorResponse
from app.services import lake

router = APIRouter(tags=["ingest"])
RollupsToken = Annotated[TokenInfo, Depends(require_scope("ingest"))]
# The tar's own types, and octet-stream for clients that send any binary body as that.
TAR_TYPES = {"application/x-tar", "application/tar", "application/octet-stream"}
ROUTE = "/v1/rollups"


class RollupsImported(BaseModel):
    """What the import wrote."""

    origin: str | None
    gateways: list[str]
    hours: int  # hours imported at hourly grain
    days: int  # days imported from daily rows only
    rows: dict[str, int]  # rows written per table
    skipped_hours: int
    skipped_days: int
    notes: list[str]


_ERRORS = {
    400: {
        "model": ErrorResponse,
        "description": "Not a tar of the layout, or a file in it is "
        "not Parquet / its manifest not JSON.",
    },
    401: {"model": ErrorResponse, "description": "Missing, unknown or revoked token."},
    403: {
        "model": ErrorResponse,
        "description": "The token has neither the `ingest` nor the `admin` scope.",
    },
    408: {"model": ErrorResponse, "description": "The body took longer than the body timeout."},
    413: {"model": ErrorResponse, "description": "Body over TOKENSHAPE_MAX_BODY_BYTES."},
    415: {
        "model": ErrorResponse,
        "description": "Not `application/x-tar` (or `application/octet-stream`), or compressed.",
    },
    422: {
        "model": ErrorResponse,
        "description": "The rollups do not check: schema version, a "
        "bucket constant, a column, a value or the manifest's counts, named.",
    },
    429: {"model": ErrorResponse, "description": "Over the token's rate limit; see Retry-After."},
    503: {
        "model": ErrorResponse,
        "description": "A concurrent write conflicted, or the disk "
        "failed; nothing of the failed batch was kept. Retry after Retry-After.",
    },
}


def _error(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


async def _spool(request: Request, path: Path, limit: int, timeout: float) -> JSONResponse | None:
    """Write the body to `path` as it arrives; an error answer when it cannot be taken."""
    size = 0
    try:
        async with asyncio.timeout(timeout):
            with path.open("wb") as out:
                async for chunk in request.stream():
                    size += len(chunk)
                    if size <= limit:
                        out.write(chunk)
                    elif size > 2 * limit:
                        break
                    # Over the limit: read on (up to twice it) without keeping it, so the
                    # answer is not lost to a connection reset while the sender still writes
                    # (`lake push` halves its request on a 413 it can read).
            if size > limit:
                return _error(
                    413,
                    f"the body is larger than {limit} bytes; push fewer hours per request "
                    "(`lake push --hours`) or raise TOKENSHAPE_MAX_BODY_BYTES",
                )
    except TimeoutError:
        response = _error(
            408,
            f"the body did not arrive within {timeout:g} s; send fewer hours per request "
            "(the limit is TOKENSHAPE_BODY_TIMEOUT_S)",
        )
        response.headers["Connection"] = "close"
        return response
    except ClientDisconnect:
        return _error(400, "the client disconnected before the body was complete; nothing kept")
    return None


@router.post(
    ROUTE,
    response_model=RollupsImported,
    responses=_ERRORS,  # type: ignore[arg-type]
    summary="Import rollups computed elsewhere (Spark over a lake, another node)",
    description=(
        "An uncompressed tar (`application/x-tar`) of the lake layout: `hourly/_manifest.json`, "
        "`hourly/{shapes,values,gaps,ttft}/day=YYYY-MM-DD/*.parquet`, and the same under "
        "`daily/`, as `tar -cf - -C OUT .` makes it from `tokenshape lake rollup --output OUT`. "
        "Per covered hour the full-grain rows of the gateways in the upload are replaced (an "
        "import of the same rows again changes nothing), the hours are recorded as from the "
        "lake under `origin` (default: the token's gateway) and tokenshape never rebuilds "
        "them. Needs an `ingest` or `admin` token."
    ),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                media: {"schema": {"type": "string", "format": "binary"}}
                for media in ("application/x-tar", "application/octet-stream")
            },
        }
    },
)
async def post_rollups(
    request: Request,
    settings: SettingsDep,
    db: DbDep,
    token: RollupsToken,
    origin: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="name the hours are recorded under"),
    ] = None,
) -> JSONResponse:
    """Take a tar of lake rollups and import it."""
    limiter = runtime.of(request).rate_limiter
    over = limiter.admit_request(token.id, f"{token.display} (gateway {token.gateway})")
    if over is not None:
        return _error(429, over.message, over.retry_after)
    encoding = (request.headers.get("content-encoding") or "identity").strip().lower()
    kind = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
    if encoding != "identity" or kind not in TAR_TYPES:
        return _error(
            415,
            f"Content-Type {kind or 'none'}"
            + (f" with Content-Encoding {encoding}" if encoding != "identity" else "")
            + " is not taken here: send the layout as an uncompressed tar, Content-Type "
            "application/x-tar (`tar -cf - -C OUT . | curl --data-binary @- -H "
            "'Content-Type: application/x-tar' …`)",
        )
    with tempfile.TemporaryDirectory(prefix="tokenshape-rollups-") as tmp:
        archive = Path(tmp, "upload.tar")
        refused = await _spool(request, archive, settings.max_body_bytes, settings.body_timeout_s)
        if refused is not None:
            return refused
        try:
            result = await run_in_threadpool(
                lake.import_upload, db, archive, tz=settings.tz, origin=origin or token.gateway
            )
        except lake.LakeUnreadable as exc:
            return _error(400, str(exc))
        except lake.LakeError as exc:
            return _error(422, str(exc))
        except lake.LakeBusy as exc:
            return _error(503, str(exc), 2)
        except OSError as exc:
            return _error(503, f"the upload could not be unpacked here ({exc}); retry later", 5)
    payload = RollupsImported(
        origin=result.origin,
        gateways=result.gateways,
        hours=result.hours,
        days=result.days,
        rows=result.rows,
        skipped_hours=result.skipped_hours,
        skipped_days=result.skipped_days,
        notes=result.notes[:20],
    )
    return JSONResponse(payload.model_dump())


@router.api_route(
    ROUTE, methods=["GET", "PUT", "PATCH", "DELETE", "OPTIONS"], include_in_schema=False
)
async def other_methods() -> JSONResponse:
    """405: else Dash's catch-all would answer a GET here with its page shell and a 200."""
    return JSONResponse(
        {"detail": f"{ROUTE} takes POST only (a tar of lake rollups)"},
        status_code=405,
        headers={"Allow": "POST"},
    )
