"""OTLP/HTTP traces from the real OpenTelemetry SDK exporter (protobuf) and as JSON. One server
for the module: each test sends from a gateway of its own and reads only that gateway's rows."""

from __future__ import annotations

import copy
import gzip

import pytest
from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.trace import Status, StatusCode

from tests.support.server import LiveServer

T0 = 1_795_000_000_000_000_000  # ns


@pytest.fixture(scope="module")
def live(module_live: LiveServer) -> LiveServer:
    """One server for the module."""
    return module_live


def _tracer(live, token):
    exporter = OTLPSpanExporter(
        endpoint=live.url + "/v1/traces", headers={"Authorization": f"Bearer {token}"}
    )
    provider = TracerProvider(resource=Resource.create({"service.name": "gateway"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, provider.get_tracer("test")


def test_genai_spans_from_the_sdk_exporter_become_records(live):
    provider, tracer = _tracer(live, live.token("ingest", gateway="otel"))
    span = tracer.start_span(
        "chat llama-3.1-8b",
        start_time=T0,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "llama-3.1-8b-instruct",
            "gen_ai.response.id": "resp-1",
            "gen_ai.usage.input_tokens": 1300,
            "gen_ai.usage.output_tokens": 250,
            "gen_ai.response.time_to_first_chunk": 0.18,
            "server.address": "vllm-chat-8b",
        },
    )
    span.end(end_time=T0 + 4_200_000_000)
    old = tracer.start_span(
        "chat",
        start_time=T0 + 1,
        attributes={
            "gen_ai.usage.prompt_tokens": 10,
            "gen_ai.usage.completion_tokens": 5,
            "gen_ai.request.model": "m2",
        },
    )
    old.set_status(Status(StatusCode.ERROR, "boom"))
    old.end(end_time=T0 + 2)
    plain = tracer.start_span("GET /health", start_time=T0)  # not a GenAI operation
    plain.end(end_time=T0 + 1000)
    provider.force_flush()
    live.settle()
    rows = (
        live.db.cursor()
        .execute(
            "SELECT request_id, model, isl, osl, ttft_ms, e2e_ms, engine, status, gateway, "
            "epoch_ns(started_at) FROM requests WHERE gateway = 'otel' ORDER BY isl DESC"
        )
        .fetchall()
    )
    assert len(rows) == 2  # the health-check span is ignored, not stored, not rejected
    first, second = rows
    assert first[:4] == ("resp-1", "llama-3.1-8b-instruct", 1300, 250)
    assert first[4] == pytest.approx(180.0) and first[5] == pytest.approx(4200.0)
    assert first[6:9] == ("vllm-chat-8b", "ok", "otel") and first[9] == T0 // 1000 * 1000
    assert second[1:4] == ("m2", 10, 5) and second[7] == "error"  # the older attribute names
    assert live.scalar("SELECT count(*) FROM rejects WHERE gateway = 'otel'") == 0
    provider.shutdown()


def test_json_encoding_partial_success_and_bad_bodies(live):
    token = live.token("ingest", gateway="otel-json")
    good = {
        "resourceSpans": [
            {
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "name": "chat",
                                "startTimeUnixNano": str(T0),
                                "endTimeUnixNano": str(T0 + 10**9),
                                "attributes": [
                                    {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
                                    {
                                        "key": "gen_ai.usage.input_tokens",
                                        "value": {"intValue": "100"},
                                    },
                                    {
                                        "key": "gen_ai.usage.output_tokens",
                                        "value": {"intValue": "20"},
                                    },
                                ],
                            },
                            {
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b175",
                                "name": "chat",
                                "startTimeUnixNano": str(T0),
                                "endTimeUnixNano": str(T0 + 10**9),
                                "attributes": [
                                    {"key": "gen_ai.request.model", "value": {"stringValue": "m"}}
                                ],
                            },
                        ]
                    }
                ]
            }
        ]
    }
    with live.client(token) as c:
        r = c.post("/v1/traces", json=good)
        assert r.status_code == 200 and r.headers["content-type"].startswith("application/json")
        assert r.headers["x-tokenshape-ignored"] == "0"
        answer = json_format.Parse(r.text, ExportTraceServiceResponse())
        assert answer.partial_success.rejected_spans == 1
        assert "gen_ai.usage.input_tokens is missing" in answer.partial_success.error_message
        backwards = copy.deepcopy(good)
        span = backwards["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
        span["endTimeUnixNano"] = str(T0 - 10**9)  # a negative duration
        span["spanId"] = "eee19b7ec3c1b176"
        neg = json_format.Parse(
            c.post("/v1/traces", json=backwards).text, ExportTraceServiceResponse()
        )
        assert "the span ends before it starts" in neg.partial_success.error_message
        wrong_type = copy.deepcopy(good)
        wrong_type["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["startTimeUnixNano"] = "soon"
        typed = c.post("/v1/traces", json=wrong_type)
        # One span that does not decode is a reject naming its field; the batch goes on.
        assert typed.status_code == 200, typed.text
        typed_answer = json_format.Parse(typed.text, ExportTraceServiceResponse())
        assert typed_answer.partial_success.rejected_spans == 2
        assert "span 0: otlp: startTimeUnixNano" in typed_answer.partial_success.error_message
        alone = {
            "resourceSpans": [{"scopeSpans": [{"spans": [span | {"startTimeUnixNano": "x"}]}]}]
        }
        whole = c.post("/v1/traces", json=alone)  # nothing in it decodes: the body is refused
        assert whole.status_code == 400 and "ExportTraceServiceRequest in JSON" in whole.text
        bad = c.post(
            "/v1/traces",
            content=b"\x00\xff not protobuf",
            headers={"Content-Type": "application/x-protobuf"},
        )
        assert bad.status_code == 400 and "otlp" in bad.json()["detail"]
        wrong = c.post("/v1/traces", content=b"{}", headers={"Content-Type": "text/plain"})
        assert wrong.status_code == 415
    live.settle()
    assert live.scalar("SELECT count(*) FROM requests WHERE gateway = 'otel-json'") == 1
    # 5 spans + 3 refused bodies (nothing decodes, not protobuf, wrong Content-Type): all kept.
    assert (
        live.scalar("SELECT count(*) FROM rejects WHERE format = 'otlp' AND gateway = 'otel-json'")
        == 8
    )


def test_log_records_with_genai_attributes(live):
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
        ExportLogsServiceRequest,
        ExportLogsServiceResponse,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(key, **value):
        return KeyValue(key=key, value=AnyValue(**value))

    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    record = scope.log_records.add(time_unix_nano=T0)
    record.attributes.extend(
        [
            kv("gen_ai.request.model", string_value="m"),
            kv("gen_ai.response.id", string_value="log-1"),
            kv("gen_ai.usage.input_tokens", int_value=700),
            kv("gen_ai.usage.output_tokens", int_value=70),
            kv("gen_ai.client.operation.duration", double_value=1.5),
        ]
    )
    scope.log_records.add(time_unix_nano=T0).attributes.extend([kv("http.route", string_value="/")])
    with live.client(live.token(gateway="otel-logs")) as c:
        r = c.post(
            "/v1/logs",
            content=request.SerializeToString(),
            headers={"Content-Type": "application/x-protobuf"},
        )
    assert r.status_code == 200 and r.headers["content-type"] == "application/x-protobuf"
    answer = ExportLogsServiceResponse()
    answer.ParseFromString(r.content)
    assert answer.partial_success.rejected_log_records == 0
    live.settle()
    row = (
        live.db.cursor()
        .execute("SELECT request_id, isl, osl, e2e_ms FROM requests WHERE gateway = 'otel-logs'")
        .fetchall()
    )
    assert row == [("log-1", 700, 70, 1500.0)]  # the second record is not GenAI: ignored


def test_otlp_json_hex_ids_unknown_fields_and_a_nan_duration_named(live):
    body = {
        "resourceLogs": [
            {
                "scopeLogs": [
                    {
                        "logRecords": [
                            {
                                "timeUnixNano": str(T0),
                                "spanId": "5fb397be34d26b51",
                                "futureField": 1,
                                "attributes": [
                                    {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
                                    {
                                        "key": "gen_ai.usage.input_tokens",
                                        "value": {"intValue": "5"},
                                    },
                                    {
                                        "key": "gen_ai.usage.output_tokens",
                                        "value": {"intValue": "6"},
                                    },
                                    {
                                        "key": "gen_ai.client.operation.duration",
                                        "value": {"doubleValue": "NaN"},
                                    },
                                ],
                            }
                        ]
                    }
                ]
            }
        ]
    }
    records = body["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    records.append(copy.deepcopy(records[0]))
    records[1]["attributes"][3]["value"] = {"doubleValue": 2.5}
    with live.client(live.token(gateway="otel-hex")) as c:
        r = c.post("/v1/logs", json=body)
    assert r.status_code == 200, r.text
    answer = r.json()["partialSuccess"]
    # A NaN duration is no time: the record is rejected naming the attribute, never stored
    # without its time.
    assert answer["rejectedLogRecords"] == "1"
    assert "log record 0: otlp: gen_ai.client.operation.duration" in answer["errorMessage"]
    live.settle()
    rows = (
        live.db.cursor()
        .execute("SELECT request_id, e2e_ms FROM requests WHERE gateway = 'otel-hex'")
        .fetchall()
    )
    assert rows == [("5fb397be34d26b51", 2500.0)]  # the hex span id, as the sender wrote it


def _logs_with_one_absurd_duration(seconds: float):
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    request = ExportLogsServiceRequest()
    scope = request.resource_logs.add().scope_logs.add()
    for i in range(3):
        record = scope.log_records.add(time_unix_nano=T0 + i)
        duration = seconds if i == 1 else 0.5
        record.attributes.extend(
            KeyValue(key=k, value=AnyValue(**v))
            for k, v in (
                ("gen_ai.request.model", {"string_value": "m"}),
                ("gen_ai.response.id", {"string_value": f"absurd-{seconds:g}-{i}"}),
                ("gen_ai.usage.input_tokens", {"int_value": 10}),
                ("gen_ai.usage.output_tokens", {"int_value": 2}),
                ("gen_ai.client.operation.duration", {"double_value": duration}),
            )
        )
    return request


@pytest.mark.parametrize("seconds", [1e300, -1e300])
def test_one_absurd_log_duration_never_loses_the_batch(live, seconds):
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    gateway = f"otel-absurd-{seconds > 0}"
    body = _logs_with_one_absurd_duration(seconds).SerializeToString()
    with live.client(live.token(gateway=gateway)) as c:
        r = c.post("/v1/logs", content=body, headers={"Content-Type": "application/x-protobuf"})
    assert r.status_code == 200, r.text  # a 500 "nothing stored" before
    answer = ExportLogsServiceResponse.FromString(r.content)
    assert answer.partial_success.rejected_log_records == 1
    assert "log record 1: otlp: gen_ai.client.operation.duration" in (
        answer.partial_success.error_message
    )
    live.settle()
    stored = live.db.cursor().execute(
        "SELECT request_id, e2e_ms FROM requests WHERE gateway = ? ORDER BY request_id", [gateway]
    )
    assert [row[1] for row in stored.fetchall()] == [500.0, 500.0]
    assert live.scalar("SELECT field FROM rejects WHERE gateway = ?", [gateway]) == (
        "gen_ai.client.operation.duration"
    )


def test_a_boolean_ttft_is_rejected_not_stored_as_a_second(live):
    body = traces_json_with(
        {"key": "gen_ai.response.time_to_first_chunk", "value": {"boolValue": True}}
    )
    with live.client(live.token(gateway="otel-bool")) as c:
        r = c.post("/v1/traces", json=body)
    assert r.status_code == 200, r.text
    message = json_format.Parse(r.text, ExportTraceServiceResponse()).partial_success
    assert message.rejected_spans == 1
    assert "gen_ai.response.time_to_first_chunk must be a number" in message.error_message
    live.settle()
    assert live.scalar("SELECT count(*) FROM requests WHERE gateway = 'otel-bool'") == 0


def traces_json_with(attribute: dict) -> dict:
    """One GenAI span as OTLP/JSON with one more attribute."""
    from tests.support.corpus import traces_json

    body = traces_json(1, model="bool")
    body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append(attribute)
    return body


def test_every_span_counts_and_gzip_without_its_header_is_named(live):
    from opentelemetry.proto.trace.v1.trace_pb2 import Span

    from tests.support.corpus import traces

    many = ExportTraceServiceRequest()
    many.resource_spans.add().scope_spans.add().spans.extend(Span() for _ in range(100_001))
    pb = {"Content-Type": "application/x-protobuf"}
    with live.client(live.token(gateway="otel-count")) as c:
        r = c.post("/v1/traces", content=many.SerializeToString(), headers=pb)
        # Empty spans are no GenAI operation, yet each one counts (a 200 before).
        assert r.status_code == 400
        assert "100000 spans in one request is more than the limit of 100000" in r.text
        zipped = c.post(
            "/v1/traces", content=gzip.compress(traces(1).SerializeToString()), headers=pb
        )
        assert zipped.status_code == 400
        assert "looks like gzip" in zipped.text and "set Content-Encoding: gzip" in zipped.text
