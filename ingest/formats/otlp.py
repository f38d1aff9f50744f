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

Every span and log record sent counts against TOKENSHAPE_MAX_ITEMS_PER_REQUEST, GenAI or not,
and is counted before the body is parsed: protobuf from its wire format (ingest/formats/
protowire.py), JSON from its shape (ingest/jsonscan.py), so a body of millions of empty items
is refused for the price of counting to the limit; nested messages are bounded too
(MAX_MESSAGES, every field the wire walk visits; MAX_JSON_CONTAINERS and MAX_JSON_VALUES before
json.loads), each per 16 MiB of body so a raised body limit raises them. Each item maps on its
own: one that cannot be decoded or mapped is a reject naming its attribute, never the loss of
the batch (a body in which no item decodes is refused whole). Token counts are integers (a
whole double is taken: JavaScript SDKs send doubles); TTFT and duration are seconds from 0 to
MAX_SECONDS; a boolean, a string, an empty value or an array where a number belongs is a
reject, never read as 1 or 0.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ScopeLogs
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans, Span

from app.storage.batches import Reject
from app.storage.schema import MAX_TOKENS
from ingest.body import GZIP_HINT, looks_like_gzip
from ingest.formats import protowire
from ingest.formats.mapped import check
from ingest.formats.native import (
    INT_DIGITS,
    EnvelopeError,
    HugeInt,
    Parsed,
    loads,
    too_many_values,
)
from ingest.jsonscan import MAX_JSON_VALUES, deep_regions, json_shape, scaled, values_bound
from ingest.sampling import PROBABILITY_ATTRIBUTE, from_attributes, shown, threshold_probability

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
# A log record's time is its own, its total time the duration attribute.
SOURCE_FIELD_LOGS = {
    **SOURCE_FIELD,
    "started_at": "time_unix_nano",
    "e2e_ms": "gen_ai.client.operation.duration",
}
STATUS_ERROR = 2  # Status.STATUS_CODE_ERROR
DURATION = "gen_ai.client.operation.duration"
TTFT = "gen_ai.response.time_to_first_chunk"
# Nested messages (items, attributes, their values) one request may hold. Parsed, each costs
# ~100 bytes whatever its size on the wire (2 bytes when empty): this keeps four concurrent
# worst-case bodies well under a GiB, and is twice what a body-limit batch of real spans holds.
# The wire walk counts every field it visits against it (stepping over 8 million unknown
# fields costs as much as counting 8 million messages). Per 16 MiB of body: a body limit
# raised past 16 MiB raises it in proportion (jsonscan.scaled), like the JSON bounds below.
MAX_MESSAGES = 2_000_000
# JSON objects and arrays one OTLP/JSON request may hold; a Python dict costs more than a
# parsed protobuf message, hence fewer. A real span is ~25 of them in ~1 KB. Per 16 MiB.
MAX_JSON_CONTAINERS = 1_000_000
# A container this deep in OTLP/JSON is cut out before json.loads (which gives up near a
# thousand levels, for the whole body): the span holding it is then a reject on its own.
JSON_CUT_DEPTH = 400
_DEEP = "\u0000tokenshape: nests too deep\u0000"  # what a cut container is replaced by
# The longest time in seconds a request's TTFT or duration may say: beyond it (1e300 s, say)
# the number is garbage, however finite.
MAX_SECONDS = 7 * 24 * 3600
# A protobuf item longer than this has its messages counted on the wire before it is parsed;
# a shorter one holds at most half as many, counted once parsed.
ITEM_WALK_BYTES = 64 * 1024
RUN_BYTES = 256 * 1024  # adjacent items parsed together, for speed (one parse, not one each)
RAW_CHARS = 4096
RAW_ATTRIBUTES, RAW_VALUE_BYTES = 16, 512  # what a big rejected item's raw keeps
MESSAGE_CHARS = 300
_TRACES = protowire.tables(
    ExportTraceServiceRequest.DESCRIPTOR, ScopeSpans.DESCRIPTOR.fields_by_name["spans"]
)
_LOGS = protowire.tables(
    ExportLogsServiceRequest.DESCRIPTOR, ScopeLogs.DESCRIPTOR.fields_by_name["log_records"]
)
# The JSON path to the items (lowerCamelCase as OTLP/JSON writes it, or the proto names).
_JSON_PATH = {
    False: (("resourceSpans", "resource_spans"), ("scopeSpans", "scope_spans"), ("spans",)),
    True: (
        ("resourceLogs", "resource_logs"),
        ("scopeLogs", "scope_logs"),
        ("logRecords", "log_records"),
    ),
}
_FAILED_FIELD = re.compile(r"Failed to parse (\w+) field")


