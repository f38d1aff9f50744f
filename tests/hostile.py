"""Hostile input as importable data: malformed payloads for every ingest route and format.

Each `Payload` is one request a broken or malicious gateway might send, with the status the
server must answer and a word its JSON `detail` must contain (so the message names the problem).
The corpus assumes a server started with `LIMITS` (small limits keep the over-limit bodies cheap).
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.fixtures import batch, ndjson, record

MAX_BODY_BYTES = 64 * 1024
MAX_ITEMS = 50
LIMITS = {"max_body_bytes": MAX_BODY_BYTES, "max_items_per_request": MAX_ITEMS}
T0 = 1_795_000_000_000_000_000  # ns, inside the accepted time range

JSON = {"Content-Type": "application/json"}
NDJSON = {"Content-Type": "application/x-ndjson"}
PROTO = {"Content-Type": "application/x-protobuf"}
GZ = {"Content-Encoding": "gzip"}


@dataclass(frozen=True)
class Payload:
    """One malformed request and the answer it must get."""

    name: str
    route: str
    headers: dict[str, str]
    body: bytes
    status: int
    word: str  # must appear in the answer's `detail` (case-insensitive)
    extra: dict = field(default_factory=dict)


# -- builders of valid bodies, which the corpus then breaks -------------------------------------


def litellm_item(i: int = 0) -> dict:
    """A minimal LiteLLM StandardLoggingPayload."""
    return {
        "id": f"chatcmpl-{i}",
        "model_group": "llama-3.1-8b",
        "prompt_tokens": 1200 + i,
        "completion_tokens": 100,
        "startTime": T0 / 1e9 + i,
        "endTime": T0 / 1e9 + i + 2.5,
        "status": "success",
    }


def _kv(key: str, **value) -> KeyValue:
    return KeyValue(key=key, value=AnyValue(**value))


def _genai_attributes(i: int, model: str) -> list[KeyValue]:
    return [
        _kv("gen_ai.request.model", string_value=model),
        _kv("gen_ai.response.id", string_value=f"resp-{i}"),
        _kv("gen_ai.usage.input_tokens", int_value=100 + i),
        _kv("gen_ai.usage.output_tokens", int_value=20),
    ]


def traces(n: int = 1, model: str = "m", pad: int = 0) -> ExportTraceServiceRequest:
    """An ExportTraceServiceRequest with n GenAI spans (each padded with `pad` bytes)."""
    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    for i in range(n):
        span = scope.spans.add(
            trace_id=bytes(16),
            span_id=i.to_bytes(8, "big"),
            name="chat",
            start_time_unix_nano=T0 + i,
            end_time_unix_nano=T0 + i + 10**9,
        )
        span.attributes.extend(_genai_attributes(i, model))
        if pad:
            span.attributes.append(_kv("padding", string_value="x" * pad))
    return request


def logs(n: int = 1, model: str = "m", pad: int = 0) -> ExportLogsServiceRequest:
    """An ExportLogsServiceRequest with n GenAI log records."""
    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    for i in range(n):
        rec = scope.log_records.add(time_unix_nano=T0 + i)
        rec.attributes.extend(_genai_attributes(i, model))
        if pad:
            rec.attributes.append(_kv("padding", string_value="x" * pad))
    return request


def traces_json(n: int = 1, model: str = "m") -> dict:
    """The same spans as OTLP/JSON (hex ids, string nanoseconds)."""
    spans = [
        {
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": f"{i:016x}",
            "name": "chat",
            "startTimeUnixNano": str(T0 + i),
            "endTimeUnixNano": str(T0 + i + 10**9),
            "attributes": [
                {"key": "gen_ai.request.model", "value": {"stringValue": model}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(100 + i)}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "20"}},
            ],
        }
        for i in range(n)
    ]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def logs_json(n: int = 1, model: str = "m") -> dict:
    """GenAI log records as OTLP/JSON."""
    records = [
        {
            "timeUnixNano": str(T0 + i),
            "attributes": [
                {"key": "gen_ai.request.model", "value": {"stringValue": model}},
                {"key": "gen_ai.usage.input_tokens", "value": {"intValue": str(100 + i)}},
                {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "20"}},
            ],
        }
        for i in range(n)
    ]
    return {"resourceLogs": [{"scopeLogs": [{"logRecords": records}]}]}


def dumps(obj) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(obj, separators=(",", ":")).encode()


def nested_protobuf(depth: int) -> bytes:
    """An ExportTraceServiceRequest whose span attribute nests kvlists `depth` levels deep.

    Built as raw wire bytes from the inside out: protobuf's own serializer would refuse."""

    def field(number: int, payload: bytes) -> bytes:  # a length-delimited field
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    value = field(1, b"leaf")  # AnyValue.string_value
    for _ in range(depth):
        kv = field(1, b"k") + field(2, value)  # KeyValue.key, KeyValue.value
        value = field(6, field(1, kv))  # AnyValue.kvlist_value → KeyValueList.values
    span = field(9, field(1, b"gen_ai.x") + field(2, value))  # Span.attributes
    return field(1, field(2, field(2, span)))  # resource_spans → scope_spans → spans


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


