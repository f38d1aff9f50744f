"""`tokenshape goodput` as a user runs it, over a database of hand-made requests."""

from __future__ import annotations

import json

from tests.support.cli import cli
from tests.support.records import record, store


def test_goodput_prints_engines_shapes_and_json(tmp_path, fresh_db):
    path = tmp_path / "g.duckdb"
    with fresh_db(path) as db:
        recs = [
            record(
                k,
                engine="chat-8b",
                isl=1000,
                osl=100,
                ttft_ms=2000.0 if k % 4 else 60.0,
                e2e_ms=4000.0,
            )
            for k in range(40)
        ]
        store(db, recs + [record(50, engine="code-7b", ttft_ms=100.0)])
    window = ["--start", "2026-11-20T11:00", "--end", "2026-11-20T13:00"]
    env = {"TOKENSHAPE_SLO_TTFT_MS": "500", "TOKENSHAPE_SLO_PERCENTILE": "90"}
    text = cli("goodput", "--db", str(path), *window, env=env).stdout
    assert "all: goodput 26.8% of 41 requests with an SLO (target 90.0%)" in text
    assert "chat-8b: 25.0% of requests within TTFT p90 ≤ 500 ms (needs 90%): missed" in text
    assert "request shapes that miss:" in text
    assert "from the data alone (no engine profile)" in text  # no profile: no model
    out = json.loads(
        cli("goodput", "--db", str(path), *window, "--engine", "code-7b", "--json", env=env).stdout
    )
    assert [e["engine"] for e in out["by_engine"]] == ["code-7b"] and out["misses"] == []
    unset = cli("goodput", "--db", str(path), *window).stdout
    assert "No latency target is set" in unset and "TOKENSHAPE_SLO_TTFT_MS" in unset
    bad = cli("goodput", "--db", str(path), "--start", "yesterday", check=False)
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr
