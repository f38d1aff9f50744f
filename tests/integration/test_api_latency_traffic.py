"""The latency and traffic JSON routes over HTTP, on the hand-made data the unit tests use."""

from __future__ import annotations

import pytest

from tests.support.datasets import latency_records

RECS = latency_records()


def test_latency_and_traffic_routes(live, ingest):
    assert ingest.post("/v1/requests", json=RECS).json()["accepted"] == 60
    live.settle()  # acknowledged rows reach the table within moments (the journal moves)
    with live.client() as c:
        trend = c.get("/api/latency/trend").json()
        assert trend["bucket"] == "5m" and sum(p["requests"] for p in trend["points"]) == 60
        t = c.get("/api/latency/ttft-vs-isl").json()
        assert t["slope_ms_per_1k_tokens"] == pytest.approx(500.0)
        pos = c.get("/api/latency/itl-by-position").json()
        assert [b["position_from"] for b in pos["bins"]] == [1, 2, 4, 8]
        e2e = c.get("/api/latency/e2e").json()
        assert e2e["total"] == 59 and len(e2e["counts"]) == len(e2e["edges_ms"])
        tr = c.get("/api/traffic", params={"model": "llama-3.1-8b-instruct"}).json()
        assert tr["tz"] == "UTC" and sum(map(sum, tr["weekday_hour"])) == 60
        assert len(tr["weekday_hour"]) == 7 and len(tr["weekday_hour"][0]) == 24
        bad = c.get("/api/latency/trend", params={"end": "yesterday-ish"})
        assert bad.status_code == 422 and "end" in bad.json()["detail"]
        empty = c.get(
            "/api/latency/trend",
            params={"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"},
        ).json()
        assert empty["points"] == []
