"""The worst JSON bodies under the size limit cost megabytes, not gigabytes (ingest/formats):
each is parsed in a fresh process whose peak RSS (VmHWM) is read before and after."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.paths import ROOT

# Runs in a subprocess: VmHWM is the process's peak, reset (clear_refs 5) before each body.
_SCRIPT = r"""
import json, sys
from datetime import UTC, datetime
from pathlib import Path
from ingest.formats import litellm, native
from ingest.formats.native import EnvelopeError

def rss():
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return out

KW = {"gateway": "g", "received_at": datetime.now(UTC), "max_items": 100_000}
LITE = b'{"id":"x","model_group":"m","prompt_tokens":1,"completion_tokens":1'
EMPTIES = b",".join([b"{}"] * 5_500_000)  # 16.5 MB: 5.5 million items
REC = b'{"model":"m","isl":1,"osl":1,"x":['
ONE = b'{"model":"m","isl":1,"osl":1}\n'
cases = {
    "requests-array": (native.parse, b"[" + EMPTIES + b"]", False),
    "requests-array-of-zeros": (native.parse, b"[" + b",".join([b"0"] * 8_000_000) + b"]", False),
    "requests-ndjson": (native.parse, EMPTIES.replace(b",", b"\n"), True),
    "requests-unknown-field": (native.parse, REC + EMPTIES + b"]}", False),
    "requests-ndjson-blank-lines": (native.parse, ONE + b"  \n" * 5_000_000 + ONE, True),
    "litellm-array": (litellm.parse, b"[" + EMPTIES + b"]", False),
    "litellm-ndjson": (litellm.parse, EMPTIES.replace(b",", b"\n"), True),
    "litellm-metadata": (litellm.parse, LITE + b',"metadata":[' + EMPTIES + b"]}", False),
    "litellm-messages": (litellm.parse, LITE + b',"x":[' + EMPTIES[:2_699_999] + b"]}", False),
}
warm = b"[" + b",".join([LITE + b',"startTime":1795000000}'] * 20) + b"]"
litellm.parse(warm, ndjson=False, **KW)  # first-use imports are not the body's cost
out = {}
for name, (parse, body, ndjson) in cases.items():
    assert len(body) <= 16 * 1024 * 1024, name
    Path("/proc/self/clear_refs").write_text("5")
    before = rss()["VmRSS"]
    try:
        parsed = parse(body, ndjson=ndjson, **KW)
        answer = f"{parsed.rows.num_rows} rows"
    except EnvelopeError as exc:
        answer = str(exc)
    out[name] = {"grew": rss()["VmHWM"] - before, "answer": answer}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def peaks() -> dict[str, dict]:
    """Each worst body's peak RSS growth and answer, measured once."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(
    ("case", "answer"),
    [
        ("requests-array", "more than the limit of 100000; split the batch"),
        ("requests-array-of-zeros", "more than the limit of 100000; split the batch"),
        ("requests-ndjson", "more than the limit of 100000; split the batch"),
        ("requests-unknown-field", "JSON objects and arrays"),
        ("requests-ndjson-blank-lines", "2 rows"),  # 5 million blank lines, never split
        ("litellm-array", "more than the limit of 100000; split the batch"),
        ("litellm-ndjson", "more than the limit of 100000; split the batch"),
        ("litellm-metadata", "JSON objects and arrays"),
        ("litellm-messages", "1 rows"),  # 900,000 containers in a field it skips: stored
    ],
)
def test_the_worst_bodies_are_answered_in_bounded_memory(peaks, case, answer):
    """Refused (or stored) before any per-item object is built: a few MiB, where today's
    parse of the same 16 MB took 1.7 GiB (/v1/requests) and 3.7 GiB (/v1/litellm)."""
    got = peaks[case]
    print(f"{case}: peak RSS +{got['grew'] / 2**20:.1f} MiB; {got['answer'][:80]}")
    assert answer in got["answer"]
    assert got["grew"] < 64 * 2**20
