"""The log-shipping endpoints: auth, size limits, decompression, partial success."""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response
from starlette.concurrency import run_in_threadpool

from app.auth.bearer import require_scope
from app.server import runtime
from app.server.deps import ClockDep, SettingsDep, WriterDep
from app.server.errors import ErrorResponse
from app.server.ratelimit import Limited, RateLimiter
from app.storage.batches import Batch, Reject, WriteResult
from app.storage.tokens import TokenInfo
from app.storage.write.store import PartlyStored
from app.storage.write.writer import Writer, WriterSaturated, WriterStopped, failure_reason
from ingest.body import BodyError, check_native_type, media_type, read_limited
from ingest.formats import litellm, otlp
from ingest.formats.native import EnvelopeError, parse
from ingest.schemas import IngestResponse, ItemError

log = logging.getLogger("tokenshape.ingest")
router = APIRouter(tags=["ingest"])
# The token of every ingest route: a bearer token with the `ingest` scope.
IngestToken = Annotated[TokenInfo, Depends(require_scope("ingest"))]
MAX_ERRORS = 100
INLINE_DECODE_BYTES = 1024 * 1024

_ERRORS = {
    400: {"model": ErrorResponse, "description": "Nothing in the body could be parsed."},
    401: {"model": ErrorResponse, "description": "Missing, unknown or revoked token."},
    403: {"model": ErrorResponse, "description": "The token lacks the `ingest` scope."},
    408: {"model": ErrorResponse, "description": "The body took longer than the body timeout."},
    413: {"model": ErrorResponse, "description": "Body over the limit after decompression."},
    415: {"model": ErrorResponse, "description": "Unsupported Content-Type or -Encoding."},
    429: {"model": ErrorResponse, "description": "Over the token's rate limit; see Retry-After."},
    503: {"model": ErrorResponse, "description": "Writer saturated; retry after Retry-After."},
}


def _error(status: int, message: str, retry_after: int | None = None) -> JSONResponse:
    headers = {"Retry-After": str(retry_after)} if retry_after else None
    return JSONResponse({"detail": message}, status_code=status, headers=headers)


def _over(request: Request, token: TokenInfo, records: int | None = None) -> JSONResponse | None:
    """A 429 when the token is over its requests/s limit (records None: before the body is
    read) or its records/s limit (after parsing, before anything is stored)."""
    limiter: RateLimiter = runtime.of(request).rate_limiter
    who = f"{token.display} (gateway {token.gateway})"
    over: Limited | None = (
        limiter.admit_request(token.id, who)
        if records is None
        else limiter.admit_records(token.id, who, records)
    )
    return None if over is None else _error(429, over.message, over.retry_after)


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
    except Exception as exc:  # storage failure: say exactly what, if anything, was kept
        # PartlyStored: the flush's valid rows are durable, only keeping its rejects failed.
        stored = exc.result_for(batch) if isinstance(exc, PartlyStored) else None
        cause = exc.cause if isinstance(exc, PartlyStored) else exc
        log.error("storing a %s batch from %s failed: %s", batch.format, batch.gateway, cause)
        if stored is not None and stored.accepted:
            return _error(
                503,
                f"storage failed ({failure_reason(cause)}) while keeping this request's "
                f"{stored.rejected} invalid records; its {stored.accepted} valid records were "
                "stored. Resend it later to have the invalid ones kept: the stored records "
                "then count as duplicates",
                5,
            )
        return _error(
            503, f"storage failed ({failure_reason(cause)}); nothing was stored, retry later", 5
        )


async def _refuse(
    request: Request, writer: Writer, token: TokenInfo, fmt: str, received_at, exc: BodyError
) -> JSONResponse:
    """Answer a body that could not be read, keeping the refusal in `rejects` (with the head of
    the body as sent when it went unread: a wrong Content-Type)."""
    raw = await _head(request) if exc.status == 415 else None
    reject = Reject(None, None, exc.message, raw)
    await _quarantine(writer, Batch(token.gateway, fmt, received_at, None, [reject]))
    response = _error(exc.status, exc.message)
    if exc.status == 408:  # the rest of a trickling body must not hold the connection
        response.headers["Connection"] = "close"
    return response