DEEP_ARRAY = b"[" * 20_000 + b"]" * 20_000
DEEP_OBJECT = b'{"a":' * 10_000 + b"1" + b"}" * 10_000
DEEP_RECORD = b'{"model":"m","isl":1,"osl":1,"x":' + b"[" * 3000 + b"]" * 3000 + b"}"
HUGE_INT = b"9" * 5000
BAD_UTF8 = b'{"model":"\xff\xfe\xfd","isl":1,"osl":1}'
GOOD_RECORD = dumps(record(0))
GOOD_ARRAY = dumps(batch(20))
OVER_LIMIT = dumps(batch(MAX_BODY_BYTES // 200 + 50, "big"))
COMPRESSIBLE = b" " * (4 * MAX_BODY_BYTES)
PB = traces(3).SerializeToString()
PB_LOGS = logs(3).SerializeToString()


def _gzip_broken(data: bytes) -> bytes:
    whole = gzip.compress(data)
    return whole[:10] + bytes(b ^ 0x5A for b in whole[10:40]) + whole[40:]


def _truncated_gzip(data: bytes) -> bytes:
    whole = gzip.compress(data)
    return whole[: len(whole) // 2]


def _corpus() -> list[Payload]:
    P = Payload
    req, lite, tr, lg = "/v1/requests", "/v1/litellm", "/v1/traces", "/v1/logs"
    gz_json = {**JSON, **GZ}
    gz_pb = {**PROTO, **GZ}
    out = [
        # /v1/requests, JSON: the document itself is broken
        P("req-truncated-array", req, JSON, GOOD_ARRAY[:-40], 400, "not valid JSON"),
        P("req-truncated-object", req, JSON, GOOD_RECORD[:-10], 400, "not valid JSON"),
        P("req-object-trailing-garbage", req, JSON, GOOD_RECORD + b" trailing", 400, "JSON"),
        P("req-not-json", req, JSON, b"hello there", 400, "not a JSON"),
        P("req-xml", req, JSON, b"<records><r model='m'/></records>", 400, "not a JSON"),
        P("req-top-level-number", req, JSON, b"42", 400, "JSON object"),
        P("req-top-level-string", req, JSON, b'"llama"', 400, "JSON object"),
        P("req-top-level-null", req, JSON, b"null", 400, "JSON object"),
        P("req-top-level-nan", req, JSON, b"NaN", 400, "JSON object"),
        P("req-empty", req, JSON, b"", 400, "empty"),
        P("req-whitespace", req, JSON, b" \r\n\t ", 400, "empty"),
        P("req-bom-only", req, JSON, b"\xef\xbb\xbf", 400, "empty"),
        P("req-empty-array", req, JSON, b"[]", 400, "no records"),
        P("req-invalid-utf8", req, JSON, BAD_UTF8, 400, "UTF-8"),
        P("req-utf16", req, JSON, json.dumps(record(0)).encode("utf-16"), 400, "UTF-8"),
        P("req-deep-array", req, JSON, DEEP_ARRAY, 400, "deep"),
        P("req-deep-object", req, JSON, DEEP_OBJECT, 400, "deep"),
        P("req-huge-integer-document", req, JSON, HUGE_INT, 400, "JSON object"),
        P("req-deep-inside-array", req, JSON, b"[" + DEEP_RECORD + b"]", 400, "deep"),
        P("req-too-many-items", req, JSON, dumps(batch(MAX_ITEMS + 1)), 400, "limit"),
        P("req-over-limit", req, JSON, OVER_LIMIT, 413, "TOKENSHAPE_MAX_BODY_BYTES"),
        # /v1/requests, NDJSON
        P("req-ndjson-empty", req, NDJSON, b"", 400, "empty"),
        P("req-ndjson-blank-lines", req, NDJSON, b"\n\n \n\r\n", 400, "empty"),
        P("req-ndjson-too-many", req, NDJSON, ndjson(batch(MAX_ITEMS + 1)), 400, "limit"),
        P("req-ndjson-over-limit", req, NDJSON, ndjson(batch(400, "nd")), 413, "larger than"),
        # /v1/requests: encodings and content types
        P("req-gzip-corrupt", req, gz_json, _gzip_broken(GOOD_ARRAY), 400, "gzip"),
        P("req-gzip-truncated", req, gz_json, _truncated_gzip(GOOD_ARRAY), 400, "truncated"),
        P("req-gzip-not-compressed", req, gz_json, GOOD_ARRAY, 400, "gzip"),
        P("req-deflate-as-gzip", req, gz_json, zlib.compress(GOOD_ARRAY), 400, "gzip"),
        P("req-gzip-over-limit", req, gz_json, gzip.compress(COMPRESSIBLE), 413, "larger than"),
        P("req-encoding-br", req, {**JSON, "Content-Encoding": "br"}, GOOD_ARRAY, 415, "br"),
        P(
            "req-encoding-stacked",
            req,
            {**JSON, "Content-Encoding": "gzip, gzip"},
            gzip.compress(gzip.compress(GOOD_ARRAY)),
            415,
            "Content-Encoding",
        ),
        P("req-text-plain", req, {"Content-Type": "text/plain"}, GOOD_ARRAY, 415, "text/plain"),
        P("req-no-content-type", req, {}, GOOD_ARRAY, 415, "application/json"),
        P(
            "req-form",
            req,
            {"Content-Type": "application/x-www-form-urlencoded"},
            b"model=m&isl=1&osl=1",
            415,
            "x-www-form-urlencoded",
        ),
        P("req-protobuf-type", req, PROTO, PB, 415, "x-protobuf"),
        # /v1/litellm
        P("litellm-truncated", lite, JSON, dumps([litellm_item(0)])[:-30], 400, "not JSON"),
        P("litellm-not-json", lite, JSON, b"hello there", 400, "not JSON"),
        P("litellm-empty", lite, JSON, b"", 400, "empty"),
        P("litellm-empty-array", lite, JSON, b"[]", 400, "no log entries"),
        P("litellm-deep", lite, JSON, DEEP_ARRAY, 400, "deep"),
        P("litellm-huge-integer", lite, JSON, b"[" + HUGE_INT + b"]", 400, "digits"),
        P("litellm-invalid-utf8", lite, JSON, BAD_UTF8, 400, "UTF-8"),
        P("litellm-ndjson-blank", lite, NDJSON, b"\n \n", 400, "empty"),
        P(
            "litellm-too-many",
            lite,
            JSON,
            dumps([litellm_item(i) for i in range(MAX_ITEMS + 1)]),
            400,
            "limit",
        ),
        P("litellm-over-limit", lite, JSON, b" " * (MAX_BODY_BYTES + 1), 413, "larger than"),
        P("litellm-text-plain", lite, {"Content-Type": "text/plain"}, b"[]", 415, "text/plain"),
        P("litellm-gzip-corrupt", lite, gz_json, _gzip_broken(GOOD_ARRAY), 400, "gzip"),
        P("litellm-encoding-zstd", lite, {**JSON, "Content-Encoding": "zstd"}, b"[]", 415, "zstd"),
        # /v1/traces, protobuf
        P("traces-pb-garbage", tr, PROTO, b"\x00\xff not protobuf at all", 400, "protobuf"),
        P("traces-pb-truncated", tr, PROTO, PB[: len(PB) // 2], 400, "protobuf"),
        P("traces-json-sent-as-pb", tr, PROTO, dumps(traces_json(2)), 400, "protobuf"),
        P("traces-pb-sent-as-json", tr, JSON, PB, 400, "JSON"),
        P("traces-pb-deep", tr, PROTO, nested_protobuf(200), 400, "protobuf"),
        P("traces-pb-gzip-corrupt", tr, gz_pb, _gzip_broken(PB), 400, "gzip"),
        P("traces-pb-gzip-truncated", tr, gz_pb, _truncated_gzip(PB), 400, "truncated"),
        P(
            "traces-pb-over-limit",
            tr,
            PROTO,
            traces(2, pad=MAX_BODY_BYTES).SerializeToString(),
            413,
            "TOKENSHAPE_MAX_BODY_BYTES",
        ),
        P(
            "traces-pb-too-many-spans",
            tr,
            PROTO,
            traces(MAX_ITEMS + 1).SerializeToString(),
            400,
            "limit",
        ),
        P("traces-no-content-type", tr, {}, PB, 415, "x-protobuf"),
        P("traces-text-plain", tr, {"Content-Type": "text/plain"}, PB, 415, "text/plain"),
        P("traces-encoding-br", tr, {**PROTO, "Content-Encoding": "br"}, PB, 415, "br"),
        # /v1/traces, JSON
        P("traces-json-truncated", tr, JSON, dumps(traces_json(2))[:-25], 400, "JSON"),
        P("traces-json-empty", tr, JSON, b"", 400, "empty"),
        P("traces-json-top-level-array", tr, JSON, b"[]", 400, "JSON object"),
        P("traces-json-top-level-number", tr, JSON, b"42", 400, "JSON object"),
        P("traces-json-null", tr, JSON, b"null", 400, "JSON object"),
        P(
            "traces-json-wrong-field-type",
            tr,
            JSON,
            b'{"resourceSpans": "x"}',
            400,
            "resourceSpans",
        ),
        P("traces-json-deep", tr, JSON, DEEP_OBJECT, 400, "deep"),
        P(
            "traces-json-huge-integer",
            tr,
            JSON,
            b'{"resourceSpans": ' + HUGE_INT + b"}",
            400,
            "digits",
        ),
        P(
            "traces-json-time-overflow",
            tr,
            JSON,
            dumps(traces_json(1)).replace(str(T0).encode(), b"1" + b"0" * 30, 1),
            400,
            "startTimeUnixNano",
        ),
        P("traces-json-nan", tr, JSON, b'{"resourceSpans": NaN}', 400, "resourceSpans"),
        P("traces-json-invalid-utf8", tr, JSON, b'{"x": "\xff\xfe"}', 400, "UTF-8"),
        # /v1/logs
        P(
            "logs-pb-garbage",
            lg,
            PROTO,
            b"\x0a\xff\xff\xff\xff\x0f",
            400,
            "ExportLogsServiceRequest",
        ),
        P("logs-pb-truncated", lg, PROTO, PB_LOGS[:-7], 400, "protobuf"),
        P("logs-json-sent-as-pb", lg, PROTO, dumps(logs_json(1)), 400, "protobuf"),
        P("logs-pb-sent-as-json", lg, JSON, PB_LOGS, 400, "JSON"),
        P("logs-json-truncated", lg, JSON, dumps(logs_json(2))[:-25], 400, "JSON"),
        P("logs-json-top-level-array", lg, JSON, b"[1, 2]", 400, "JSON object"),
        P("logs-json-deep", lg, JSON, DEEP_ARRAY, 400, "deep"),
        P(
            "logs-json-too-many",
            lg,
            JSON,
            dumps(logs_json(MAX_ITEMS + 1)),
            400,
            "limit",
        ),
        P(
            "logs-pb-over-limit",
            lg,
            gz_pb,
            gzip.compress(logs(2, pad=MAX_BODY_BYTES).SerializeToString()),
            413,
            "larger than",
        ),
        P("logs-form", lg, {"Content-Type": "multipart/form-data"}, PB_LOGS, 415, "multipart"),
    ]
    names = [p.name for p in out]
    assert len(names) == len(set(names)), "corpus names must be unique"
    return out


CORPUS: list[Payload] = _corpus()


@dataclass(frozen=True)
class Item:
    """A hostile item inside a body whose envelope parses: the batch is answered 200, the item
    is rejected with a message holding `word`, and the good records beside it are stored."""

    name: str
    route: str
    headers: dict[str, str]
    body: bytes
    good: int  # records in the body that must be stored
    word: str


def _nd(*lines: bytes) -> bytes:
    return b"\n".join(lines) + b"\n"


def _items() -> list[Item]:
    good = dumps(record(0, "item"))  # the same good record: later sends count as duplicates
    good_lite = dumps(litellm_item(0))
    far = {**litellm_item(1), "startTime": 1e300}
    del far["endTime"]
    bad_time = dumps(far)
    # Half a UTF-16 pair escaped alone: valid JSON, but not text that can be stored.
    lone = b'{"model":"x\\ud800","isl":1,"osl":1}'
    lone_lite = dumps(litellm_item(1)).replace(b'"llama-3.1-8b"', b'"x\\udc00"')
    return [
        Item("array-of-numbers", "/v1/requests", JSON, b"[" + good + b",1]", 1, "JSON object"),
        Item("array-nan-items", "/v1/requests", JSON, b"[" + good + b",NaN]", 1, "JSON object"),
        Item(
            "array-invalid-utf8",
            "/v1/requests",
            JSON,
            b"[" + good + b"," + BAD_UTF8 + b"]",
            1,
            "utf-8",
        ),
        Item(
            "array-huge-count",
            "/v1/requests",
            JSON,
            b"[" + good + b',{"model":"m","isl":' + HUGE_INT + b',"osl":1}]',
            1,
            "isl",
        ),
        Item(
            "array-huge-float",
            "/v1/requests",
            JSON,
            b"[" + good + b',{"model":"m","isl":1,"osl":1,"ttft_ms":1e400}]',
            1,
            "ttft_ms",
        ),
        Item(
            "array-huge-time",
            "/v1/requests",
            JSON,
            b"[" + good + b',{"model":"m","isl":1,"osl":1,"started_at":1e300}]',
            1,
            "started_at",
        ),
        Item(
            "array-lone-surrogate",
            "/v1/requests",
            JSON,
            b"[" + good + b"," + lone + b"]",
            1,
            "surrogate",
        ),
        Item("ndjson-lone-surrogate", "/v1/requests", NDJSON, _nd(good, lone), 1, "surrogate"),
        Item(
            "litellm-lone-surrogate",
            "/v1/litellm",
            JSON,
            b"[" + good_lite + b"," + lone_lite + b"]",
            1,
            "surrogate",
        ),
        Item("ndjson-garbage-line", "/v1/requests", NDJSON, _nd(good, b"not json"), 1, "JSON"),
        Item("ndjson-deep-line", "/v1/requests", NDJSON, _nd(good, DEEP_RECORD), 1, "deep"),
        Item("ndjson-scalar-line", "/v1/requests", NDJSON, _nd(good, b"42"), 1, "JSON object"),
        Item("litellm-scalar", "/v1/litellm", JSON, b"[" + good_lite + b",42]", 1, "JSON object"),
        Item(
            "litellm-huge-time",
            "/v1/litellm",
            JSON,
            b"[" + good_lite + b"," + bad_time + b"]",
            1,
            "startTime",
        ),
        Item("litellm-deep-line", "/v1/litellm", NDJSON, _nd(good_lite, DEEP_RECORD), 1, "deep"),
    ]


ITEMS: list[Item] = _items()


def gzip_bomb(inflated: int, block: int = 1 << 20) -> bytes:
    """A valid gzip stream of `inflated` zero bytes (a multiple of `block`), built without
    compressing them all: one fully flushed deflate segment of `block` zeros, repeated.

    Deflate cannot beat about 1:1032, so a 1 GB bomb is about 1 MB on the wire."""
    assert inflated % block == 0
    zeros = bytes(block)
    segment = zlib.compressobj(9, zlib.DEFLATED, -15)
    # A full flush ends on a byte boundary with no reference back: segments can be repeated.
    part = segment.compress(zeros) + segment.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(inflated // block):
        crc = zlib.crc32(zeros, crc)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # an empty final block
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    trailer = crc.to_bytes(4, "little") + (inflated % 2**32).to_bytes(4, "little")
    return header + part * (inflated // block) + end + trailer
