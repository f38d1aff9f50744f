"""NVIDIA AIPerf replays what `tokenshape export` writes, end to end and offline.

An hour of demo traffic is exported (a stratified sample of 40 requests, time compressed into
a few seconds) as a Mooncake trace and as AIPerf single_turn input; the real AIPerf
(`make aiperf` installs it into .tools/aiperf, a venv of its own) replays each with a fixed
schedule against a streaming OpenAI-compatible stub on loopback (tests/support/openai_stream.py),
counting tokens with a word-level tokenizer built in the test and cached as a hub model
(tests/support/hf_tokenizer.py, HF_HUB_OFFLINE=1); its profile_export.jsonl is imported back with
`tokenshape import --format aiperf`. Every trace request must come back once, with exactly its
input and output lengths (the tokenizer makes AIPerf's re-tokenisation exact, so no tolerance),
the stub must have been asked for exactly output_length tokens, and the arrivals must keep the
trace's order and spacing.

Marked `aiperf` (`pytest -m aiperf`). Without .tools/aiperf the tests skip, except in CI
(CI=true), where a missing venv means `make test` did not install it: they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest
from tokenizers import Tokenizer

from tests.support import hf_tokenizer, openai_stream
from tests.support.cli import cli
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.paths import ROOT

pytestmark = [pytest.mark.aiperf, pytest.mark.timeout(600)]

AIPERF_VENV = ROOT / ".tools" / "aiperf"
AIPERF = AIPERF_VENV / "bin" / "aiperf"
TOKENIZER_ID = "tokenshape-test/wordlevel"
MODEL = "stub-model"
GATEWAY = "aiperf-replay"
# The window exported: the last two hours of the demo traffic, ~70 stored requests.
WINDOW = (END - timedelta(hours=2), END)
REQUESTS = 40
SPEEDUP = 2000  # the two hours replayed in ~3.6 s
# Trace requests at least this far apart must arrive in the same order (AIPerf's dispatch jitter
# on a busy machine is tens of milliseconds; the trace spreads 40 requests over ~3.6 s).
ORDER_GAP_MS = 400


@pytest.fixture(scope="module")
def aiperf() -> Path:
    """AIPerf's command; skipped without its venv, failed in CI (`make test` installs it)."""
    if not AIPERF.exists():
        why = f"{AIPERF} is missing: `make aiperf` installs AIPerf (tests/aiperf/uv.lock)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(why)
        pytest.skip(why)
    return AIPERF


