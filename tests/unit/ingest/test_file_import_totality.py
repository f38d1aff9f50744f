"""File imports (ingest/formats/files, benchmarks) meet the same hostile values as the HTTP
routes: a refused chunk is kept, not skipped; overflow and booleans are named, not crashes."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from ingest.formats import benchmarks
from ingest.formats.files import _records, batches

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
T0 = 1_795_000_000_000_000_000  # ns


def test_an_ndjson_chunk_refused_whole_is_kept_as_a_reject(tmp_path: Path):
    """A chunk over the container bound used to vanish as if it were blank lines."""
    path = tmp_path / "nested.ndjson"
    nested = ",".join(["{}"] * 1_100_000)
    path.write_text(f'{{"model":"m","isl":1,"osl":1,"x":[{nested}]}}\n')
    ((batch, items),) = list(batches(path, "ndjson", "g", None, NOW))
    assert items == 1 and batch.rows is None
    (reject,) = batch.rejects
    assert reject.index == 0 and "JSON objects and arrays" in reject.reason
    blank = tmp_path / "blank.ndjson"
    blank.write_text("\n\n  \n")
    assert list(batches(blank, "ndjson", "g", None, NOW)) == []


def test_an_infinite_cell_is_rejected_by_field():
    """CSV and Parquet cells reach the record type as Python floats: inf is refused by name."""
    records, _, rejects = _records(
        [
            {"model": "m", "isl": 1, "osl": 1, "e2e_ms": float("inf")},
            {"model": "m", "isl": 1, "osl": 1},
        ],
        0,
    )
    assert len(records) == 1
    assert [(r.index, r.field) for r in rejects] == [(0, "e2e_ms")]


def test_aiperf_overflow_and_booleans_never_crash_the_import(tmp_path: Path):
    """An integer start too large for a float, a boolean latency and a huge error code: the
    lines are still read, the values refused by the record rules, nothing raises."""
    lines = [
        {
            "metadata": {"request_start_ns": 10**400, "x_request_id": 10**4000},
            "metrics": {
                "input_sequence_length": {"value": 10, "unit": "tokens"},
                "output_sequence_length": {"value": 5, "unit": "tokens"},
                "request_latency": {"value": True, "unit": "ms"},
            },
            "error": {"type": 10**4000},
        }
    ]
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    ((start, rows),) = list(benchmarks.aiperf_rows(path, None))
    (row,) = rows
    assert row["started_at"] == float("inf") and "e2e_ms" not in row
    assert row["error_type"] == "a very large number" == row["request_id"]
    ((batch, items),) = list(batches(path, "aiperf", "g", None, NOW))
    assert items == 1 and [r.field for r in batch.rejects] == ["started_at"]


def test_benchmark_fields_of_the_wrong_type_are_rejects_naming_them(tmp_path: Path):
    """Each raised TypeError/AttributeError mid-import (a traceback, a half-imported file)."""
    ok = {"timestamp": T0, "response_timestamps": [T0 + 10**8]}
    requests = [
        {"timestamp": T0, "response_timestamps": 5},
        {"timestamp": T0, "request_inputs": [1]},
        {
            "timestamp": T0,
            "request_inputs": {"payload": {"messages": [{"content": [{"text": 5}]}]}},
        },
        ok,
    ]
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps({"experiments": [{"requests": requests}]}))
    ((batch, items),) = list(batches(path, "genai-perf", "g", None, NOW))
    assert (items, batch.rows.num_rows) == (4, 1)
    assert [(r.index, r.field) for r in batch.rejects] == [
        (0, "response_timestamps"),
        (1, "request_inputs"),
        (2, "request_inputs"),
    ]
    assert "must be a list" in batch.rejects[0].reason
    assert "text must be a string" in batch.rejects[2].reason
    lines = [
        {"metadata": {}, "metrics": [1]},
        {"metadata": {"request_start_ns": T0}, "metrics": {}},
    ]
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    ((batch, items),) = list(batches(path, "aiperf", "g", None, NOW))
    assert items == 2
    assert [(r.index, r.field) for r in batch.rejects][:1] == [(0, "metrics")]
    assert "metrics must be an object" in batch.rejects[0].reason