class Opaque:
    """An attribute value that is no scalar (bytes, an array, a key-value list)."""

    def __init__(self, kind: str):
        self.kind = kind

    def __repr__(self) -> str:
        words = {"bytes_value": "a bytes value", "array_value": "an array"}
        return words.get(
            self.kind, "a key-value list" if self.kind == "kvlist_value" else self.kind
        )

    __str__ = __repr__


def _value(v) -> object:
    kind = v.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(v, kind)
    return None if kind is None else Opaque(kind)


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


def _what(logs: bool) -> str:
    return "log record" if logs else "span"


def _too_many(count: str, limit: int, logs: bool) -> EnvelopeError:
    return EnvelopeError(
        f"otlp: {count} {_what(logs)}s in one request is more than the limit of {limit}; "
        "split the batch (the limit is TOKENSHAPE_MAX_ITEMS_PER_REQUEST)"
    )


# An item: (its message, None), or (None, (field or None, why, raw)) when it does not decode.
Item = tuple[Message | None, tuple[str | None, str, str] | None]


def _protobuf_items(body: bytes, logs: bool, max_items: int) -> Iterator[Item]:
    """The items of a protobuf export, in order: counted on the wire before any is parsed,
    then parsed a run of adjacent items at a time (a few hundred KB: only their messages exist
    at once), their nested messages counted against MAX_MESSAGES; an item that does not decode
    is one reject."""
    kind = ExportLogsServiceRequest if logs else ExportTraceServiceRequest
    walk = _LOGS if logs else _TRACES
    tally = protowire.Tally(max_items, scaled(MAX_MESSAGES, len(body)), ranges=[])
    with _refusals(kind.DESCRIPTOR.name, logs, max_items):
        protowire.count(body, walk.envelope, tally)
    ranges = tally.ranges or []
    i = 0
    while i < len(ranges):
        begin, start, stop = ranges[i]
        if stop - start > ITEM_WALK_BYTES:  # big enough to hold many messages: count them first
            with _refusals(kind.DESCRIPTOR.name, logs, max_items):
                broken = _walk_item(body, start, stop, walk.item, tally, logs)
            yield broken or _one(body[start:stop], logs, walk.item)
            i += 1
            continue
        j = i + 1  # the run: items that follow each other with nothing between them
        while (
            j < len(ranges)
            and ranges[j][0] == ranges[j - 1][2]
            and ranges[j][2] - ranges[j][1] <= ITEM_WALK_BYTES
            and ranges[j][2] - begin <= RUN_BYTES
        ):
            j += 1
        try:
            # The run's bytes are the items' fields of their ScopeSpans (ScopeLogs) as sent.
            holder = (ScopeLogs if logs else ScopeSpans).FromString(body[begin : ranges[j - 1][2]])
        except DecodeError:  # one of them does not decode: each on its own
            run = [_one(body[start:stop], logs, walk.item) for _, start, stop in ranges[i:j]]
        else:
            items = holder.log_records if isinstance(holder, ScopeLogs) else holder.spans
            run = [(item, None) for item in items]
        for item, failure in run:
            if item is not None:
                # Its attributes, each with its value, and a span's events and links (a small
                # item holds few messages: no exact count needed).
                tally.messages += 1 + 2 * len(item.attributes)  # type: ignore[attr-defined]
                if isinstance(item, Span):
                    tally.messages += len(item.events) + len(item.links)
                if tally.messages > tally.max_messages:
                    raise _too_many_messages(logs, tally.max_messages)
            yield item, failure
        i = j


