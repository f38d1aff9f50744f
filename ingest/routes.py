"""The log-shipping endpoints: auth, size limits, decompression, partial success."""

from __future__ import annotations

import functools
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from app.deps import ClockDep, SettingsDep, WriterDep
from app.storage.batches import Batch, Reject
from app.storage.tokens import TokenInfo
from app.storage.writer import Writer, WriterSaturated, WriterStopped
from ingest.auth import require_scope
from ingest.body import BodyError, check_native_type, read_limited
from ingest.formats import litellm
from ingest.formats.native import EnvelopeError, parse
from ingest.schemas import ErrorResponse, IngestResponse, ItemError

log = logging.getLogger("tokenshape.ingest")
router = APIRouter(tags=["ingest"])
MAX_ERRORS = 100
INLINE_DECODE_BYTES = 1024 * 1024

_ERRORS = {
    400: {"model": ErrorResponse, "description": "Nothing in the body could be parsed."},
    401: {"model": ErrorResponse, "description": "Missing, unknown or revoked token."},
    403: {"model": ErrorResponse, "description": "The token lacks the `ingest` scope."},
    413: {"model": ErrorResponse, "description": "Body over the limit after decompression."},
    415: {"model": ErrorResponse, "description": "Unsupported Content-Type or -Encoding."},
    503: {"model": ErrorResponse, "description": "Writer saturated; retry after Retry-After."},
}


def _error(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


async def _quarantine(writer: Writer, batch: Batch) -> None:
    """Keep a payload that was refused whole; if even that fails, say so in the log."""
    try:
        await writer.submit(batch)
    except Exception as exc:  # the client already gets its own error answer
        log.warning(
            "could not keep a refused %s payload from %s: %s", batch.format, batch.gateway, exc
        )


@router.post(
    "/v1/requests",
    response_model=IngestResponse,
    responses=_ERRORS,  # type: ignore[arg-type]
    summary="Ship native request records",
    description=(
        "One JSON object, a JSON array of objects (`application/json`), or one object per "
        "line (`application/x-ndjson`); gzip allowed. Valid items are stored, invalid ones "
        "quarantined; the answer counts both and lists the first 100 item errors."
    ),
)
async def post_requests(
    request: Request,
    settings: SettingsDep,
    writer: WriterDep,
    clock: ClockDep,
    token: Annotated[TokenInfo, Depends(require_scope("ingest"))],
) -> JSONResponse:
    """Take a batch of native records from a gateway."""
    return await _take(request, settings, writer, clock, token, "native", parse)


@router.post(
    "/v1/litellm",
    response_model=IngestResponse,
    responses=_ERRORS,  # type: ignore[arg-type]
    summary="Take LiteLLM generic_api callback logs",
    description=(
        "LiteLLM proxy `generic_api` callback payloads (StandardLoggingPayload) in any of its "
        "log formats: `json_array`, `ndjson` or `single`. Same answer and rules as "
        "/v1/requests; errors name LiteLLM's fields."
    ),
)
async def post_litellm(
    request: Request,
    settings: SettingsDep,
    writer: WriterDep,
    clock: ClockDep,
    token: Annotated[TokenInfo, Depends(require_scope("ingest"))],
) -> JSONResponse:
    """Take LiteLLM's logs."""
    return await _take(request, settings, writer, clock, token, "litellm", litellm.parse)


async def _take(request, settings, writer, clock, token, fmt: str, decoder) -> JSONResponse:
    """The ingest contract for any format: read, decode, quarantine, store, answer."""
    received_at = clock()
    gateway = token.gateway
    try:
        ndjson = check_native_type(request.headers.get("content-type"))
        body = await read_limited(
            request.stream(), request.headers.get("content-encoding"), settings.max_body_bytes
        )
    except BodyError as exc:
        if exc.status in (400, 413):
            reject = Reject(None, None, exc.message, None)
            await _quarantine(writer, Batch(gateway, fmt, received_at, None, [reject]))
        return _error(exc.status, exc.message)

    decode = functools.partial(
        decoder,
        body,
        ndjson=ndjson,
        gateway=gateway,
        received_at=received_at,
        max_items=settings.max_items_per_request,
    )
    try:
        # A small body decodes in a few milliseconds: handing it to a worker thread costs more
        # than that (GIL hand-offs with the event loop halve throughput). Big bodies still go
        # to a thread so one gateway cannot stall the loop for long.
        if len(body) <= INLINE_DECODE_BYTES:
            parsed = decode()
        else:
            parsed = await run_in_threadpool(decode)
    except EnvelopeError as exc:
        raw = body[: settings.reject_raw_chars].decode(errors="replace")
        reject = Reject(None, None, str(exc), raw)
        await _quarantine(writer, Batch(gateway, fmt, received_at, None, [reject]))
        return _error(400, str(exc))
    try:
        result = await writer.submit(Batch(gateway, fmt, received_at, parsed.rows, parsed.rejects))
    except WriterSaturated as exc:
        return _error(
            503, "the writer is saturated; nothing was stored, retry later", exc.retry_after
        )
    except WriterStopped:
        return _error(503, "the server is starting or stopping; retry shortly", 2)
    except Exception as exc:  # storage failure: the client must know nothing was kept
        log.error("storing a batch from %s failed: %s", gateway, exc)
        return _error(
            503, f"storage failed ({type(exc).__name__}); nothing was stored, retry later", 5
        )
    errors = [
        ItemError(index=r.index, field=r.field, message=r.reason)
        for r in parsed.rejects[:MAX_ERRORS]
    ]
    payload = IngestResponse(
        accepted=result.accepted,
        duplicates=result.duplicates,
        rejected=result.rejected,
        errors=errors,
    )
    return JSONResponse(payload.model_dump())
