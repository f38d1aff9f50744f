"""OTLP bodies are counted before they are parsed: millions of empty spans, or a few spans with
millions of empty attributes, are refused in bounded memory, naming the count and the limit; the
wire walk that counts them agrees with protobuf on what a message is."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from datetime import UTC, datetime

import pytest
from google.protobuf.message import DecodeError
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1.trace_pb2 import ScopeSpans

from ingest.formats import otlp, protowire
from tests.support.corpus import _varint, nested_protobuf, traces
from tests.support.paths import ROOT

WALK = protowire.tables(
    ExportTraceServiceRequest.DESCRIPTOR, ScopeSpans.DESCRIPTOR.fields_by_name["spans"]
)
ENVELOPE, FULL = WALK.envelope, WALK.full
NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _tally(items: int = 10**9, messages: int = 10**9) -> protowire.Tally:
    return protowire.Tally(items, messages)


def test_the_walk_counts_what_protobuf_parses():
    request = traces(7, pad=3)
    request.resource_spans.add().scope_spans.add().spans.add()
    body = request.SerializeToString()
    assert protowire.count(body, ENVELOPE, _tally()).items == 8
    full = protowire.count(body, FULL, _tally())
    # Every field counts, a message or not (what protobuf would set, ListFields recursively).
    assert (full.items, full.messages) == (8, _fields(request))


def _fields(message) -> int:
    """The fields a message holds on the wire, its sub-messages' included."""
    total = 0
    for desc, value in message.ListFields():
        values = value if desc.is_repeated else [value]
        total += len(values)
        if desc.type == desc.TYPE_MESSAGE:
            total += sum(_fields(v) for v in values)
    return total


@pytest.mark.parametrize(
    "body",
    [
        b"\x08\x00" * 1001,  # unknown varints at the root
        b"\x0b\x0c" * 1001,  # empty groups at the root
        _field(1, _field(2, b"\x18\x00" * 1001)),  # unknown varints in ScopeSpans
    ],
    ids=["varints", "groups", "scope-varints"],
)
def test_every_field_stepped_over_counts_against_the_bound(body):
    """8 million of these stored nothing and cost seconds of CPU, counted nowhere."""
    with pytest.raises(protowire.TooMany) as exc:
        protowire.count(body, ENVELOPE, _tally(messages=1000))
    assert exc.value.what == "messages"


def test_the_walk_stops_at_the_limit_before_reading_further():
    spans = _field(2, b"") * 11
    body = _field(1, _field(2, spans + b"\xff\xff\xff"))  # garbage after the 11th span
    with pytest.raises(protowire.TooMany) as exc:
        protowire.count(body, ENVELOPE, _tally(items=10))
    assert exc.value.what == "items"
    with pytest.raises(protowire.WireError):  # with room for them, the garbage is found
        protowire.count(body, ENVELOPE, _tally())


@pytest.mark.parametrize(
    "body",
    [
        b"\x0a\x05\x00",  # a length past the end
        b"\x0a",  # a tag with nothing after it
        b"\x0f",  # wire type 7
        b"\x0c",  # an end of group never opened
        b"\x0b",  # a group never closed
        b"\x08" + b"\xff" * 11,  # a varint of 11 bytes
        b"\x02\x00",  # field number 0
    ],
)
def test_broken_wire_bytes_are_named(body):
    with pytest.raises(protowire.WireError):
        protowire.count(body, FULL, _tally())
    with pytest.raises(otlp.EnvelopeError, match="in protobuf"):
        otlp.parse(body, json_body=False, gateway="g", received_at=otlp.datetime.now(), max_items=9)


def _span(span_id: bytes, *extra: bytes) -> bytes:
    """A GenAI span's bytes (span id, times, model and token attributes), then `extra`."""
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    span = Span(span_id=span_id, start_time_unix_nano=T0, end_time_unix_nano=T0 + 10**9)
    for key, value in (("gen_ai.usage.input_tokens", 5), ("gen_ai.usage.output_tokens", 5)):
        attribute = span.attributes.add()
        attribute.key, attribute.value.int_value = key, value
    model = span.attributes.add()
    model.key, model.value.string_value = "gen_ai.request.model", "m"
    return span.SerializeToString() + b"".join(extra)


def _deep_attribute(levels: int) -> bytes:
    """Span.attributes holding a kvlist nested `levels` deep (3 messages a level)."""
    inner = _field(1, b"s")
    for _ in range(levels):
        inner = _field(6, _field(1, _field(1, b"k") + _field(2, inner)))
    return _field(9, _field(1, b"deep") + _field(2, inner))


T0 = 1_795_000_000_000_000_000
PAD = _field(9, _field(1, b"pad") + _field(2, _field(1, b"x" * 70_000)))  # past ITEM_WALK_BYTES
BROKEN = b"\x4a\x05\x0a\x09"  # an attribute of 5 bytes whose key claims 9


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ((PAD, _deep_attribute(60)), "the span nests protobuf messages more than 100 deep"),
        ((_deep_attribute(60),), "the span nests protobuf messages more than 100 deep"),
        ((PAD, BROKEN), "runs past the end of its message of the body"),
        ((BROKEN,), "runs past the end of its message of the span"),
    ],
    ids=["big-deep", "small-deep", "big-broken", "small-broken"],
)
def test_one_bad_protobuf_span_is_its_own_reject(extra, reason):
    """A big span's wire walk refused the whole batch; a small one got upb's bare words."""
    spans = _field(2, _span(b"\x01" * 8)) + _field(2, _span(b"\x02" * 8, *extra))
    body = _field(1, _field(2, spans))
    parsed, _ = otlp.parse(body, json_body=False, gateway="g", received_at=NOW, max_items=9)
    assert parsed.rows.num_rows == 1
    (reject,) = parsed.rejects
    assert reject.index == 1 and reason in reject.reason
    if "of the body" in reason:  # the offset is the body's: past the first span and the pad
        at = int(reject.reason.split("at byte ")[1].split()[0])
        assert at > 70_000