def _walk_item(
    body: bytes,
    start: int,
    stop: int,
    table: protowire.Table,
    tally: protowire.Tally,
    logs: bool,
    of: str = "the body",
) -> Item | None:
    """Count one item's fields on the wire; its reject when it nests too deep or its bytes
    are broken (that item alone: only TooMany refuses the body), else None."""
    try:
        protowire.count(body, table, tally, start, stop)
    except protowire.TooDeep:
        why = (
            f"otlp: the {_what(logs)} nests protobuf messages more than {protowire.MAX_DEPTH} deep"
        )
        return None, (None, why, body[start : start + 256].hex())
    except protowire.WireError as exc:  # its offsets are the body's
        why = f"otlp: the {_what(logs)} is not valid protobuf ({exc} of {of})"
        return None, (None, why, body[start : start + 256].hex())
    return None


def _one(data: bytes, logs: bool, table: protowire.Table) -> Item:
    """One item from its bytes, or why it does not decode."""
    try:
        return (LogRecord if logs else Span).FromString(data), None
    except DecodeError as exc:  # invalid UTF-8 in a string, nesting deeper than upb allows
        # upb says only "Error parsing message": the walk tells too deep or broken apart.
        probe = protowire.Tally(1, len(data) + 1)
        broken = _walk_item(data, 0, len(data), table, probe, logs, f"the {_what(logs)}")
        if broken is not None:
            return broken
        why = f"otlp: the {_what(logs)} is not valid protobuf ({exc})"
        return None, (None, why, data[:256].hex())


@contextmanager
def _refusals(name: str, logs: bool, max_items: int) -> Iterator[None]:
    """The wire walk's refusals as EnvelopeErrors naming what to do."""
    try:
        yield
    except protowire.TooMany as exc:
        if exc.what == "items":
            raise _too_many(f"more than {max_items}", max_items, logs) from None
        raise _too_many_messages(logs, exc.limit) from None
    except protowire.TooDeep:
        raise EnvelopeError(
            f"otlp: the body nests protobuf messages more than {protowire.MAX_DEPTH} deep: "
            f"it is not an OTLP {name}"
        ) from None
    except protowire.WireError as exc:
        raise EnvelopeError(f"otlp: the body is not an OTLP {name} in protobuf ({exc})") from None


def _too_many_messages(logs: bool, limit: int) -> EnvelopeError:
    return EnvelopeError(
        f"otlp: the request holds more than {limit} protobuf fields and messages "
        f"({_what(logs)}s, attributes and their values), the most one request may carry; "
        "split the batch"
    )


def _json_items(body: bytes, logs: bool, max_items: int) -> list[Item]:
    """The items of an OTLP/JSON export, its size counted before json.loads builds it."""
    name = (ExportLogsServiceRequest if logs else ExportTraceServiceRequest).DESCRIPTOR.name
    if not body.strip():
        raise EnvelopeError(f"otlp: the body is empty: send an OTLP {name} in JSON")
    containers = scaled(MAX_JSON_CONTAINERS, len(body))
    values = scaled(MAX_JSON_VALUES, len(body))
    # Counted before json.loads builds them: commas and brackets in C first, the exact scan
    # only when that is over (a body of 3 million one-character strings costs 20x its size).
    many = values_bound(body) > values
    shape = json_shape(body, max_containers=containers, max_values=values if many else None)
    if shape.containers > containers:
        raise EnvelopeError(
            f"otlp: the body holds more than {containers} JSON objects and arrays "
            f"({_what(logs)}s, attributes and their values), the most one request may carry; "
            "split the batch"
        )
    if shape.values > values:
        raise EnvelopeError(too_many_values(values, "otlp: "))
    try:
        obj, cut = _loads(body)
    except RecursionError:
        raise EnvelopeError(f"otlp: the body nests too deep to be an OTLP {name}") from None
    except ValueError as exc:
        raise EnvelopeError(f"otlp: the body is not an OTLP {name} in JSON ({exc})") from None
    too_deep = EnvelopeError(f"otlp: the body nests too deep to be an OTLP {name}")
    if cut and not isinstance(obj, dict):
        raise too_deep
    if not isinstance(obj, dict):
        raise EnvelopeError(
            f"otlp: the body must be a JSON object (an OTLP {name}), not {_type(obj)}"
        )
    raws = _json_path(obj, _JSON_PATH[logs], name)
    deep = [cut and isinstance(raw, dict) and _holds(raw, _DEEP) for raw in raws]
    if cut and not any(deep):  # what nests too deep is the envelope, not an item
        raise too_deep
    if len(raws) > max_items:
        raise _too_many(str(len(raws)), max_items, logs)
    item_type = LogRecord if logs else Span
    out: list[Item] = []
    for index, raw in enumerate(raws):
        if not isinstance(raw, dict):
            why = f"otlp: each {_what(logs)} must be a JSON object, not {_type(raw)}"
            out.append((None, (None, why, _dumps(raw))))
            continue
        message = item_type()
        try:
            if deep[index]:
                raise RecursionError
            json_format.ParseDict(_hex_ids(raw), message, ignore_unknown_fields=True)
        except RecursionError:
            why = f"otlp: the {_what(logs)} nests too deep"
            out.append((None, (None, why, _dumps(raw))))
        # The JSON mapping raises TypeError/AttributeError for values of the wrong JSON type.
        except (json_format.ParseError, ValueError, TypeError, AttributeError) as exc:
            field = _json_culprit(raw, str(exc))
            if "'HugeInt'" in str(exc):
                detail = f"a number has more than {INT_DIGITS:,} digits"
            else:
                detail = str(exc)[:MESSAGE_CHARS]
            why = f"otlp: {field or _what(logs)}: {detail}"
            out.append((None, (field, why, _dumps(raw))))
        else:
            out.append((message, None))
    return out


