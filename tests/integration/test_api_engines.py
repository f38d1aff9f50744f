"""/api/engines: profiles (admin token to write) and the recommendation, over real HTTP."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.records import record

PROFILE = {
    "model": "llama-3.1-8b",
    "gpu": "L40S",
    "framework": "vllm",
    "max_input_len": 4096,
    "max_seq_len": 8192,
    "max_batch_size": 64,
}


@pytest.fixture(scope="module")
def traffic(module_live):
    """2,000 chat-8b requests with ISL 1..2000 (hand-made, so the quantiles are known), shipped
    once into the server the recommendation tests share (the profile tests each have their own);
    returns that server."""
    recs = [record(i, "e", isl=i + 1, osl=100) for i in range(2000)]
    with module_live.client(module_live.token("ingest")) as ingest:
        for k in range(0, 2000, 500):
            assert ingest.post("/v1/requests", json=recs[k : k + 500]).json()["accepted"] == 500
    module_live.settle()  # acknowledged rows reach the table within moments (the journal moves)
    return module_live


def test_profiles_need_an_admin_token_and_name_their_errors(live):
    admin, ingest_only = live.token("admin"), live.token("ingest")
    with live.client() as anon:
        assert anon.put("/api/engines/chat-8b", json=PROFILE).status_code == 401
        missing = anon.get("/api/engines/chat-8b")
        assert missing.status_code == 404 and "has no profile" in missing.json()["detail"]
    with live.client(ingest_only) as c:
        assert c.put("/api/engines/chat-8b", json=PROFILE).status_code == 403
    with live.client(admin) as c:
        bad = c.put("/api/engines/chat-8b", json=PROFILE | {"gpu": "H1000"})
        assert bad.status_code == 422 and "unknown gpu 'H1000'" in bad.text
        ok = c.put("/api/engines/chat-8b", json=PROFILE)
        assert ok.status_code == 200 and ok.json()["profile"]["gpu"] == "L40S"
        assert [e["name"] for e in c.get("/api/engines").json()] == ["chat-8b"]
        log = "INFO [kv_cache_utils.py] GPU KV cache size: 123,456 tokens"
        measured = c.put("/api/engines/chat-8b", json=PROFILE | {"startup_log": log}).json()
        assert measured["profile"]["measured_kv_tokens"] == 123_456
        nolog = c.put("/api/engines/chat-8b", json=PROFILE | {"startup_log": "hello"})
        assert nolog.status_code == 422 and "startup_log" in nolog.json()["detail"]
        assert c.delete("/api/engines/chat-8b").status_code == 204
        assert c.delete("/api/engines/chat-8b").status_code == 404


def test_recommendation_from_the_traffic(traffic):
    live = traffic
    with live.client(live.token("admin")) as c:
        c.put("/api/engines/chat-8b", json=PROFILE)
        params = {"start": "2026-11-20T00:00:00Z", "end": "2026-11-21T00:00:00Z"}
        r = c.get("/api/engines/chat-8b/recommendation", params=params).json()
        tight = c.get(
            "/api/engines/chat-8b/recommendation",
            params=params | {"coverage": 0.9, "granularity": 1},
        ).json()
    isl = np.arange(1, 2001)
    q = np.quantile(isl, 0.999)  # DuckDB's quantile_cont interpolates like numpy's default
    assert r["status"] in {"rebuild-suggested", "fits"} and r["requests"] == 2000
    assert r["status_label"] and r["status_reason"]
    assert r["recommended"]["max_input_len"] == int(np.ceil(q / 256) * 256) == 2048
    # max_seq_len: p99.9 of ISL + OSL is 2,098 -> 2,304; never below 2,048 + 256
    assert r["recommended"]["max_seq_len"] == 2304
    assert r["rejected"] == {"current": 0, "recommended": 0}
    assert r["concurrency"]["after"]["worst"] > r["concurrency"]["now"]["worst"]
    assert r["commands"]["vllm"].startswith("vllm serve meta-llama/Llama-3.1-8B-Instruct")
    assert "--max-model-len 2304" in r["commands"]["vllm"]
    assert "Built for 4,096-token prompts" in r["verdict"]
    fp8 = next(w for w in r["what_if"] if w["label"] == "FP8 KV cache")
    assert fp8["possible"] and "quality check" in fp8["caveat"]
    assert not next(w for w in r["what_if"] if w["label"] == "FP4 weights")["possible"]
    # a lower coverage, unrounded: the requests above the p90 bounds would be refused
    max_in = int(np.ceil(np.quantile(isl, 0.9)))
    max_seq = max(int(np.ceil(np.quantile(isl + 100, 0.9))), max_in + 1)
    assert tight["recommended"]["max_input_len"] == max_in
    assert tight["recommended"]["max_seq_len"] == max_seq
    refused = int(((isl > max_in) | (isl + 100 > max_seq)).sum())
    assert tight["rejected"]["recommended"] == refused == 199


def test_recommendation_errors_are_clear(traffic):
    live = traffic
    with live.client(live.token("admin")) as c:
        assert c.get("/api/engines/nope/recommendation").status_code == 404
        c.put("/api/engines/chat-8b", json=PROFILE)
        empty = c.get(
            "/api/engines/chat-8b/recommendation",
            params={"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"},
        ).json()
        assert empty["status"] == "no-data" and "Not enough data" in empty["verdict"]
        bad = c.get("/api/engines/chat-8b/recommendation", params={"coverage": 2})
        assert bad.status_code == 422 and "coverage" in bad.json()["detail"]
        huge = PROFILE | {"model": "llama-3.1-405b", "gpu": "L4"}
        c.put("/api/engines/big", json=huge)
        verdict = c.get("/api/engines/big/recommendation").json()
        assert verdict["status"] == "does-not-fit" and "does not fit" in verdict["verdict"]


def test_a_stored_profile_that_no_longer_validates_does_not_sink_the_list(live, caplog):
    """E.g. after a catalog change: the others are listed, the log names the one to re-save."""
    from datetime import UTC, datetime

    from app.storage.engines import put_profile

    now = datetime(2026, 11, 20, tzinfo=UTC)
    put_profile(live.db.cursor(), "good", {"model": "llama-3.1-8b", "gpu": "H100"}, now)
    put_profile(live.db.cursor(), "stale", {"model": "no-such-model", "gpu": "H100"}, now)
    with caplog.at_level("WARNING", logger="tokenshape.api"), live.client() as c:
        answer = c.get("/api/engines")
    assert answer.status_code == 200
    assert [e["name"] for e in answer.json()] == ["good"]
    assert "'stale'" in caplog.text and "re-save it" in caplog.text


def test_numbers_beyond_physical_sense_are_refused_naming_the_field_and_bound(live):
    """1e308 GiB per GPU was once stored, then sank every engine's page (issue 22)."""
    with live.client(live.token("admin")) as c:
        huge = c.put("/api/engines/x", json=PROFILE | {"gpu_memory_gib": 1e308})
        assert huge.status_code == 422
        assert "gpu_memory_gib" in huge.text and "4096" in huge.text
        wide = c.put(
            "/api/engines/x", json=PROFILE | {"tensor_parallel": 64, "pipeline_parallel": 64}
        )
        assert wide.status_code == 422 and "tensor_parallel × pipeline_parallel" in wide.text
        nan = c.put(
            "/api/engines/x",
            content=b'{"model": "llama-3.1-8b", "gpu": "H100", "memory_fraction": NaN}',
            headers={"Content-Type": "application/json"},
        )
        assert nan.status_code == 422 and "memory_fraction" in nan.text
        assert c.get("/api/engines/x").status_code == 404  # nothing was stored


def test_engine_names_are_bounded(live):
    """As ingest's names, with the same words as the page and `tokenshape engine set`."""
    with live.client(live.token("admin")) as c:
        ok = c.put("/api/engines/api.example.com", json=PROFILE)  # a hostname: dots are fine
        assert ok.status_code == 200 and ok.json()["name"] == "api.example.com"
        for name, words in (
            ("%2E%2E", "engine name: '..' is not a name"),
            ("a%00b", "engine name: holds a control character"),
            ("x" * 257, "engine name: 257 characters; at most 256"),
        ):
            bad = c.put(f"/api/engines/{name}", json=PROFILE)
            assert bad.status_code == 422 and bad.json()["detail"].startswith(words), bad.text
