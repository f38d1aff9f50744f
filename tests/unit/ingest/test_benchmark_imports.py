"""GenAI-Perf and AIPerf exports imported as records; times checked against hand computations."""

from __future__ import annotations

import json

import pytest

from ingest.formats.benchmarks import BenchmarkFormatError
from ingest.importer import import_file
from tests.support.database import open_migrated

T0 = 1_795_000_000_000_000_000  # ns


def _genai_perf(tmp_path):
    """A profile_export.json as GenAI-Perf documents it: experiments[].requests[]."""
    payload = {
        "model": "llama-3.1-8b-instruct",
        "messages": [{"role": "user", "content": "x" * 400}],
    }
    data = {
        "experiments": [
            {
                "experiment": {"mode": "concurrency", "value": 2},
                "requests": [
                    {
                        "timestamp": T0,
                        "request_inputs": {"payload": json.dumps(payload)},
                        "response_timestamps": [
                            T0 + 120_000_000,
                            T0 + 130_000_000,
                            T0 + 145_000_000,
                        ],
                        "response_outputs": [{"response": "data: {}"}] * 3,
                    },
                    {
                        "timestamp": T0 + 1_000_000_000,
                        "request_inputs": {"payload": json.dumps(payload)},
                        "response_timestamps": [],
                        "response_outputs": [],
                    },
                ],
            }
        ],
        "version": "0.0.12",
    }
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(data))
    return path


def test_genai_perf_times_and_estimated_tokens(settings, tmp_path):
    path = _genai_perf(tmp_path)
    with open_migrated(settings.db) as db:
        stats = import_file(db, path, "genai-perf", gateway="genai-perf")
        assert (stats.accepted, stats.rejected) == (2, 0)
        rows = (
            db.cursor()
            .execute(
                "SELECT ttft_ms, e2e_ms, token_gaps_ms, isl, osl, tokens_estimated, status, model, "
                "epoch_ns(started_at) FROM requests ORDER BY started_at"
            )
            .fetchall()
        )
    ok, failed = rows
    assert ok[0] == pytest.approx(120.0) and ok[1] == pytest.approx(145.0)  # by hand, in ms
    assert ok[2] == pytest.approx([10.0, 15.0])
    assert ok[3:8] == (100, 3, True, "ok", "llama-3.1-8b-instruct")  # 400 chars / 4, 3 chunks
    assert ok[8] == T0 // 1000 * 1000  # microsecond precision
    assert failed[6] == "error"  # no response at all


def test_aiperf_units_errors_and_cancellations(settings, tmp_path):
    lines = [
        {
            "metadata": {
                "x_request_id": "a-1",
                "request_start_ns": T0,
                "request_end_ns": T0 + 2_000_000_000,
            },
            "metrics": {
                "input_sequence_length": {"value": 550, "unit": "tokens"},
                "output_sequence_length": {"value": 200, "unit": "tokens"},
                "time_to_first_token": {"value": 45_000_000, "unit": "ns"},
                "inter_token_latency": {"value": 9.5, "unit": "ms"},
                "request_latency": {"value": 1.95, "unit": "s"},
                "inter_chunk_latency": {"value": [9000, 10000], "unit": "us"},
            },
            "error": None,
        },
        {
            "metadata": {"x_request_id": "a-2", "request_start_ns": T0 + 5},
            "metrics": {},
            "error": {"code": 429, "type": "RateLimitError", "message": "slow down"},
        },
        {
            "metadata": {"x_request_id": "a-3", "request_start_ns": T0 + 9, "was_cancelled": True},
            "metrics": {
                "input_sequence_length": {"value": 10, "unit": "tokens"},
                "output_sequence_length": {"value": 0, "unit": "tokens"},
            },
        },
    ]
    path = tmp_path / "profile_export.jsonl"
    path.write_text("\n".join(json.dumps(x) for x in lines))
    with open_migrated(settings.db) as db:
        stats = import_file(db, path, "aiperf", gateway="aiperf")
        assert (stats.accepted, stats.rejected) == (3, 0)
        rows = {
            r[0]: r[1:]
            for r in db.cursor()
            .execute(
                "SELECT request_id, isl, osl, ttft_ms, itl_ms, e2e_ms, token_gaps_ms, status, "
                "error_type FROM requests"
            )
            .fetchall()
        }
    assert rows["a-1"][:5] == (550, 200, pytest.approx(45.0), 9.5, pytest.approx(1950.0))
    assert rows["a-1"][5] == pytest.approx([9.0, 10.0])
    assert rows["a-2"][6:] == ("error", "RateLimitError")
    assert rows["a-3"][6] == "cancelled"


def test_unknown_benchmark_files_are_named(settings, tmp_path):
    wrong = tmp_path / "profile_export.json"
    wrong.write_text(json.dumps({"runs": []}))
    bad_unit = tmp_path / "x.jsonl"
    bad_unit.write_text(
        json.dumps(
            {"metadata": {}, "metrics": {"request_latency": {"value": 1, "unit": "fortnight"}}}
        )
    )
    with open_migrated(settings.db) as db:
        with pytest.raises(BenchmarkFormatError, match="genai-perf: .* no experiments"):
            import_file(db, wrong, "genai-perf", gateway="g")
        with pytest.raises(BenchmarkFormatError, match="aiperf: line 0: metrics.request_latency"):
            import_file(db, bad_unit, "aiperf", gateway="g")


def test_genai_perf_with_a_local_tokenizer_counts_tokens(settings, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    vocab = {"[UNK]": 0, "hello": 1, "world": 2, "x": 3}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok_path = tmp_path / "tokenizer.json"
    tok.save(str(tok_path))
    chunk = 'data: {"choices": [{"delta": {"content": "%s"}}]}'
    data = {
        "experiments": [
            {
                "requests": [
                    {
                        "timestamp": T0,
                        "request_inputs": {
                            "payload": json.dumps(
                                {
                                    "model": "m",
                                    "messages": [{"role": "user", "content": "hello world x"}],
                                }
                            )
                        },
                        "response_timestamps": [T0 + 1, T0 + 2],
                        "response_outputs": [
                            {"response": chunk % "hello "},
                            {"response": chunk % "world world"},
                        ],
                    }
                ]
            }
        ]
    }
    path = tmp_path / "profile_export.json"
    path.write_text(json.dumps(data))
    with open_migrated(settings.db) as db:
        import_file(db, path, "genai-perf", gateway="g", tokenizer=tok_path)
        row = db.cursor().execute("SELECT isl, osl, tokens_estimated FROM requests").fetchall()
    assert row == [(3, 3, False)]  # counted by the tokenizer: "hello world x", "hello world world"