def _loads(body: bytes) -> tuple[object, bool]:
    """The body as JSON (a HugeInt for an integer too long to read), and whether containers
    nested deeper than JSON_CUT_DEPTH had to be cut out (each replaced by _DEEP) for it to
    load: json.loads refuses a whole body for one span nested too deep."""
    try:
        return loads(body), False
    except RecursionError:
        regions = deep_regions(body, JSON_CUT_DEPTH)
        if not regions:
            raise
    marker = json.dumps(_DEEP).encode()
    pieces: list[bytes] = []
    at = 0
    for start, end in regions:
        pieces += (body[at:start], marker)
        at = end
    pieces.append(body[at:])
    return loads(b"".join(pieces)), True


def _type(value: object) -> str:
    """A JSON value's type, as a refusal names it."""
    return str(value) if isinstance(value, HugeInt) else type(value).__name__


def _holds(obj: object, text: str) -> bool:
    """Whether a JSON value holds the string `text` anywhere (iteratively: it may nest)."""
    stack = [obj]
    while stack:
        value = stack.pop()
        if value == text:
            return True
        if isinstance(value, dict):
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return False


def _json_path(obj: dict, path: tuple[tuple[str, ...], ...], name: str) -> list:
    """The items at the end of `path`; EnvelopeError when a level is not an array of objects."""
    level: list = [obj]
    for depth, keys in enumerate(path):
        found: list = []
        for holder in level:
            key = next((k for k in keys if k in holder), keys[0])
            value = holder.get(key)
            if value is None:
                continue
            if not isinstance(value, list):
                raise EnvelopeError(
                    f"otlp: {key} must be a JSON array, not {_type(value)} (in an OTLP {name})"
                )
            if depth < len(path) - 1 and not all(isinstance(v, dict) for v in value):
                raise EnvelopeError(f"otlp: each of {key} must be a JSON object (an OTLP {name})")
            found.extend(value)
        level = found
    return level


def _json_culprit(raw: dict, error: str) -> str | None:
    """The attribute (else the field) of a JSON item that did not decode."""
    attributes = raw.get("attributes")
    if isinstance(attributes, list):
        for kv in attributes:
            try:
                json_format.ParseDict(kv, KeyValue(), ignore_unknown_fields=True)
            except Exception:  # any failure names it: this is only to say which one
                key = kv.get("key") if isinstance(kv, dict) else None
                return key if isinstance(key, str) and key else "attributes"
    match = _FAILED_FIELD.search(error)
    return match.group(1) if match else None


def _dumps(raw: object) -> str:
    try:
        return json.dumps(raw)[:RAW_CHARS]
    except (ValueError, TypeError, RecursionError):
        return repr(raw)[:RAW_CHARS]


