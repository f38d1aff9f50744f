"""Every OTLP span and log record maps to a record or to a reject naming its attribute, whatever
its attributes hold: never an exception, never a boolean read as a number or an empty string as
zero; and one item that does not decode never loses the batch."""

from __future__ import annotations

import gzip
import json
import math
from datetime import UTC, datetime

import pytest
from google.protobuf import json_format
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue, KeyValueList
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from ingest.formats import otlp
from ingest.formats.native import EnvelopeError
from tests.support.corpus import T0, _kv, logs, traces, traces_json

NOW = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
KW = {"gateway": "g", "received_at": NOW, "max_items": 1000}
INT64 = 2**63
# The attributes the mappers read: anything may arrive in any of them.
READ = [
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.completion_tokens",
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.time_to_first_chunk",
    "gen_ai.client.operation.duration",
    "gen_ai.provider.name",
    "gen_ai.system",
    "server.address",
    "error.type",
    "sampling.probability",
    "SampleRate",
    "sample_rate",
]
DOUBLES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([1e300, -1e300, 1e308, -1e308, 0.0, -0.0, 1e-320, 0.5, 1.0, 2.0**56]),
)
INTS = st.one_of(
    st.integers(-INT64, INT64 - 1), st.sampled_from([-INT64, INT64 - 1, 0, 1, 10_000_001])
)
SCALARS = st.one_of(
    st.builds(lambda s: AnyValue(string_value=s), st.text(max_size=20)),
    st.builds(lambda s: AnyValue(string_value=s), st.sampled_from(["", "0", "1e300", "nan"])),
    st.builds(lambda b: AnyValue(bool_value=b), st.booleans()),
    st.builds(lambda i: AnyValue(int_value=i), INTS),
    st.builds(lambda d: AnyValue(double_value=d), DOUBLES),
    st.builds(lambda b: AnyValue(bytes_value=b), st.binary(max_size=8)),
    st.just(AnyValue()),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.builds(
            lambda vs: AnyValue(array_value=ArrayValue(values=vs)), st.lists(inner, max_size=3)
        ),
        st.builds(
            lambda vs: AnyValue(
                kvlist_value=KeyValueList(
                    values=[KeyValue(key=f"k{i}", value=v) for i, v in enumerate(vs)]
                )
            ),
            st.lists(inner, max_size=3),
        ),
    ),
    max_leaves=5,
)
ATTRIBUTES = st.lists(st.tuples(st.sampled_from(READ), VALUES), max_size=8)
NANOS = st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 1, T0, 2**64 - 1, 2**63]))
TRACESTATES = st.sampled_from(["", "ot=th:8", "ot=th:", "ot=th:ffffffffffffffff", "ot=th:0;rv:x"])


def _span(attributes, start: int, end: int, tracestate: str = "", status: int = 0) -> Span:
    span = Span(
        span_id=b"\x01" * 8,
        start_time_unix_nano=start,
        end_time_unix_nano=end,
        trace_state=tracestate,
    )
    span.status.code = status  # type: ignore[assignment]  # an enum is an int
    span.attributes.extend(KeyValue(key=k, value=v) for k, v in attributes)
    span.attributes.append(_kv("gen_ai.operation.name", string_value="chat"))
    return span


def _log(attributes, time: int, observed: int) -> LogRecord:
    log = LogRecord(time_unix_nano=time, observed_time_unix_nano=observed, span_id=b"\x02" * 8)
    log.attributes.extend(KeyValue(key=k, value=v) for k, v in attributes)
    log.attributes.append(_kv("gen_ai.operation.name", string_value="chat"))
    return log


def _total(out) -> None:
    """A record of plain JSON values, or a (field, message) error, or not GenAI."""
    rec, field, message = out
    if rec is not None:
        assert field is None and message is None
        assert set(rec) <= set(otlp.SOURCE_FIELD) | {"status", "error_type"}
        for value in rec.values():
            assert type(value) in (str, int, float), rec
            assert not (isinstance(value, float) and not math.isfinite(value)), rec
        json.dumps(rec, allow_nan=False)
    else:
        assert message is None or (isinstance(message, str) and message.startswith("otlp: "))
        if message is not None:
            assert len(message) < 600