def _json_spans(*spans: str) -> bytes:
    return ('{"resourceSpans":[{"scopeSpans":[{"spans":[' + ",".join(spans) + "]}]}]}").encode()


GOOD_JSON = json.dumps(
    {
        "spanId": "01" * 8,
        "startTimeUnixNano": str(T0),
        "endTimeUnixNano": str(T0 + 10**9),
        "attributes": [
            {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": 5}},
            {"key": "gen_ai.usage.output_tokens", "value": {"intValue": 5}},
        ],
    }
)


@pytest.mark.parametrize(
    ("bad", "field", "reason"),
    [
        (
            '{"attributes":[{"key":"gen_ai.usage.input_tokens","value":{"intValue":'
            + "1" * 5000
            + "}}]}",
            "gen_ai.usage.input_tokens",
            "otlp: gen_ai.usage.input_tokens: a number has more than 4,300 digits",
        ),
        ('{"x":' + "[" * 2000 + "]" * 2000 + "}", None, "otlp: the span nests too deep"),
    ],
    ids=["5000-digits", "2000-deep"],
)
def test_one_bad_json_span_is_its_own_reject(bad, field, reason):
    """Both used to refuse the whole body (Python's digit limit, json.loads' recursion)."""
    body = _json_spans(GOOD_JSON, bad, GOOD_JSON)
    parsed, _ = otlp.parse(body, json_body=True, gateway="g", received_at=NOW, max_items=9)
    assert parsed.rows.num_rows == 2
    (reject,) = parsed.rejects
    assert (reject.index, reject.field, reject.reason) == (1, field, reason)


def test_groups_and_unknown_fields_are_stepped_over():
    span = _field(99, b"xyz") + b"\xa3\x06" + b"\x08\x01" + b"\xa4\x06"  # field 100 as a group
    body = _field(1, _field(2, _field(2, span)))
    ExportTraceServiceRequest.FromString(body)  # protobuf takes it too
    assert protowire.count(body, FULL, _tally()).items == 1


def test_nesting_deeper_than_protobuf_allows_is_refused():
    with pytest.raises(protowire.TooDeep):
        protowire.count(nested_protobuf(200), FULL, _tally())
    protowire.count(nested_protobuf(30), FULL, _tally())


# Each body is built in the child, which then resets its peak (clear_refs) and parses it.
BODIES = {
    "8M empty spans": "field(1, field(2, b'\\x12\\x00' * 8_000_000))",
    "99k spans x 80 empty attributes": "field(1, field(2, field(2, b'\\x4a\\x00' * 80) * 99_000))",
    "8M empty attributes in one span": "field(1, field(2, field(2, b'\\x4a\\x00' * 8_000_000)))",
    "5M empty spans in JSON": (
        "b'{\"resourceSpans\":[{\"scopeSpans\":[{\"spans\":[' + b','.join([b'{}'] * 5_000_000)"
        " + b']}]}]}'"
    ),
}
CHILD = textwrap.dedent(
    """
    import json, sys
    from datetime import UTC, datetime
    from ingest.formats import otlp
    from tests.support.corpus import _varint

    def field(number, payload):
        return _varint(number << 3 | 2) + _varint(len(payload)) + payload

    def status(name):
        with open("/proc/self/status") as fh:
            return next(int(l.split()[1]) for l in fh if l.startswith(name + ":"))

    out = {}
    for name, recipe in json.loads(sys.argv[1]).items():
        body = eval(recipe)
        with open("/proc/self/clear_refs", "w") as fh:
            fh.write("5")  # the peak is now the current size
        before = status("VmRSS")
        try:
            otlp.parse(body, json_body=body[:1] == b"{", gateway="g",
                       received_at=datetime.now(UTC), max_items=100_000)
            answer = "parsed"
        except otlp.EnvelopeError as exc:
            answer = str(exc)
        out[name] = {"growth_mib": (status("VmHWM") - before) / 1024, "answer": answer}
        del body
    print(json.dumps(out))
    """
)


def test_worst_bodies_are_refused_in_bounded_memory():
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(BODIES)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    results = json.loads(out.stdout)
    assert set(results) == set(BODIES)
    for name, result in results.items():
        # Before the count came first: 600 MiB to 1.6 GiB each (bench/RESULTS.md).
        assert result["growth_mib"] < 150, (name, result)
        assert "split the batch" in result["answer"], (name, result)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_whatever_protobuf_parses_the_walk_takes_and_counts_alike(data):
    body = bytearray(traces(3, pad=2).SerializeToString())
    for _ in range(data.draw(st.integers(1, 4))):  # flip, drop or insert a few bytes
        at = data.draw(st.integers(0, len(body) - 1))
        byte = data.draw(st.integers(0, 255))
        match data.draw(st.sampled_from(["flip", "drop", "insert"])):
            case "flip":
                body[at] = byte
            case "drop":
                del body[at]
            case "insert":
                body.insert(at, byte)
    try:
        request = ExportTraceServiceRequest.FromString(bytes(body))
    except DecodeError:
        return  # refused either way
    spans = sum(len(s.spans) for r in request.resource_spans for s in r.scope_spans)
    assert protowire.count(bytes(body), ENVELOPE, _tally()).items == spans
    assert protowire.count(bytes(body), FULL, _tally()).items == spans
