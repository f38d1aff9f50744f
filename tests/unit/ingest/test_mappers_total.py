"""Every JSON item mapper is total (ingest/formats): whatever JSON value sits in whatever
field, the item becomes a record or a reject naming the field; nothing raises."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.storage.batches import Reject
from ingest.formats import litellm, native
from ingest.formats.native import EnvelopeError
from ingest.records import FIELDS, RecordIn, build_rows

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
KW = {"gateway": "g", "received_at": NOW, "max_items": 1000}
SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LITELLM_FIELDS = (
    "id",
    "model_group",
    "model",
    "prompt_tokens",
    "completion_tokens",
    "startTime",
    "endTime",
    "completionStartTime",
    "api_base",
    "metadata",
    "stream",
    "status",
    "error_information",
    "error_str",
)

# Any JSON value, as its text: scalars at their edges (huge ints, ±1e308, NaN and Infinity
# as Python's json writes them), unicode, empty containers, recursion, and deep nesting.
_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**400), max_value=10**400)
    | st.sampled_from([0, 1, -1, 2**63, -(2**63) - 1, 10**7, 10**7 + 1])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([1e308, -1e308, 5e-324, 0.5, 1.0, 1e300, -0.0])
    | st.text(max_size=20)
    | st.sampled_from(["", "ok", "error", "success", "failure", "http://[::1", "2026-11-20"])
)
_value = st.recursive(
    _scalar,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_deep = st.integers(min_value=900, max_value=3000).map(lambda n: "[" * n + "]" * n)
_text = _value.map(lambda v: json.dumps(v, allow_nan=True)) | _deep


def _object(fields: dict[str, str]) -> bytes:
    """A JSON object from already-encoded member values."""
    return ("{" + ",".join(f"{json.dumps(k)}:{v}" for k, v in fields.items()) + "}").encode()


def _native_item(field: str, value: str) -> bytes:
    base = {"model": '"m"', "isl": "1", "osl": "1"}
    base[field] = value
    return _object(base)


def _litellm_item(field: str, value: str, nested: str | None) -> bytes:
    base = {
        "id": '"chatcmpl-1"',
        "model_group": '"m"',
        "prompt_tokens": "10",
        "completion_tokens": "5",
        "startTime": "1795000000.0",
        "endTime": "1795000001.0",
        "status": '"success"',
    }
    if nested is not None:  # inside the objects the mapping reads
        value = _object({nested: value})
    base[field] = value
    return _object(base)


@SETTINGS
@given(field=st.sampled_from(FIELDS), value=_text)
def test_the_native_item_path_is_total(field, value):
    """A record or a reject naming its field, for any JSON in any native field."""
    raw = _native_item(field, value)
    out = native.item_errors(raw, 0)
    if isinstance(out, Reject):
        assert out.field == field or "deep" in out.reason, out
        return
    assert isinstance(out, RecordIn)
    built = build_rows([out], [0], gateway="g", received_at=NOW)  # the cross-field rules
    assert built.table.num_rows + len(built.rejects) == 1
    for reject in built.rejects:
        assert reject.field in FIELDS


@SETTINGS
@given(field=st.sampled_from(FIELDS), values=st.lists(_text, min_size=1, max_size=4))
def test_a_native_array_of_any_items_is_parsed_item_by_item(field, values):
    """A JSON array of such items: each is a row or a reject, the batch never fails whole."""
    body = b"[" + b",".join(_native_item(field, v) for v in values) + b"]"
    parsed = native.parse(body, ndjson=False, **KW)
    assert parsed.rows.num_rows + len(parsed.rejects) == len(values)
    ndjson = native.parse(body[1:-1].replace(b"},{", b"}\n{"), ndjson=True, **KW)
    assert ndjson.rows.num_rows + len(ndjson.rejects) == len(values)


@SETTINGS
@given(
    field=st.sampled_from(LITELLM_FIELDS),
    nested=st.sampled_from([None, None, "user_api_key_alias", "sample_rate", "error_class"]),
    value=_text,
)
def test_the_litellm_mapper_is_total(field, nested, value):
    """to_native of any payload: a native record dict or a PayloadError naming the field."""
    raw = _litellm_item(field, value, nested)
    item = litellm.decode_item(raw)
    try:
        rec = litellm.to_native(item)
    except litellm.PayloadError as exc:
        assert exc.field is not None or "deep" in str(exc) or "JSON" in str(exc), exc
        if exc.field is not None:
            assert exc.field.split(".")[0] in (field, "prompt_tokens", "completion_tokens"), exc
        return
    json.dumps(rec, allow_nan=True)  # plain JSON values only: the native rules come next
    parsed = litellm.parse(b"[" + raw + b"]", ndjson=False, **KW)
    assert parsed.rows.num_rows + len(parsed.rejects) == 1
    for reject in parsed.rejects:
        assert reject.field is not None, reject


@SETTINGS
@given(items=st.lists(st.tuples(st.sampled_from(LITELLM_FIELDS), _text), max_size=5))
def test_a_litellm_batch_of_any_payloads_never_fails_whole(items):
    """Arrays and NDJSON of such payloads: one row or reject per payload, or a named 400."""
    raws = [_litellm_item(field, value, None) for field, value in items]
    for body, ndjson in (
        (b"[" + b",".join(raws) + b"]", False),
        (b"\n".join(raws), True),
    ):
        try:
            parsed = litellm.parse(body, ndjson=ndjson, **KW)
        except EnvelopeError as exc:
            assert not raws and "no log entries" in str(exc) or "empty" in str(exc)
            continue
        assert parsed.rows.num_rows + len(parsed.rejects) == len(raws)
