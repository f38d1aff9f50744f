"""GET /api/goodput over HTTP: an engine's own targets, the fleet's for the rest, the causes of
the misses, and the answer when no target is set."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.records import record
from tests.support.server import LiveServer, serve, server_settings

PARAMS = {"start": "2026-11-20T11:00:00Z", "end": "2026-11-20T13:00:00Z"}
PROFILE = {"model": "llama-3.1-8b", "gpu": "L40S", "framework": "vllm", "max_num_tokens": 8192}


def _records() -> list[dict]:
    out = []
    for k in range(40):  # chat-8b, ISL 1,000: 30 of 40 wait 2 s for a first token
        ttft = 2000.0 if k % 4 else 60.0
        out.append(
            record(k, "c", engine="chat-8b", isl=1000, osl=100, ttft_ms=ttft, e2e_ms=ttft + 1500)
        )
    for k in range(10):  # another tenant, no engine: the fleet's target, all good
        out.append(record(k, "n", engine=None, tenant="team-b", isl=200, osl=50, ttft_ms=90.0))
    out.append(record(99, "n", engine=None, tenant="team-b", ttft_ms=None))  # not measured
    return out


@pytest.fixture
def fleet_live(db_path) -> Iterator[LiveServer]:
    """A server whose settings set a fleet TTFT target of 1 s at p90."""
    yield from serve(server_settings(db_path, slo_ttft_ms=1000.0, slo_percentile=90.0), wait=False)


def test_goodput_route_counts_targets_and_causes(fleet_live):
    live = fleet_live
    admin = {"Authorization": f"Bearer {live.token('admin')}"}
    with live.client(live.token("ingest")) as c:
        assert c.post("/v1/requests", json=_records()).json()["accepted"] == 51
        own = PROFILE | {"slo_ttft_ms": 500, "slo_itl_ms": 50}
        assert c.put("/api/engines/chat-8b", json=own, headers=admin).status_code == 200
    live.settle()
    with live.client() as c:
        body = c.get("/api/goodput", params=PARAMS).json()
        assert body["exact"] is True and body["set"] is True and body["bucket"] == "5m"
        assert body["slo"]["engines"]["chat-8b"]["words"] == "TTFT p90 ≤ 500 ms, ITL p90 ≤ 50 ms"
        assert body["slo"]["default"]["source"] == "fleet"
        engines = {e["engine"]: e for e in body["by_engine"]}
        chat = engines["chat-8b"]
        assert (chat["good"], chat["missed"], chat["goodput"], chat["met"]) == (10, 30, 0.25, False)
        assert chat["causes"][0]["kind"] == "queueing"
        assert "predicted prefill at ISL 1k: queueing" in chat["causes"][0]["example"]
        none = engines[None]
        assert (none["good"], none["not_measured"], none["met"]) == (10, 1, True)
        tenants = {t["tenant"]: t for t in body["by_tenant"]}
        assert tenants["team-a"]["goodput"] == 0.25 and tenants["team-b"]["goodput"] == 1.0
        assert sum(p["requests"] for p in body["over_time"]) == 51
        (miss,) = body["misses"]
        assert (
            miss["shape"] == "ISL 512–1k × OSL 64–128" and miss["excess_missed"] == 26
        )  # 30 - 10% of 40
        cell = next(x for x in body["by_cell"] if x["cause"])
        assert cell["cause"] == "chat-8b: queueing"
        half = c.get("/api/goodput", params=PARAMS | {"bins": "log2half"}).json()
        assert half["bins"] == "log2half" and half["misses"][0]["isl_from"] == 768
        team = c.get("/api/goodput", params=PARAMS | {"tenant": "team-b"}).json()
        assert team["totals"]["goodput"] == 1.0 and team["misses"] == []
        assert c.get("/api/goodput", params={"bins": "linear"}).status_code == 422
        assert "/api/goodput" in c.get("/openapi.json").json()["paths"]


def test_goodput_route_without_any_target_says_how_to_set_one(live, ingest):
    assert ingest.post("/v1/requests", json=_records()).json()["accepted"] == 51
    live.settle()
    with live.client() as c:
        body = c.get("/api/goodput", params=PARAMS).json()
    assert body["set"] is False and body["by_engine"] == [] and body["totals"] is None
    assert "TOKENSHAPE_SLO_TTFT_MS" in body["how_to_set"]
