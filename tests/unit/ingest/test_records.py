"""Records to Arrow columns (ingest/records): one struct conversion equals one per field."""

from __future__ import annotations

import json
from datetime import datetime

from ingest.records import RecordIn


def test_one_struct_conversion_builds_the_columns_a_conversion_per_field_builds():
    """The parser converts a batch's records to Arrow in one struct conversion; it must give
    exactly the columns of the conversion per field it falls back to (started_at as epoch
    seconds), for every kind of value the wire allows."""
    import msgspec

    from app.services.demo import generate
    from ingest import records

    demo = generate(300, seed=3).to_pylist()
    wire = [
        {k: v.isoformat() if isinstance(v, datetime) else v for k, v in row.items()} for row in demo
    ]
    wire += [
        {"model": "m", "isl": 0, "osl": 0},  # defaults, nulls, no request id
        {"model": "名前 🚀", "isl": 10_000_000, "osl": 1, "request_id": "é" * 256},
        {"model": "m", "isl": 1, "osl": 1, "token_gaps_ms": [], "stream": False},
        {"model": "m", "isl": 1, "osl": 1, "ttft_ms": 0, "e2e_ms": 1e300, "cached_tokens": 0},
        {"model": "m", "isl": 1, "osl": 1, "status": "cancelled", "error_type": "499"},
    ]
    recs = msgspec.json.decode(json.dumps(wire).encode(), type=list[RecordIn])
    whole = records._struct_columns(recs)
    assert whole is not None
    by_field = records._field_columns(recs)
    assert whole.keys() == by_field.keys()
    for name, column in whole.items():
        assert column is not None and column.equals(by_field[name]), name
    # An epoch-seconds start time cannot be text: field by field, started_at left to Python.
    mixed = recs + [RecordIn(model="m", isl=1, osl=1, started_at=1_764_000_000.5)]
    assert records._struct_columns(mixed) is None
    assert records._arrow_columns(mixed)["started_at"] is None