def _raw(item: Message) -> str:
    """An item as JSON for `rejects`, bounded: an item with a million attributes is cut
    before it is written out, not after."""
    if item.ByteSize() > RAW_CHARS:
        small = type(item)()
        small.CopyFrom(item)
        for name in ("attributes", "events", "links"):
            if name in small.DESCRIPTOR.fields_by_name:
                del getattr(small, name)[RAW_ATTRIBUTES:]
        values = [a.value for a in small.attributes]
        if isinstance(small, LogRecord) and small.HasField("body"):
            values.append(small.body)
        for value in values:  # an array or kvlist of a million values: its size instead
            if value.ByteSize() > RAW_VALUE_BYTES:
                size = value.ByteSize()
                value.Clear()
                value.string_value = f"({size} bytes, not shown)"
        item = small
    return json_format.MessageToJson(item, indent=None)[:RAW_CHARS]


def _attributes(repeated) -> dict[str, object]:
    return {a.key: _value(a.value) for a in repeated}


def _record(span) -> tuple[dict | None, str | None, str | None]:
    """(native record, None, None) for a GenAI span; (None, field, message) when it cannot be
    one; (None, None, None) when the span is not a GenAI operation."""
    attrs = _attributes(span.attributes)
    start, end = span.start_time_unix_nano, span.end_time_unix_nano
    if start and end and end < start:
        if not _genai(attrs):
            return None, None, None
        return None, "end_time_unix_nano", "otlp: the span ends before it starts"
    e2e = (end - start) / 1e6 if start and end else None
    failed = span.status.code == STATUS_ERROR
    return _from(
        attrs, start, e2e, failed, span.span_id[:129].hex(), span.status.message, span.trace_state
    )


def _log_record(log) -> tuple[dict | None, str | None, str | None]:
    """The same for a log record (its time, and the duration attribute for the total time)."""
    attrs = _attributes(log.attributes)
    if not _genai(attrs):
        return None, None, None
    start = log.time_unix_nano or log.observed_time_unix_nano
    e2e = None
    if DURATION in attrs:
        seconds, error = _seconds(attrs[DURATION], DURATION)
        if error:
            return None, DURATION, error
        e2e = seconds * 1000 if start and seconds is not None else None
    return _from(attrs, start, e2e, False, log.span_id[:129].hex(), "")


def _genai(attrs: dict) -> bool:
    for key in attrs:
        if key.startswith("gen_ai."):
            return True
    return False


