"""OTLP/HTTP traces and logs with OpenTelemetry GenAI semantic conventions, into records.

A span (or log record) is a GenAI operation when it carries a `gen_ai.*` attribute; others are
counted and ignored (not errors). For log records the time is the record's time and the total
time comes from gen_ai.client.operation.duration (seconds) when present.

Mapping: gen_ai.usage.input_tokens (or the older prompt_tokens) → isl;
gen_ai.usage.output_tokens (or completion_tokens) → osl; gen_ai.request.model (else
gen_ai.response.model) → model; gen_ai.response.id (else the span id) → request_id; span start →
started_at; end − start → e2e_ms; gen_ai.response.time_to_first_chunk (seconds) → ttft_ms;
server.address (else gen_ai.provider.name / gen_ai.system) → engine; a span with status ERROR
or an error.type → status error; the span's tracestate `ot=th:…` (else the attribute
sampling.probability, else SampleRate) → sample_rate (ingest/sampling.py). The records are
then checked by the native rules; errors name the OTLP attribute.
"""

from __future__ import annotations

import base64
import json
import math
from datetime import datetime

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from app.storage.batches import Reject
from ingest.formats.mapped import check
from ingest.formats.native import EnvelopeError, Parsed
from ingest.sampling import PROBABILITY_ATTRIBUTE, from_attributes, threshold_probability

SOURCE_FIELD = {
    "isl": "gen_ai.usage.input_tokens",
    "osl": "gen_ai.usage.output_tokens",
    "model": "gen_ai.request.model",
    "request_id": "gen_ai.response.id",
    "started_at": "start_time_unix_nano",
    "e2e_ms": "end_time_unix_nano",
    "ttft_ms": "gen_ai.response.time_to_first_chunk",
    "engine": "server.address",
    "sample_rate": PROBABILITY_ATTRIBUTE,
}
STATUS_ERROR = 2  # Status.STATUS_CODE_ERROR


def _value(v) -> object:
    kind = v.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(v, kind)
    return None


