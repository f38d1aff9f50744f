"""Sample rates on every ingest path: native records, OTLP (the tracestate threshold and the
sampling attributes), LiteLLM metadata and imported files; valid rates are stored, invalid
ones rejected by field with what to send, absent ones stored as NULL (weight 1)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from google.protobuf import json_format

from ingest.formats import files, litellm, native, otlp
from ingest.records import MIN_SAMPLE_RATE
from ingest.sampling import threshold_probability
from tests.support.corpus import _kv, litellm_item, logs, traces
from tests.support.records import record

NOW = datetime(2026, 11, 20, 13, 0, tzinfo=UTC)
KW = {"gateway": "g", "received_at": NOW, "max_items": 1000}


@pytest.mark.parametrize(
    ("tracestate", "p"),
    [
        ("ot=th:0", 1.0),  # th:0 keeps everything
        ("ot=th:8", 0.5),  # one digit: 0x80000000000000
        ("ot=th:c", 0.25),
        ("ot=th:f", 1 / 16),
        ("ot=th:fd70a3d70a3d71", 1 - 0xFD70A3D70A3D71 / 2**56),  # 1% (14 digits)
        ("ot=th:e666", 1 - 0xE666 / 2**16),  # trailing zeros left out
        ("ot=th:ffffffffffffff", 2**-56),  # the smallest probability
        ("ot=rv:abcdef01234567;th:8", 0.5),  # other sub-keys before it
        ("ot=th:4;rv:abcdef01234567", 0.75),
        ("vendor=a:1, ot=th:8 ,other=x", 0.5),  # other members, optional whitespace
    ],
)
def test_the_sampling_threshold_gives_the_probability(tracestate, p):
    assert threshold_probability(tracestate) == pytest.approx(p, rel=1e-15)


@pytest.mark.parametrize(
    "tracestate",
    [
        "",
        "vendor=x",
        "ot=rv:abcdef01234567",  # randomness only: no threshold
        "ot=th:",  # empty
        "ot=th:FF",  # upper case is not the encoding
        "ot=th:123456789abcdef",  # 15 digits
        "ot=th:0x8",
        "ot=th:-1",
        "ot=th:g",
        "th:8",  # not inside the ot entry
        "ot=th:8 x",
        "xot=th:8",
        "ot=p:8;r:62",  # the older p-value draft is not a threshold
    ],
)
def test_a_missing_or_malformed_threshold_is_unknown_not_an_error(tracestate):
    assert threshold_probability(tracestate) is None


def _native(records: list[dict]) -> native.Parsed:
    return native.parse(json.dumps(records).encode(), ndjson=False, **KW)


def test_native_records_carry_a_sample_rate_and_bad_ones_are_rejected_by_field():
    parsed = _native(
        [
            record(0, sample_rate=0.01),
            record(1),  # absent: not sampled
            record(2, sample_rate=1),
            record(3, sample_rate=0),
            record(4, sample_rate=1.5),
            record(5, sample_rate="0.1"),
            record(6, sample_rate=True),
            record(7, sample_rate=-0.5),
            record(8, sample_rate=MIN_SAMPLE_RATE / 2),
            record(9, sample_rate=MIN_SAMPLE_RATE),
        ]
    )
    stored = dict(
        zip(
            parsed.rows.column("request_id").to_pylist(),
            parsed.rows.column("sample_rate").to_pylist(),
            strict=True,
        )
    )
    assert stored == {"r-0": 0.01, "r-1": None, "r-2": 1.0, "r-9": MIN_SAMPLE_RATE}
    assert [r.index for r in parsed.rejects] == [3, 4, 5, 6, 7, 8]
    for reject in parsed.rejects:
        assert reject.field == "sample_rate"
        assert reject.reason.startswith("sample_rate: ")
        assert "0 < p <= 1 (0.01 for a 1% sample" in reject.reason


def test_ndjson_items_carry_their_own_rates():
    body = b"\n".join(
        json.dumps(r).encode() for r in (record(0, sample_rate=0.5), record(1, sample_rate=2))
    )
    parsed = native.parse(body, ndjson=True, **KW)
    assert parsed.rows.column("sample_rate").to_pylist() == [0.5]
    assert [(r.index, r.field) for r in parsed.rejects] == [(1, "sample_rate")]


def _spans(states: list[str], attributes: list[dict]):
    request = traces(len(states))
    for span, state, attrs in zip(
        request.resource_spans[0].scope_spans[0].spans, states, attributes, strict=True
    ):
        span.trace_state = state
        for key, value in attrs.items():
            kind = (
                "double_value"
                if isinstance(value, float)
                else "int_value"
                if isinstance(value, int) and not isinstance(value, bool)
                else "bool_value"
                if isinstance(value, bool)
                else "string_value"
            )
            span.attributes.append(_kv(key, **{kind: value}))
    return request


def test_otlp_spans_take_the_rate_from_the_threshold_then_the_attributes():
    request = _spans(
        [
            "ot=th:8",  # 0: threshold
            "ot=th:c",  # 1: the threshold wins over an attribute
            "",  # 2: sampling.probability
            "",  # 3: Honeycomb SampleRate = 1 in 100
            "",  # 4: sample_rate as N
            "",  # 5: sample_rate as a probability
            "ot=th:ZZ",  # 6: malformed threshold, no attribute: unsampled
            "",  # 7: nothing: unsampled
            "ot=th:0",  # 8: th:0 is p = 1
            "",  # 9: a probability out of range: rejected
            "",  # 10: a SampleRate that is no number: rejected
            "",  # 11: SampleRate 0: rejected
            "ot=th:XYZ",  # 12: malformed threshold, then the attribute
        ],
        [
            {},
            {"sampling.probability": 0.9},
            {"sampling.probability": 0.1},
            {"SampleRate": 100},
            {"sample_rate": 20},
            {"sample_rate": 0.2},
            {},
            {},
            {},
            {"sampling.probability": 1.5},
            {"SampleRate": "lots"},
            {"SampleRate": 0},
            {"SampleRate": 4},
        ],
    )
    parsed, ignored = otlp.parse(request.SerializeToString(), json_body=False, **KW)
    assert ignored == 0
    rates = dict(
        zip(
            parsed.rows.column("request_id").to_pylist(),
            parsed.rows.column("sample_rate").to_pylist(),
            strict=True,
        )
    )
    assert rates == {
        "resp-0": 0.5,
        "resp-1": 0.25,
        "resp-2": 0.1,
        "resp-3": 0.01,
        "resp-4": 0.05,
        "resp-5": 0.2,
        "resp-6": None,
        "resp-7": None,
        "resp-8": 1.0,
        "resp-12": 0.25,
    }
    rejects = {r.index: r for r in parsed.rejects}
    assert sorted(rejects) == [9, 10, 11]
    assert rejects[9].field == "sampling.probability"
    assert "sampling.probability (as sample_rate)" in rejects[9].reason
    assert "0 < p <= 1" in rejects[9].reason
    for i in (10, 11):
        assert rejects[i].field == "SampleRate"
        assert rejects[i].reason.startswith("otlp: SampleRate ")
        assert "send N for '1 in N requests kept'" in rejects[i].reason


def test_otlp_json_spans_and_log_records_carry_rates_too():
    body = json.loads(json_format.MessageToJson(_spans(["ot=th:8"], [{}])))
    span = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert span["traceState"] == "ot=th:8"
    span["traceId"], span["spanId"] = "00" * 16, "00" * 8
    parsed, _ = otlp.parse(json.dumps(body).encode(), json_body=True, **KW)
    assert parsed.rows.column("sample_rate").to_pylist() == [0.5]
    request = logs(2)
    records = request.resource_logs[0].scope_logs[0].log_records
    records[0].attributes.append(_kv("sampling.probability", double_value=0.125))
    parsed, _ = otlp.parse(request.SerializeToString(), json_body=False, logs=True, **KW)
    assert parsed.rows.column("sample_rate").to_pylist() == [0.125, None]


def test_litellm_payloads_carry_the_rate_in_their_metadata():
    items = [litellm_item(i) for i in range(6)]
    items[0]["metadata"] = {"sample_rate": 0.05, "user_api_key_alias": "team-a"}
    items[1]["metadata"] = {"spend_logs_metadata": {"sample_rate": 0.5}}
    items[2]["metadata"] = {"requester_metadata": {"sample_rate": 0.25}}
    items[3]["metadata"] = {"user_api_key_alias": "team-b"}  # none: unsampled
    items[4]["metadata"] = {"sample_rate": 5}  # out of range: rejected
    items[5]["metadata"] = {"sample_rate": "all"}
    parsed = litellm.parse(json.dumps(items).encode(), ndjson=False, **KW)
    assert parsed.rows.column("sample_rate").to_pylist() == [0.05, 0.5, 0.25, None]
    assert [(r.index, r.field) for r in parsed.rejects] == [
        (4, "metadata.sample_rate"),
        (5, "metadata.sample_rate"),
    ]
    assert all("0 < p <= 1" in r.reason for r in parsed.rejects)


def _imported(path, fmt: str) -> tuple[list, list]:
    rates, rejects = [], []
    for batch, _ in files.batches(path, fmt, "import", None, NOW):
        rates += batch.rows.column("sample_rate").to_pylist()
        rejects += batch.rejects
    return rates, rejects


def test_imported_files_read_a_sample_rate_column(tmp_path):
    rows = [
        {"model": "m", "isl": 10, "osl": 2, "sample_rate": 0.1},
        {"model": "m", "isl": 11, "osl": 2, "sample_rate": None},  # an empty cell
        {"model": "m", "isl": 12, "osl": 2, "sample_rate": 1.0},
        {"model": "m", "isl": 13, "osl": 2, "sample_rate": 1.5},
    ]
    jsonl = tmp_path / "r.jsonl"
    jsonl.write_text(
        "".join(json.dumps({k: v for k, v in r.items() if v is not None}) + "\n" for r in rows)
    )
    parquet = tmp_path / "r.parquet"
    pq.write_table(pa.Table.from_pylist(rows), parquet)
    csv = tmp_path / "r.csv"
    csv.write_text("model,isl,osl,sample_rate\nm,10,2,0.1\nm,11,2,\nm,12,2,1\nm,13,2,1.5\n")
    for path, fmt in ((jsonl, "ndjson"), (parquet, "parquet"), (csv, "csv")):
        rates, rejects = _imported(path, fmt)
        assert rates == [0.1, None, 1.0], fmt
        assert [(r.index, r.field) for r in rejects] == [(3, "sample_rate")], fmt
    # A column with a cell that is no number is read as text: the numbers still count.
    text = tmp_path / "t.csv"
    text.write_text("model,isl,osl,sample_rate\nm,10,2,0.5\nm,11,2,half\n")
    rates, rejects = _imported(text, "csv")
    assert rates == [0.5]
    assert rejects[0].field == "sample_rate" and "0 < p <= 1" in rejects[0].reason
    # Without the column every row is unsampled.
    plain = tmp_path / "p.csv"
    plain.write_text("model,isl,osl\nm,10,2\n")
    assert _imported(plain, "csv") == ([None], [])