@settings(max_examples=200, deadline=None)
@given(ATTRIBUTES, NANOS, NANOS, TRACESTATES, st.sampled_from([0, 1, 2]))
def test_any_span_maps_to_a_record_or_a_named_error(attributes, start, end, tracestate, status):
    _total(otlp._record(_span(attributes, start, end, tracestate, status)))


@settings(max_examples=200, deadline=None)
@given(ATTRIBUTES, NANOS, NANOS)
def test_any_log_record_maps_to_a_record_or_a_named_error(attributes, time, observed):
    _total(otlp._log_record(_log(attributes, time, observed)))


def _export(bad, logs_: bool):
    """An export holding one good item and `bad`."""
    request = logs(1) if logs_ else traces(1)
    scope = (
        request.resource_logs[0].scope_logs[0]
        if logs_
        else request.resource_spans[0].scope_spans[0]
    )
    (scope.log_records if logs_ else scope.spans).append(bad)
    return request


@settings(max_examples=200, deadline=None)
@given(ATTRIBUTES, NANOS, NANOS, st.booleans(), st.booleans())
def test_one_bad_item_never_loses_the_batch_protobuf_or_json(attributes, start, end, logs_, js):
    bad = _log(attributes, start, end) if logs_ else _span(attributes, start, end)
    request = _export(bad, logs_)
    body = json_format.MessageToJson(request).encode() if js else request.SerializeToString()
    parsed, ignored = otlp.parse(body, json_body=js, logs=logs_, **KW)
    assert parsed.items == 2 and ignored == 0
    assert parsed.rows.num_rows + len(parsed.rejects) == 2
    assert parsed.rows.column("request_id")[0].as_py() == "resp-0"  # the good one is kept
    for reject in parsed.rejects:
        assert reject.index == 1 and reject.reason.startswith("otlp: ")