def _hex_ids(obj):
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping expects base64."""
    if isinstance(obj, dict):
        out = {}
        for key, value in obj.items():
            if key in ("traceId", "spanId", "parentSpanId") and isinstance(value, str):
                try:
                    value = base64.b64encode(bytes.fromhex(value)).decode()
                except ValueError:
                    pass  # not hex: let the protobuf parser say what is wrong
            out[key] = _hex_ids(value)
        return out
    if isinstance(obj, list):
        return [_hex_ids(v) for v in obj]
    return obj


def decode(body: bytes, json_body: bool, kind=ExportTraceServiceRequest):
    """The export request; EnvelopeError names the format when it does not decode."""
    request = kind()
    name = request.DESCRIPTOR.name
    if json_body and not body.strip():
        raise EnvelopeError(f"otlp: the body is empty: send an OTLP {name} in JSON")
    try:
        if json_body:
            obj = json.loads(body)
            if not isinstance(obj, dict):
                raise EnvelopeError(
                    f"otlp: the body must be a JSON object (an OTLP {name}), "
                    f"not {type(obj).__name__}"
                )
            json_format.ParseDict(_hex_ids(obj), request, ignore_unknown_fields=True)
        else:
            request.ParseFromString(body)
    except RecursionError:
        raise EnvelopeError(f"otlp: the body nests too deep to be an OTLP {name}") from None
    # The JSON mapping raises TypeError/AttributeError for values of the wrong JSON type deep in
    # the document: like a parse error, that is the sender's mistake, never a 500.
    except (DecodeError, json_format.ParseError, ValueError, TypeError, AttributeError) as exc:
        if isinstance(exc, EnvelopeError):
            raise
        kind = "JSON" if json_body else "protobuf"
        raise EnvelopeError(f"otlp: the body is not an OTLP {name} in {kind} ({exc})") from None
    return request


def _record(span) -> tuple[dict | None, str | None, str | None]:
    """(native record, None, None) for a GenAI span; (None, field, message) when it cannot be
    one; (None, None, None) when the span is not a GenAI operation."""
    attrs = {a.key: _value(a.value) for a in span.attributes}
    failed = span.status.code == STATUS_ERROR
    return _from(
        attrs,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        failed,
        span.span_id.hex(),
        span.status.message,
        span.trace_state,
    )


def _log_record(log) -> tuple[dict | None, str | None, str | None]:
    """The same for a log record (its time, and the duration attribute for the total time)."""
    attrs = {a.key: _value(a.value) for a in log.attributes}
    start = log.time_unix_nano or log.observed_time_unix_nano
    duration = attrs.get("gen_ai.client.operation.duration")
    numeric = isinstance(duration, int | float) and not isinstance(duration, bool)
    end = start + int(duration * 1e9) if numeric and math.isfinite(duration) and start else 0  # type: ignore[operator, arg-type]  # numeric: int or float
    return _from(attrs, start, end, False, log.span_id.hex(), "")


def _from(
    attrs: dict,
    start: int,
    end: int,
    failed: bool,
    fallback_id: str,
    status: str,
    tracestate: str = "",
):
    if not any(k.startswith("gen_ai.") for k in attrs):
        return None, None, None
    rate: object = threshold_probability(tracestate)
    if rate is None:
        rate, rate_field, rate_error = from_attributes(attrs)
        if rate_error is not None:
            return None, rate_field, rate_error
    isl = attrs.get("gen_ai.usage.input_tokens", attrs.get("gen_ai.usage.prompt_tokens"))
    osl = attrs.get("gen_ai.usage.output_tokens", attrs.get("gen_ai.usage.completion_tokens"))
    failed = failed or attrs.get("error.type") is not None
    if isl is None and not failed:
        return None, SOURCE_FIELD["isl"], "otlp: gen_ai.usage.input_tokens is missing"
    if osl is None and not failed:
        return None, SOURCE_FIELD["osl"], "otlp: gen_ai.usage.output_tokens is missing"
    if start and end and end < start:
        return None, "end_time_unix_nano", "otlp: the span ends before it starts"
    rec: dict = {
        "request_id": attrs.get("gen_ai.response.id") or fallback_id or None,
        "model": attrs.get("gen_ai.request.model") or attrs.get("gen_ai.response.model"),
        "isl": isl if isl is not None else 0,
        "osl": osl if osl is not None else 0,
        # The deployment that served it: its address, else the provider (gen_ai.provider.name,
        # or gen_ai.system before the conventions renamed it).
        "engine": attrs.get("server.address")
        or attrs.get("gen_ai.provider.name")
        or attrs.get("gen_ai.system"),
        "sample_rate": rate,
    }
    if start:
        rec["started_at"] = start / 1e9
        if end:
            rec["e2e_ms"] = (end - start) / 1e6
    first = attrs.get("gen_ai.response.time_to_first_chunk")
    if isinstance(first, int | float):
        rec["ttft_ms"] = first * 1000
    if failed:
        rec["status"] = "error"
        rec["error_type"] = str(attrs.get("error.type") or status or "error")[:256]
    return {k: v for k, v in rec.items() if v is not None}, None, None


def _items(request, logs: bool):
    """Spans (or log records) of an export request, in order."""
    if logs:
        for resource in request.resource_logs:
            for scope in resource.scope_logs:
                yield from scope.log_records
    else:
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                yield from scope.spans


def parse(
    body: bytes,
    *,
    json_body: bool,
    gateway: str,
    received_at: datetime,
    max_items: int,
    logs: bool = False,
) -> tuple[Parsed, int]:
    """(rows and rejects, items ignored as not GenAI) of an OTLP trace or log export."""
    request = decode(
        body, json_body, ExportLogsServiceRequest if logs else ExportTraceServiceRequest
    )
    mapped, origin, rejects = [], [], []
    ignored = index = 0
    to_record = _log_record if logs else _record
    for item in _items(request, logs):
        rec, field, message = to_record(item)
        if rec is not None:
            mapped.append(rec)
            origin.append(index)
        elif field is not None:
            rejects.append(Reject(index, field, message, json_format.MessageToJson(item)[:4096]))  # type: ignore[arg-type]  # a field comes with its message
        else:
            ignored += 1
        index += 1
    parsed = check(
        mapped,
        origin,
        rejects,
        source_field=SOURCE_FIELD,
        prefix="otlp",
        items=index,
        gateway=gateway,
        received_at=received_at,
        max_items=max_items,
    )
    return parsed, ignored


def response(rejected: int, message: str, json_body: bool, logs: bool = False) -> tuple[bytes, str]:
    """Export…ServiceResponse with partial_success, in the request's encoding."""
    out = ExportLogsServiceResponse() if logs else ExportTraceServiceResponse()
    if rejected or message:
        if logs:
            out.partial_success.rejected_log_records = rejected
        else:
            out.partial_success.rejected_spans = rejected
        out.partial_success.error_message = message
    if json_body:
        return json_format.MessageToJson(out).encode(), "application/json"
    return out.SerializeToString(), "application/x-protobuf"