async def _head(request: Request) -> str | None:
    """The first bytes of an unread body as sent, for `rejects`; bounded in size and time."""
    settings = runtime.of(request).settings
    out = bytearray()
    try:
        async with asyncio.timeout(min(settings.body_timeout_s, 5.0)):
            async for chunk in request.stream():
                out += chunk
                if len(out) >= settings.reject_raw_chars:
                    break
    except Exception:  # a slow or vanished client: the reason alone is kept
        pass
    return out[: settings.reject_raw_chars].decode(errors="replace") or None


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
    token: IngestToken,
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
    token: IngestToken,
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
    token: IngestToken,
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
    token: IngestToken,
) -> Response:
    """Take OTLP logs from an OpenTelemetry SDK or Collector."""
    return await _otlp(request, settings, writer, clock, token, logs=True)


async def _otlp(request, settings, writer, clock, token, *, logs: bool) -> Response:
    """The OTLP/HTTP contract: protobuf or JSON in, Export…ServiceResponse out."""
    with writer.incoming():
        return await _otlp_in(request, settings, writer, clock, token, logs=logs)


async def _otlp_in(request, settings, writer, clock, token, *, logs: bool) -> Response:
    if limited := _over(request, token):
        return limited
    received_at = clock()
    kind = media_type(request.headers.get("content-type"))
    if kind not in ("application/x-protobuf", "application/json"):
        refusal = BodyError(
            415,
            f"Content-Type {kind or 'none'} is not OTLP: send application/x-protobuf or "
            "application/json",
        )
        return await _refuse(request, writer, token, "otlp", received_at, refusal)
    json_body = kind == "application/json"
    try:
        body = await read_limited(
            request.stream(),
            request.headers.get("content-encoding"),
            settings.max_body_bytes,
            settings.body_timeout_s,
        )
        decoded = await run_in_threadpool(
            _decoded,
            functools.partial(
                otlp.parse,
                body,
                json_body=json_body,
                gateway=token.gateway,
                received_at=received_at,
                max_items=settings.max_items_per_request,
                logs=logs,
            ),
        )
        if isinstance(decoded, EnvelopeError):
            raise decoded
        parsed, ignored = decoded
    except BodyError as exc:
        return await _refuse(request, writer, token, "otlp", received_at, exc)
    except EnvelopeError as exc:
        # JSON is kept as text; protobuf is binary and would be noise in a text column.
        raw = body[: settings.reject_raw_chars].decode(errors="replace") if json_body else None
        reject = Reject(None, None, str(exc), raw)
        await _quarantine(writer, Batch(token.gateway, "otlp", received_at, None, [reject]))
        return _error(400, str(exc))
    batch = Batch(token.gateway, "otlp", received_at, parsed.rows, parsed.rejects, parsed.hashes)
    if limited := _over(request, token, batch.row_count):
        return limited
    stored = await _store(writer, batch)
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
    with writer.incoming():
        return await _take_in(request, settings, writer, clock, token, fmt, decoder)


def _decoded(decode):
    """The parse, or its refusal as a value without a traceback: raised across the thread
    pool, its frames (and the 16 MB body they hold) stayed alive in the idle worker that
    raised it, one body per worker, until that worker ran again."""
    try:
        return decode()
    except EnvelopeError as exc:
        exc.__traceback__ = exc.__context__ = exc.__cause__ = None
        return exc


async def _take_in(request, settings, writer, clock, token, fmt: str, decoder) -> JSONResponse:
    if limited := _over(request, token):
        return limited
    received_at = clock()
    gateway = token.gateway
    try:
        ndjson = check_native_type(request.headers.get("content-type"))
        body = await read_limited(
            request.stream(),
            request.headers.get("content-encoding"),
            settings.max_body_bytes,
            settings.body_timeout_s,
        )
    except BodyError as exc:
        return await _refuse(request, writer, token, fmt, received_at, exc)

    decode = functools.partial(
        decoder,
        body,
        ndjson=ndjson,
        gateway=gateway,
        received_at=received_at,
        max_items=settings.max_items_per_request,
    )
    # A small body decodes in a few milliseconds: handing it to a worker thread costs more
    # than that (GIL hand-offs with the event loop halve throughput). Big bodies still go
    # to a thread so one gateway cannot stall the loop for long.
    if len(body) <= INLINE_DECODE_BYTES:
        parsed = _decoded(decode)
    else:
        parsed = await run_in_threadpool(_decoded, decode)
    if isinstance(parsed, EnvelopeError):
        raw = body[: settings.reject_raw_chars].decode(errors="replace")
        reject = Reject(None, None, str(parsed), raw)
        await _quarantine(writer, Batch(gateway, fmt, received_at, None, [reject]))
        return _error(400, str(parsed))
    batch = Batch(gateway, fmt, received_at, parsed.rows, parsed.rejects, parsed.hashes)
    if limited := _over(request, token, batch.row_count):
        return limited
    result = await _store(writer, batch)
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
