"""The log-shipping endpoints: auth, size limits, decompression, partial success."""

from __future__ import annotations

import functools
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from app.deps import ClockDep, SettingsDep, WriterDep
from app.storage.batches import Batch, Reject, WriteResult
from app.storage.tokens import TokenInfo
from app.storage.writer import Writer, WriterSaturated, WriterStopped
from ingest.auth import require_scope
from ingest.body import BodyError, check_native_type, media_type, read_limited
from ingest.formats import litellm, otlp
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


async def _store(writer: Writer, batch: Batch) -> WriteResult | JSONResponse:
    """Hand a batch to the writer; a 503 with Retry-After (retryable for every sender, OTLP
    exporters included) when it cannot be stored now."""
    try:
        return await writer.submit(batch)
    except WriterSaturated as exc:
        return _error(
            503, "the writer is saturated; nothing was stored, retry later", exc.retry_after
        )
    except WriterStopped:
        return _error(503, "the server is starting or stopping; retry shortly", 2)
    except Exception as exc:  # storage failure: the client must know nothing was kept
        log.error("storing a %s batch from %s failed: %s", batch.format, batch.gateway, exc)
        return _error(
            503, f"storage failed ({type(exc).__name__}); nothing was stored, retry later", 5
        )


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


@router.post(
    "/v1/traces",
    responses=_ERRORS,  # type: ignore[arg-type]
    summary="Take OTLP/HTTP traces (OpenTelemetry GenAI spans)",
    description=(
        "An OTLP ExportTraceServiceRequest as `application/x-protobuf` or `application/json`, "
        "gzip allowed. Spans with `gen_ai.*` attributes become records; other spans are "
        "ignored. The answer is an ExportTraceServiceResponse whose partial_success counts "
        "the spans that could not be stored (they are kept in `rejects`)."
    ),
)
async def post_traces(
    request: Request,
    settings: SettingsDep,
    writer: WriterDep,
    clock: ClockDep,
    token: Annotated[TokenInfo, Depends(require_scope("ingest"))],
) -> Response:
    """Take OTLP traces from an OpenTelemetry SDK or Collector."""
    return await _otlp(request, settings, writer, clock, token, logs=False)


@router.post(
    "/v1/logs",
    responses=_ERRORS,  # type: ignore[arg-type]
    summary="Take OTLP/HTTP logs (OpenTelemetry GenAI log records)",
    description=(
        "An OTLP ExportLogsServiceRequest (protobuf or JSON, gzip allowed); log records with "
        "`gen_ai.*` attributes become records, as for /v1/traces."
    ),
)
async def post_logs(
    request: Request,
    settings: SettingsDep,
    writer: WriterDep,
    clock: ClockDep,
    token: Annotated[TokenInfo, Depends(require_scope("ingest"))],
) -> Response:
    """Take OTLP logs from an OpenTelemetry SDK or Collector."""
    return await _otlp(request, settings, writer, clock, token, logs=True)


async def _otlp(request, settings, writer, clock, token, *, logs: bool) -> Response:
    """The OTLP/HTTP contract: protobuf or JSON in, Export…ServiceResponse out."""
    received_at = clock()
    kind = media_type(request.headers.get("content-type"))
    if kind not in ("application/x-protobuf", "application/json"):
        return _error(
            415,
            f"Content-Type {kind or 'none'} is not OTLP: send application/x-protobuf or "
            "application/json",
        )
    json_body = kind == "application/json"
    try:
        body = await read_limited(
            request.stream(), request.headers.get("content-encoding"), settings.max_body_bytes
        )
        parsed, ignored = await run_in_threadpool(
            otlp.parse,
            body,
            json_body=json_body,
            gateway=token.gateway,
            received_at=received_at,
            max_items=settings.max_items_per_request,
            logs=logs,
        )
    except BodyError as exc:
        return _error(exc.status, exc.message)
    except EnvelopeError as exc:
        reject = Reject(None, None, str(exc), None)
        await _quarantine(writer, Batch(token.gateway, "otlp", received_at, None, [reject]))
        return _error(400, str(exc))
    stored = await _store(
        writer, Batch(token.gateway, "otlp", received_at, parsed.rows, parsed.rejects)
    )
    if isinstance(stored, JSONResponse):
        return stored
    what = "log record" if logs else "span"
    message = "; ".join(f"{what} {r.index}: {r.reason}" for r in parsed.rejects[:5])
    content, media = otlp.response(len(parsed.rejects), message, json_body, logs)
    # Not GenAI operations: neither stored nor rejected, but counted for the sender to see.
    headers = {"X-Tokenshape-Ignored": str(ignored)}
    return Response(content=content, media_type=media, headers=headers)


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
    result = await _store(writer, Batch(gateway, fmt, received_at, parsed.rows, parsed.rejects))
    if isinstance(result, JSONResponse):
        return result
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
