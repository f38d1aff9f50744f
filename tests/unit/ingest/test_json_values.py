"""What json.loads would build is bounded before it runs: a body of millions of tiny values is
refused, a number too long for Python is one field's reject, a BOM is stripped everywhere, and
the fixed bounds grow with a raised body limit (issue 22 review)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ingest import jsonscan
from ingest.formats import litellm, native, otlp
from ingest.formats.native import EnvelopeError, container_limit
from tests.support.records import litellm_payload

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
KW = {"gateway": "g", "received_at": NOW, "max_items": 1000}
MIB16 = jsonscan.BOUND_BODY_BYTES
# 2.1 million one-character strings (past MAX_JSON_VALUES): ~8 MB, 20x that once built.
STRINGS = b",".join([b'"a"'] * 2_100_000)


@pytest.mark.parametrize(
    ("parse", "body"),
    [
        (
            lambda b: native.parse(b, ndjson=True, **KW),
            b'{"model":"m","isl":1,"osl":1,"ttft_ms":NaN,"x":[' + STRINGS + b"]}\n",
        ),
        (
            lambda b: native.parse(b, ndjson=False, **KW),
            b'{"model":"m","isl":1,"osl":1,"ttft_ms":NaN,"x":[' + STRINGS + b"]}",
        ),
        (
            lambda b: litellm.parse(b, ndjson=False, **KW),
            b'[{"model":"m","startTime":NaN,"x":[' + STRINGS + b"]}]",
        ),
        (
            lambda b: otlp.parse(b, json_body=True, **KW),
            b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"x":[' + STRINGS + b"]}]}]}]}",
        ),
    ],
    ids=["native-ndjson", "native-json", "litellm", "otlp-json"],
)
def test_millions_of_values_are_refused_before_json_loads(parse, body):
    """Each of these used to reach json.loads (NaN's lenient path, OTLP/JSON always)."""
    with pytest.raises(EnvelopeError, match="JSON values"):
        parse(body)


def test_the_values_bound_counts_outside_strings_only():
    """Commas inside a string are not values: the cheap count is only a first look."""
    body = b'{"model":"m","isl":1,"osl":1,"ttft_ms":NaN,"x":"' + b"," * 2_100_000 + b'"}'
    (reject,) = native.parse(body, ndjson=True, **KW).rejects
    assert reject.field == "ttft_ms"


def test_the_bounds_grow_with_the_body():
    """A body limit raised past 16 MiB raises the bounds in proportion (never lowers them)."""
    assert jsonscan.scaled(10, 0) == jsonscan.scaled(10, MIB16) == 10
    assert jsonscan.scaled(10, MIB16 + 1) == 20
    assert container_limit(10, 3 * MIB16) == 3 * native.MIN_CONTAINERS
    assert container_limit(1_000_000, 1) == 10_000_000  # ten per item still holds


def test_a_number_too_long_for_python_is_one_fields_reject():
    """Python's digit limit used to reach the client ("use sys.set_int_max_str_digits")."""
    digits = b"9" * 5000
    body = b'{"x":NaN,"model":"m","isl":' + digits + b',"osl":1}\n{"model":"m","isl":1,"osl":1}'
    parsed = native.parse(body, ndjson=True, **KW)
    assert parsed.rows.num_rows == 1
    (reject,) = parsed.rejects
    assert (reject.field, reject.reason) == ("isl", "isl: a number has more than 4,300 digits")
    single = native.parse(
        b'{"x":NaN,"model":"m","isl":' + digits + b',"osl":1}', ndjson=False, **KW
    )
    assert "4,300 digits" in single.rejects[0].reason


def test_a_native_number_out_of_range_gives_the_range():
    (reject,) = native.parse(b'{"model":"m","isl":1e400,"osl":1}', ndjson=False, **KW).rejects
    assert reject.reason == "isl: must be a whole number from 0 to 10,000,000, got one out of range"


def test_litellm_strips_a_byte_order_mark():
    payloads = json.dumps([litellm_payload(i) for i in range(30)]).encode()
    parsed = litellm.parse(b"\xef\xbb\xbf" + payloads, ndjson=False, **KW)
    assert (parsed.rows.num_rows, parsed.rejects) == (30, [])
    with pytest.raises(EnvelopeError, match="more than the limit of 1000"):
        litellm.parse(b"\xef\xbb\xbf[" + b"0," * 5000 + b"0]", ndjson=False, **KW)


def test_deep_regions_are_the_outermost_containers_past_a_depth():
    body = b'{"a":[[[1]]],"b":"[[[[","c":[[[[2]]],[[3]]]}'
    assert [body[s:e] for s, e in jsonscan.deep_regions(body, 2)] == [
        b"[[1]]",
        b"[[[2]]]",
        b"[[3]]",
    ]
    deep = b"[" * 300_000 + b"]" * 300_000  # across chunks
    assert jsonscan.deep_regions(deep, 5) == [(5, len(deep) - 5)]
    assert jsonscan.deep_regions(b"[[[", 1) == [(1, 3)]  # never closed: to the end