@pytest.fixture(scope="module")
def hf_home(aiperf: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """HF_HOME holding the test tokenizer as the cached hub model TOKENIZER_ID."""
    # Trained on the corpus AIPerf cuts its synthetic prompts from, so every prompt token is a
    # vocabulary word; the stub's output words are added.
    corpus = sorted(
        AIPERF_VENV.glob("lib/python3*/site-packages/aiperf/dataset/generator/assets/*.txt")
    )
    assert corpus, f"AIPerf's prompt corpus is not under {AIPERF_VENV}: has its layout changed?"
    tok = hf_tokenizer.train(corpus, openai_stream.WORDS)
    home = tmp_path_factory.mktemp("hf")
    hf_tokenizer.install(tok, home, TOKENIZER_ID)
    return home


@pytest.fixture(scope="module")
def tokenizer_json(hf_home: Path) -> Path:
    """The cached tokenizer.json (what `tokenshape export --tokenizer` reads)."""
    (path,) = hf_home.glob("hub/models--*/snapshots/*/tokenizer.json")
    return path


@pytest.fixture(scope="module")
def tokenizer(tokenizer_json: Path) -> Tokenizer:
    """The test tokenizer, loaded as AIPerf loads it into transformers (no special tokens)."""
    return Tokenizer.from_file(str(tokenizer_json))


def _count(tok: Tokenizer, text: str) -> int:
    return len(tok.encode(text, add_special_tokens=False).ids)


def _timed_lengths(line: dict) -> tuple[int, int, int]:
    return line["timestamp"], line["input_length"], line["output_length"]


@pytest.fixture(scope="module")
def stub(tokenizer: Tokenizer) -> Iterator[openai_stream.StreamServer]:
    """The streaming stub, for the module; each test looks at the requests it added."""
    with openai_stream.serving(model=MODEL, count_tokens=lambda t: _count(tokenizer, t)) as s:
        yield s


@pytest.fixture(scope="module")
def demo_db(demo_template, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three days of demo traffic ending at END."""
    template = demo_template(requests=5_000, days=3, end=END)
    return copy_database(template, tmp_path_factory.mktemp("demo") / "demo.duckdb")


def _exported_trace(db: Path, out: Path, fmt: str, tokenizer_json: Path) -> list[dict]:
    """`tokenshape export` of WINDOW into `out` (with the test tokenizer for --format aiperf,
    so each prompt encodes to exactly its input length); returns the trace's lines."""
    args = ["export", "--format", fmt, "--db", str(db), "--out", str(out)]
    args += ["--start", WINDOW[0].isoformat(), "--end", WINDOW[1].isoformat()]
    args += ["--max-requests", str(REQUESTS), "--speedup", str(SPEEDUP)]
    if fmt == "aiperf":
        args += ["--tokenizer", str(tokenizer_json)]
    proc = cli(*args)
    assert f"{REQUESTS} requests as {fmt}" in proc.stderr, proc.stderr
    return [json.loads(line) for line in out.read_text().splitlines()]


def _profile(aiperf: Path, trace: Path, dataset: str, url: str, hf_home: Path, out: Path) -> Path:
    """`aiperf profile` replaying `trace` on its timestamps against `url`; returns
    profile_export.jsonl."""
    cmd = [
        str(aiperf),
        "profile",
        "--model", MODEL,
        "--tokenizer", TOKENIZER_ID,
        "--url", url,
        "--endpoint-type", "chat",
        "--streaming",
        "--custom-dataset-type", dataset,
        "--input-file", str(trace),
        "--fixed-schedule",
        "--random-seed", "0",
        "--artifact-dir", str(out),
        "--ui-type", "none",
        # Nothing but the stub to talk to: no Prometheus scrape of it, no DCGM exporters.
        "--no-server-metrics",
        "--no-gpu-telemetry",
    ]  # fmt: skip
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("HF_", "AIPERF_", "VIRTUAL_ENV"))
    }
    env |= {
        "HF_HOME": str(hf_home),
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        # Its dataset cache outside the home folder and off: every run tokenizes afresh.
        "AIPERF_DATASET_MMAP_CACHE_ENABLED": "false",
        "AIPERF_DATASET_MMAP_BASE_PATH": str(out.parent / "mmap"),
    }
    proc = subprocess.run(cmd, cwd=out.parent, env=env, capture_output=True, text=True, timeout=300)
    log = (proc.stdout + proc.stderr)[-6000:]
    assert proc.returncode == 0, log
    export = out / "profile_export.jsonl"
    assert export.is_file(), log
    return export


def _imported(export: Path, db: Path) -> list[tuple]:
    """`tokenshape import --format aiperf` into `db`; the stored (isl, osl, started_at, status)."""
    out = cli("import", str(export), "--format", "aiperf", "--gateway", GATEWAY, "--db", str(db))
    assert f"{REQUESTS} stored" in out.stdout, out.stdout + out.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        query = "SELECT isl, osl, started_at, status FROM requests WHERE gateway = ?"
        return con.execute(query + " ORDER BY started_at", [GATEWAY]).fetchall()


