"""Hostile input corpora kept as data (tests/security/corpus/*.json), and the builders their
body recipes name: records, gzip, OTLP protobuf and JSON, nesting, slicing.

A body recipe is JSON: a string is its UTF-8 bytes; an object names one builder, e.g.
`{"gzip": {"records": 20}}` or `{"repeat": "[", "times": 20000}`; `{"ref": "NAME"}` is one of
the file's named `bodies`. `build()` turns a recipe into the bytes that are sent.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

from tests.support.paths import TESTS
from tests.support.records import batch, ndjson, record

CORPUS_DIR = TESTS / "security" / "corpus"
T0 = 1_795_000_000_000_000_000  # ns, inside the accepted time range


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


# -- valid bodies the recipes break ---------------------------------------------------------------


def dumps(obj) -> bytes:
    """Compact JSON bytes."""
    return json.dumps(obj, separators=(",", ":")).encode()


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


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


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


def gzip_corrupt(data: bytes) -> bytes:
    """A gzip stream with 30 bytes of its deflate data flipped."""
    whole = gzip.compress(data)
    return whole[:10] + bytes(b ^ 0x5A for b in whole[10:40]) + whole[40:]


def gzip_truncated(data: bytes) -> bytes:
    """The first half of a gzip stream."""
    whole = gzip.compress(data)
    return whole[: len(whole) // 2]


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


# -- recipes --------------------------------------------------------------------------------------


def _edited(obj: dict, spec: dict) -> dict:
    """`set` replaces or adds fields (in place, keeping their order); `drop` removes some."""
    obj = {**obj, **spec.get("set", {})}
    for key in spec.get("drop", []):
        del obj[key]
    return obj


def _json_bytes(obj: Any, spec: dict) -> bytes:
    return json.dumps(obj).encode() if spec.get("spaced") else dumps(obj)


def build(spec: Any, bodies: dict[str, Any] | None = None) -> bytes:
    """The bytes a body recipe describes (see the module docstring)."""
    bodies = bodies or {}

    def b(inner: Any) -> bytes:
        return build(inner, bodies)

    if isinstance(spec, str):
        return spec.encode()
    if isinstance(spec, list):
        raise TypeError(f"a body recipe is a string or an object, not a list: {spec!r}")
    (kind,) = (k for k in spec if k in _BUILDERS)
    return _BUILDERS[kind](spec, b, bodies)


_BUILDERS = {
    "ref": lambda s, b, bodies: b(bodies[s["ref"]]),
    "latin1": lambda s, b, _: s["latin1"].encode("latin-1"),
    "concat": lambda s, b, _: b"".join(b(part) for part in s["concat"]),
    "lines": lambda s, b, _: b"\n".join(b(line) for line in s["lines"]) + b"\n",
    "repeat": lambda s, b, _: b(s["repeat"]) * s["times"],
    "json": lambda s, b, _: _json_bytes(s["json"], s),
    "record": lambda s, b, _: _json_bytes(_edited(record(s["record"], s.get("prefix", "r")), s), s),
    "records": lambda s, b, _: dumps(batch(s["records"], s.get("prefix", "r"))),
    "ndjson_records": lambda s, b, _: ndjson(batch(s["ndjson_records"], s.get("prefix", "r"))),
    "litellm_item": lambda s, b, _: dumps(_edited(litellm_item(s["litellm_item"]), s)),
    "litellm_items": lambda s, b, _: dumps([litellm_item(i) for i in range(s["litellm_items"])]),
    "otlp_traces": lambda s, b, _: traces(
        s["otlp_traces"], pad=s.get("pad", 0)
    ).SerializeToString(),
    "otlp_logs": lambda s, b, _: logs(s["otlp_logs"], pad=s.get("pad", 0)).SerializeToString(),
    "otlp_traces_json": lambda s, b, _: dumps(traces_json(s["otlp_traces_json"])),
    "otlp_logs_json": lambda s, b, _: dumps(logs_json(s["otlp_logs_json"])),
    "nested_protobuf": lambda s, b, _: nested_protobuf(s["nested_protobuf"]),
    "gzip": lambda s, b, _: gzip.compress(b(s["gzip"])),
    "zlib": lambda s, b, _: zlib.compress(b(s["zlib"])),
    "gzip_corrupt": lambda s, b, _: gzip_corrupt(b(s["gzip_corrupt"])),
    "gzip_truncated": lambda s, b, _: gzip_truncated(b(s["gzip_truncated"])),
    "utf16": lambda s, b, _: b(s["utf16"]).decode().encode("utf-16"),
    "head": lambda s, b, _: b(s["head"])[: s["bytes"]],
    "half": lambda s, b, _: (lambda d: d[: len(d) // 2])(b(s["half"])),
    "replace": lambda s, b, _: b(s["replace"]).replace(
        b(s["old"]), b(s["new"]), s.get("count", -1)
    ),
}


def _load(name: str) -> dict:
    return json.loads((CORPUS_DIR / name).read_text())


def _unique(names: list[str]) -> None:
    assert len(names) == len(set(names)), "corpus names must be unique"


def payloads(name: str = "refused.json") -> tuple[dict, list[Payload]]:
    """The server limits a corpus assumes, and its payloads with their bodies built."""
    data = _load(name)
    bodies = data.get("bodies", {})
    out = [
        Payload(
            p["name"], p["route"], p["headers"], build(p["body"], bodies), p["status"], p["word"]
        )
        for p in data["payloads"]
    ]
    _unique([p.name for p in out])
    return data["limits"], out


def items(name: str = "items.json") -> list[Item]:
    """Hostile items inside good batches, with their bodies built."""
    data = _load(name)
    bodies = data.get("bodies", {})
    out = [
        Item(i["name"], i["route"], i["headers"], build(i["body"], bodies), i["good"], i["word"])
        for i in data["items"]
    ]
    _unique([i.name for i in out])
    return out


def corpus_files() -> list[Path]:
    """Every corpus file."""
    return sorted(CORPUS_DIR.glob("*.json"))
