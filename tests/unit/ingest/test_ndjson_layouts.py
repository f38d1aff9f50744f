"""NDJSON layouts through the native parser: the one-decode fast path and the line-by-line
path must agree on records and on item indexes (the line numbers)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from ingest.formats.native import parse

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)


def _rec(i: int) -> bytes:
    return json.dumps({"model": "m", "isl": i, "osl": 1, "request_id": f"r{i}"}).encode()


def _parse(body: bytes):
    return parse(body, ndjson=True, gateway="g", received_at=NOW, max_items=1000)


@pytest.mark.parametrize(
    "sep",
    [b"\n", b"\r\n", b"\n\n", b"\n \n", b"\r\n\r\n"],
    ids=["lf", "crlf", "blank-line", "space-line", "crlf-blank"],
)
def test_line_endings_and_blank_lines_keep_every_record(sep):
    body = sep.join(_rec(i) for i in range(5))
    out = _parse(body)
    assert not out.rejects and out.rows.column("isl").to_pylist() == [0, 1, 2, 3, 4]


def test_a_bad_line_is_named_by_its_line_number_after_blank_lines():
    body = _rec(0) + b"\n\n" + b'{"model": "m", "isl": -1, "osl": 1}' + b"\n" + _rec(2)
    out = _parse(body)
    (reject,) = out.rejects
    assert reject.index == 2 and reject.field == "isl"
    assert out.rows.column("isl").to_pylist() == [0, 2]


def test_two_objects_on_one_line_do_not_shift_the_indexes():
    body = _rec(0) + b"\n" + _rec(1) + b" " + _rec(2) + b"\n" + _rec(3)
    out = _parse(body)
    (reject,) = out.rejects
    assert reject.index == 1 and "not valid JSON" in reject.reason
    assert out.rows.column("isl").to_pylist() == [0, 3]


def test_a_lone_carriage_return_is_not_a_line_break():
    out = _parse(_rec(0) + b"\r" + _rec(1))
    (reject,) = out.rejects
    assert reject.index == 0 and out.rows.num_rows == 0


@pytest.mark.parametrize("glue", [b"", b" ", b"\r", b"\t"], ids=["none", "space", "cr", "tab"])
@pytest.mark.parametrize("gap", [b"\n\n", b"\n \n", b"\n\r\n"], ids=["blank", "space", "crlf"])
def test_two_objects_on_a_line_and_a_blank_line_are_not_one_object_per_line(glue, gap):
    """The counts match (3 objects, 3 lines), yet the first line holds two objects: that line
    is one invalid item, and the indexes stay line numbers."""
    bad = b'{"model": "m", "isl": 1, "osl": 1, "request_id": "old", "started_at": "1990-01-01Z"}'
    out = _parse(_rec(0) + glue + bad + gap + _rec(2))
    (reject,) = out.rejects
    assert reject.index == 0 and "not valid JSON" in reject.reason
    assert out.rows.column("request_id").to_pylist() == ["r2"]