def test_the_tokenizer_round_trips(tokenizer: Tokenizer) -> None:
    """The stub's words are one token each, also joined as AIPerf joins the streamed chunks;
    decoding then encoding gives the same tokens (how AIPerf sizes its prompts)."""
    for n in (1, 2, 17, 1024):
        chunks = openai_stream.output_words(n)
        assert [_count(tokenizer, c) for c in chunks] == [1] * n
        assert _count(tokenizer, "".join(chunks)) == n
    ids = tokenizer.encode("From fairest creatures we desire increase", add_special_tokens=False)
    again = tokenizer.encode(tokenizer.decode(ids.ids), add_special_tokens=False)
    assert again.ids == ids.ids and len(ids.ids) == 6


@pytest.mark.parametrize(
    ("fmt", "dataset"),
    [("mooncake", "mooncake_trace"), ("vllm", "mooncake_trace"), ("aiperf", "single_turn")],
)
def test_aiperf_replays_the_export(
    fmt: str,
    dataset: str,
    aiperf: Path,
    hf_home: Path,
    tokenizer_json: Path,
    tokenizer: Tokenizer,
    stub: openai_stream.StreamServer,
    demo_db: Path,
    db_path: Path,
    tmp_path: Path,
) -> None:
    trace_file = tmp_path / f"trace-{fmt}.jsonl"
    trace = _exported_trace(demo_db, trace_file, fmt, tokenizer_json)
    assert len(trace) == REQUESTS
    if fmt == "aiperf":
        # The same requests as the Mooncake trace of the window, each prompt of exactly its
        # input length in the test tokenizer (the one AIPerf counts with).
        mooncake = _exported_trace(
            demo_db, tmp_path / "reference.jsonl", "mooncake", tokenizer_json
        )
        for line in trace:
            line["input_length"] = _count(tokenizer, line["text"])
        assert Counter(map(_timed_lengths, trace)) == Counter(map(_timed_lengths, mooncake))
    wanted = Counter((t["input_length"], t["output_length"]) for t in trace)

    before = len(stub.requests)
    export = _profile(aiperf, trace_file, dataset, stub.url, hf_home, tmp_path / "artifacts")
    seen = stub.requests[before:]
    rows = _imported(export, db_path)

    # Every trace request was replayed once, and came back with its exact lengths.
    assert len(seen) == len(rows) == len(trace)
    assert {status for *_, status in rows} == {"ok"}
    assert Counter((isl, osl) for isl, osl, *_ in rows) == wanted
    # The stub was asked for exactly the trace's output lengths, on prompts of its input
    # lengths (AIPerf's synthetic prompts re-tokenize to input_length; single_turn's text is
    # sent as it is).
    assert all(s.path == "/v1/chat/completions" and s.stream for s in seen)
    assert Counter((_count(tokenizer, s.prompt), s.max_tokens) for s in seen) == wanted
    if fmt == "aiperf":
        assert Counter(s.prompt for s in seen) == Counter(t["text"] for t in trace)

    # Arrivals follow the timestamps: each replayed row paired with a trace line of the same
    # lengths (the k-th earliest of each pair of lengths with the k-th earliest line), the
    # pairs far apart in the trace arrive in its order, and the replay is not compressed.
    trace_ms = defaultdict(list)
    for t in sorted(trace, key=lambda t: t["timestamp"]):
        trace_ms[(t["input_length"], t["output_length"])].append(t["timestamp"])
    first = rows[0][2]
    pairs = []  # (trace offset, replay offset) in ms
    for isl, osl, started, _ in rows:
        pairs.append((trace_ms[(isl, osl)].pop(0), (started - first) / timedelta(milliseconds=1)))
    pairs.sort()
    far = [(a, b) for a in pairs for b in pairs if b[0] - a[0] >= ORDER_GAP_MS]
    assert len(far) > REQUESTS, "the trace is spread over too short a time to check order"
    assert [b[1] > a[1] for a, b in far] == [True] * len(far)
    trace_span = pairs[-1][0] - pairs[0][0]
    replay_span = max(r for _, r in pairs) - min(r for _, r in pairs)
    assert trace_span > 2 * ORDER_GAP_MS
    assert replay_span >= 0.9 * trace_span, (replay_span, trace_span)