JSON_VALUES = st.one_of(
    st.fixed_dictionaries(
        {
            "intValue": st.one_of(
                st.integers(-(2**70), 2**70), st.integers().map(str), st.text(max_size=5)
            )
        }
    ),
    st.fixed_dictionaries(
        {
            "doubleValue": st.one_of(
                st.floats(), st.sampled_from(["NaN", "Infinity", "-Infinity", "1e400", "x"])
            )
        }
    ),
    st.fixed_dictionaries({"boolValue": st.one_of(st.booleans(), st.just("true"))}),
    st.fixed_dictionaries({"stringValue": st.one_of(st.text(max_size=5), st.integers())}),
    st.fixed_dictionaries({"bytesValue": st.one_of(st.just("AAE="), st.just("!!"))}),
    st.fixed_dictionaries(
        {"arrayValue": st.one_of(st.just({"values": [{"intValue": "1"}]}), st.just(5))}
    ),
    st.just({}),
    st.just(None),
    st.just([1, 2]),
)
JSON_TIMES = st.one_of(
    st.integers(-5, 2**65).map(str), st.integers(-5, 2**65), st.just("soon"), st.just(None)
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(READ), JSON_VALUES), max_size=6), JSON_TIMES, JSON_TIMES)
def test_any_json_span_is_a_record_or_a_reject_beside_a_good_one(attributes, start, end):
    body = traces_json(1)
    bad = {
        "spanId": "0102030405060708",
        "startTimeUnixNano": start,
        "endTimeUnixNano": end,
        "attributes": [{"key": k, "value": v} for k, v in attributes]
        + [{"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}}],
    }
    body["resourceSpans"][0]["scopeSpans"][0]["spans"].append(bad)
    parsed, _ = otlp.parse(json.dumps(body).encode(), json_body=True, **KW)
    assert parsed.items == 2
    assert parsed.rows.num_rows + len(parsed.rejects) == 2
    assert parsed.rows.num_rows >= 1 and all(r.index == 1 for r in parsed.rejects)


def _log_with(name: str, **value) -> LogRecord:
    log = LogRecord(time_unix_nano=T0)
    log.attributes.extend(
        [
            _kv("gen_ai.request.model", string_value="m"),
            _kv("gen_ai.usage.input_tokens", int_value=5),
            _kv("gen_ai.usage.output_tokens", int_value=6),
            _kv(name, **value),
        ]
    )
    return log


@pytest.mark.parametrize("seconds", [1e300, -1e300, 1e308, math.inf, math.nan, -1.0])
def test_an_absurd_log_duration_is_a_reject_naming_it(seconds):
    rec, field, message = otlp._log_record(_log_with(otlp.DURATION, double_value=seconds))
    assert rec is None and field == otlp.DURATION and otlp.DURATION in message


def test_an_absurd_duration_in_a_protobuf_export_keeps_the_valid_logs():
    request = logs(3)
    request.resource_logs[0].scope_logs[0].log_records[1].attributes.append(
        _kv(otlp.DURATION, double_value=1e300)
    )
    parsed, _ = otlp.parse(request.SerializeToString(), json_body=False, logs=True, **KW)
    assert parsed.rows.num_rows == 2
    ((reject,),) = [parsed.rejects]
    assert (reject.index, reject.field) == (1, otlp.DURATION)


@pytest.mark.parametrize(
    ("name", "value", "word"),
    [
        (otlp.TTFT, {"bool_value": True}, "boolean true"),
        (otlp.TTFT, {"string_value": ""}, "empty string"),
        (otlp.TTFT, {"string_value": "0.2"}, "string"),
        (otlp.TTFT, {"double_value": 1e308}, "seconds from 0"),
        (otlp.TTFT, {"array_value": ArrayValue()}, "array"),
        (otlp.DURATION, {"bool_value": False}, "boolean false"),
        ("gen_ai.usage.input_tokens", {"bool_value": False}, "boolean false"),
        ("gen_ai.usage.input_tokens", {"string_value": ""}, "empty string"),
        ("gen_ai.usage.input_tokens", {"string_value": "12"}, "string"),
        ("gen_ai.usage.output_tokens", {"double_value": 1.5}, "whole number"),
        ("gen_ai.usage.output_tokens", {"double_value": 1e300}, "whole number"),
        ("gen_ai.usage.output_tokens", {"kvlist_value": KeyValueList()}, "key-value list"),
        ("gen_ai.request.model", {"int_value": 3}, "string"),
        ("server.address", {"bytes_value": b"x"}, "bytes"),
        ("sampling.probability", {"bool_value": True}, "boolean true"),
        ("sampling.probability", {"string_value": "0.5"}, "string"),
        ("sampling.probability", {"double_value": math.nan}, "nan"),
        ("SampleRate", {"bool_value": True}, "boolean true"),
        ("SampleRate", {"double_value": 1e300}, "sample rate"),
    ],
)
def test_no_boolean_string_or_empty_value_is_read_as_a_number(name, value, word):
    rec, field, message = otlp._log_record(_log_with(name, **value))
    assert rec is None and field == name, (rec, field, message)
    assert word in message.lower() and name in message


def test_a_whole_double_token_count_is_a_count():
    rec, _, _ = otlp._log_record(_log_with("gen_ai.usage.input_tokens", double_value=120.0))
    assert rec is not None and rec["isl"] == 120 and type(rec["isl"]) is int


def test_a_huge_value_is_shown_short_in_the_message():
    rec, field, message = otlp._log_record(_log_with(otlp.TTFT, string_value="x" * 100_000))
    assert rec is None and field == otlp.TTFT and len(message) < 200


def test_json_int_value_beyond_int64_rejects_its_span_naming_the_attribute():
    body = traces_json(2)
    attrs = body["resourceSpans"][0]["scopeSpans"][0]["spans"][1]["attributes"]
    attrs[1]["value"] = {"intValue": str(2**64)}
    parsed, _ = otlp.parse(json.dumps(body).encode(), json_body=True, **KW)
    assert parsed.rows.num_rows == 1
    ((reject,),) = [parsed.rejects]
    assert (reject.index, reject.field) == (1, "gen_ai.usage.input_tokens")
    assert "out of range" in reject.reason


def test_a_protobuf_span_that_does_not_decode_is_rejected_alone():
    request = traces(2)
    request.resource_spans[0].scope_spans[0].spans[1].name = "é"
    body = request.SerializeToString().replace("é".encode(), b"\xff\xfe")  # invalid UTF-8
    parsed, _ = otlp.parse(body, json_body=False, **KW)
    assert parsed.rows.num_rows == 1
    ((reject,),) = [parsed.rejects]
    assert reject.index == 1 and "not valid protobuf" in reject.reason
    only_bad = traces(1)
    only_bad.resource_spans[0].scope_spans[0].spans[0].name = "é"
    with pytest.raises(EnvelopeError, match="protobuf"):  # nothing decodes: refused whole
        otlp.parse(
            only_bad.SerializeToString().replace("é".encode(), b"\xff\xfe"), json_body=False, **KW
        )


def test_a_rejected_span_with_many_attributes_keeps_a_short_raw():
    request = traces(1)
    span = request.resource_spans[0].scope_spans[0].spans[0]
    del span.attributes[2:]  # no token counts: rejected
    huge = KeyValueList(values=[KeyValue(key="v") for _ in range(20_000)])
    span.attributes.append(KeyValue(key="nested", value=AnyValue(kvlist_value=huge)))
    span.attributes.extend(KeyValue(key="k") for _ in range(50_000))
    parsed, _ = otlp.parse(request.SerializeToString(), json_body=False, **KW)
    ((reject,),) = [parsed.rejects]
    assert reject.raw is not None and len(reject.raw) <= otlp.RAW_CHARS
    assert "bytes, not shown" in reject.raw
    assert reject.field == "gen_ai.usage.input_tokens"


@pytest.mark.parametrize("js", [False, True])
def test_a_gzip_body_without_content_encoding_says_so(js):
    plain = json.dumps(traces_json(1)).encode() if js else traces(1).SerializeToString()
    with pytest.raises(EnvelopeError, match="looks like gzip.*set Content-Encoding: gzip"):
        otlp.parse(gzip.compress(plain), json_body=js, **KW)


@pytest.mark.parametrize("js", [False, True])
def test_every_item_counts_against_the_limit_genai_or_not(js):
    request = ExportTraceServiceRequest()
    request.resource_spans.add().scope_spans.add().spans.extend(Span() for _ in range(11))
    body = json_format.MessageToJson(request).encode() if js else request.SerializeToString()
    if js:  # MessageToJson leaves empty spans out entirely: write them as {} by hand
        body = json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{}] * 11}]}]}).encode()
    with pytest.raises(EnvelopeError, match="limit of 10"):
        otlp.parse(body, json_body=js, gateway="g", received_at=NOW, max_items=10)
    parsed, ignored = otlp.parse(body, json_body=js, gateway="g", received_at=NOW, max_items=11)
    assert ignored == 11 and parsed.items == 11


def test_the_json_limit_names_the_count_and_the_limit():
    body = json.dumps(traces_json(12)).encode()
    with pytest.raises(
        EnvelopeError, match=r"12 spans in one request is more than the limit of 10"
    ):
        otlp.parse(body, json_body=True, gateway="g", received_at=NOW, max_items=10)


def test_log_exports_count_their_records_too():
    request = ExportLogsServiceRequest()
    request.resource_logs.add().scope_logs.add().log_records.extend(LogRecord() for _ in range(3))
    with pytest.raises(EnvelopeError, match="log records in one request"):
        otlp.parse(
            request.SerializeToString(),
            json_body=False,
            logs=True,
            gateway="g",
            received_at=NOW,
            max_items=2,
        )