def _seconds(value: object, name: str) -> tuple[float | None, str | None]:
    """A time in seconds: a finite number >= 0 (an int or a double; never a boolean, a
    string or empty), at most MAX_SECONDS."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return (
            None,
            f"otlp: {name} must be a number of seconds (an int or a double), got {shown(value)}",
        )
    seconds = float(value)
    if not 0 <= seconds <= MAX_SECONDS:  # NaN fails too
        return None, (
            f"otlp: {name} must be a number of seconds from 0 to {MAX_SECONDS} (a week), "
            f"got {shown(value)}"
        )
    return seconds, None


_ISL = ("gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
_OSL = ("gen_ai.usage.output_tokens", "gen_ai.usage.completion_tokens")
_REQUEST_ID = ("gen_ai.response.id",)
_MODEL = ("gen_ai.request.model", "gen_ai.response.model")
# The deployment that served it: its address, else the provider (gen_ai.provider.name, or
# gen_ai.system before the conventions renamed it).
_ENGINE = ("server.address", "gen_ai.provider.name", "gen_ai.system")


def _tokens(attrs: dict, names: tuple[str, str]) -> tuple[int | None, str, str | None]:
    """(a token count, the attribute it came from, an error): an int, or a double that is a
    whole number (JavaScript SDKs send numbers as doubles); never a boolean or a string."""
    name = names[0] if names[0] in attrs else names[1]
    value = attrs.get(name)
    if value is None:
        return None, names[0], None
    if type(value) is int:
        return value, name, None
    if type(value) is float and math.isfinite(value) and value.is_integer():
        if abs(value) <= MAX_TOKENS + 1:  # beyond: no count, and int() of it would be huge
            return int(value), name, None
    return None, name, f"otlp: {name} must be a whole number of tokens (an int), got {shown(value)}"


def _text(attrs: dict, names: tuple[str, ...]) -> tuple[str | None, str, str | None]:
    """The first of `names` present and not empty, which must be a string."""
    for name in names:
        value = attrs.get(name)
        if type(value) is str and value:
            return value, name, None
        if value is None or value == "":
            continue
        return None, name, f"otlp: {name} must be a string, got {shown(value)}"
    return None, names[0], None


def _from(
    attrs: dict,
    start: int,
    e2e: float | None,
    failed: bool,
    fallback_id: str,
    status: str,
    tracestate: str = "",
):
    if not _genai(attrs):
        return None, None, None
    rate: object = threshold_probability(tracestate)
    if rate is None:
        rate, rate_field, rate_error = from_attributes(attrs)
        if rate_error is not None:
            return None, rate_field, rate_error
    failed = failed or attrs.get("error.type") is not None
    isl, name, error = _tokens(attrs, _ISL)
    if error:
        return None, name, error
    osl, name, error = _tokens(attrs, _OSL)
    if error:
        return None, name, error
    if isl is None and not failed:
        return None, SOURCE_FIELD["isl"], "otlp: gen_ai.usage.input_tokens is missing"
    if osl is None and not failed:
        return None, SOURCE_FIELD["osl"], "otlp: gen_ai.usage.output_tokens is missing"
    request_id, name, error = _text(attrs, _REQUEST_ID)
    if error:
        return None, name, error
    model, name, error = _text(attrs, _MODEL)
    if error:
        return None, name, error
    engine, name, error = _text(attrs, _ENGINE)
    if error:
        return None, name, error
    # In RecordIn's field order: msgspec decodes a struct fastest when keys come in order.
    rec: dict[str, Any] = {"model": model} if model is not None else {}
    rec["isl"] = isl if isl is not None else 0
    rec["osl"] = osl if osl is not None else 0
    if request_id := request_id or fallback_id:
        rec["request_id"] = request_id
    if start:
        rec["started_at"] = start / 1e9
    if engine is not None:
        rec["engine"] = engine
    if TTFT in attrs:
        first, error = _seconds(attrs[TTFT], TTFT)
        if error:
            return None, TTFT, error
        rec["ttft_ms"] = first * 1000  # type: ignore[operator]  # no error: a number
    if start and e2e is not None:
        rec["e2e_ms"] = e2e
    if failed:
        rec["status"] = "error"
        rec["error_type"] = str(attrs.get("error.type") or status or "error")[:256]
    if rate is not None:
        rec["sample_rate"] = rate
    return rec, None, None


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
    if looks_like_gzip(body):
        raise EnvelopeError(f"otlp: {GZIP_HINT}")
    decoded: Iterable[Item]
    if json_body:
        decoded = _json_items(body, logs, max_items)
    else:
        decoded = _protobuf_items(body, logs, max_items)
    mapped, origin, rejects = [], [], []
    ignored = items = undecoded = 0
    to_record = _log_record if logs else _record
    for index, (item, failure) in enumerate(decoded):
        items += 1
        if failure is not None:
            field, why, raw = failure
            rejects.append(Reject(index, field, why, raw))
            undecoded += 1
            continue
        rec, field, message = to_record(item)
        if rec is not None:
            mapped.append(rec)
            origin.append(index)
        elif message is not None:
            rejects.append(Reject(index, field, message, _raw(item)))  # type: ignore[arg-type]
        else:
            ignored += 1
    if items and undecoded == items:  # nothing in the body decodes: it is refused whole
        name = (ExportLogsServiceRequest if logs else ExportTraceServiceRequest).DESCRIPTOR.name
        raise EnvelopeError(
            f"otlp: the body is not an OTLP {name} in {'JSON' if json_body else 'protobuf'}: "
            f"no {_what(logs)} in it decodes ({rejects[0].reason.removeprefix('otlp: ')})"
        )
    parsed = check(
        mapped,
        origin,
        rejects,
        source_field=SOURCE_FIELD_LOGS if logs else SOURCE_FIELD,
        prefix="otlp",
        items=items,
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
