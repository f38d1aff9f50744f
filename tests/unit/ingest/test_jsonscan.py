"""The bounded JSON shape scan (ingest/jsonscan): counts agree with a parser, memory stays flat."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ingest import jsonscan
from ingest.jsonscan import JsonShape, json_shape


def _counts(value: object) -> tuple[int, int]:
    """(containers, values) of a parsed JSON value."""
    if isinstance(value, dict):
        parts = [_counts(v) for v in value.values()]
    elif isinstance(value, list):
        parts = [_counts(v) for v in value]
    else:
        return 0, 1
    return 1 + sum(c for c, _ in parts), 1 + sum(v for _, v in parts)


def _expect(text: str, *, chunk: int) -> None:
    """json_shape agrees with json.loads on `text`, at the given chunk size."""
    value = json.loads(text)
    containers, values = _counts(value)
    old = jsonscan.CHUNK
    jsonscan.CHUNK = chunk
    try:
        shape = json_shape(text.encode())
    finally:
        jsonscan.CHUNK = old
    assert shape.top_items == (len(value) if isinstance(value, list) else None)
    assert shape.containers == containers
    assert shape.values >= values
    assert not shape.truncated


TRICKY = [
    '[{"a": "[,]{}"}, "x,y", [1, [2, [3]]]]',
    r'["\"", "\\", "\\\"", "\\\\", "a\\\\\"b,", 1]',
    r'[{"k\"[": "v\\"}, ",", "\\\\\\\\"]',
    "[]",
    " \n\t [ \r\n ] \n",
    "[[]]",
    '[[], {}, [[]], {"a": []}]',
    '{"a": [1, 2, 3], "b": {"c": ","}}',
    '"just a string, with [brackets]"',
    "42",
    '["\\u005d", "\\u0022"]',
    '["é,ü", "🚀[", {"名前": "]"}]',
]


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 64, 128 * 1024])
def test_tricky_bodies_are_counted_like_a_parser_counts_them(text: str, chunk: int):
    """Brackets, commas and escaped quotes inside strings are text, at any chunk edge."""
    _expect(text, chunk=chunk)


@pytest.mark.parametrize("run", range(1, 9))
@pytest.mark.parametrize("chunk", [1, 2, 3, 4, 5])
def test_backslash_runs_crossing_chunk_edges(run: int, chunk: int):
    """A run of backslashes split over chunks escapes the next byte only when odd."""
    text = json.dumps(["\\" * run, "x", "\\" * run + '"', "[", ","])
    _expect(text, chunk=chunk)


def test_a_bom_and_whitespace_before_the_array_are_skipped():
    """A UTF-8 BOM and whitespace before the top-level array are not content."""
    assert json_shape(b"\xef\xbb\xbf  [1, 2]").top_items == 2


def test_bounds_stop_the_count_early():
    """Past a bound, counting stops and says so; the count is already over the bound."""
    body = b"[" + b",".join([b"{}"] * 1_000_000) + b"]"
    shape = json_shape(body, max_top_items=1000)
    assert shape.truncated and shape.top_items is not None and shape.top_items > 1000
    assert shape.top_items < 1_000_000
    shape = json_shape(body, max_containers=10)
    assert shape.truncated and shape.containers > 10
    assert json_shape(body) == JsonShape(1_000_000, 1_000_001, 2_000_001, False)
    # Deep nesting within one item counts containers but not top items.
    deep = b"[" + b"[" * 5000 + b"]" * 5000 + b", 1]"
    shape = json_shape(deep, max_top_items=1)
    assert shape == JsonShape(2, 5001, 5003, True)


def test_memory_stays_flat_whatever_the_body():
    """8 million `{}` (16 MB) are counted in a few MiB: no object per item."""
    body = b"[" + b",".join([b"{}"] * 8_000_000) + b"]"
    tracemalloc.start()
    try:
        shape = json_shape(body)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert shape.top_items == 8_000_000
    assert peak < 8 * 1024 * 1024


@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"]]]][[[",
        b"[1, 2,",
        b'["unterminated',
        b"[,,,]",
        b"\\\\\\",
        b"\x1f\x8b\x08\x00garbage",
        b"\xff\xfe[\x00",
        b'{"a": NaN, "b": [Infinity]}',
        b"[" * 100_000,
        b"}" * 100_000,
    ],
)
def test_invalid_json_never_crashes(body: bytes):
    """Whatever the bytes, the scan returns counts (estimates for invalid JSON)."""
    shape = json_shape(body, max_top_items=10, max_containers=10)
    assert shape.containers >= 0 and shape.values >= 1


_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(alphabet=st.sampled_from('ab"\\[]{},: \n\té🚀'), max_size=12),
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.dictionaries(
            st.text(alphabet=st.sampled_from('k"\\[]{},'), max_size=4), inner, max_size=5
        )
    ),
    max_leaves=40,
)


@settings(max_examples=200, deadline=None)
@given(value=_json, chunk=st.integers(min_value=1, max_value=40), indent=st.sampled_from([None, 1]))
def test_counts_agree_with_json_loads_on_generated_json(value, chunk, indent):
    """For any JSON value, at any chunk size: top items and containers exact, values bounded."""
    _expect(json.dumps(value, indent=indent, ensure_ascii=False), chunk=chunk)
