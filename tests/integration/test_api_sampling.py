"""Sampled records over HTTP: shipped with sample_rate (and a bad one rejected by field), the
analytics APIs count what they stand for and say so under `sampling`; unsampled windows
answer without that key."""

from __future__ import annotations

import pytest

from tests.support.records import batch, record

# 40 records of the fixtures' hour; half of them each stand for 10 requests.
SAMPLED = {"start": "2026-11-20T12:00:00Z", "end": "2026-11-20T13:00:00Z"}
PLAIN = {"start": "2026-11-21T12:00:00Z", "end": "2026-11-21T13:00:00Z"}


@pytest.fixture
def shipped(live, ingest):
    recs = [{**r, "sample_rate": 0.1} if i % 2 else r for i, r in enumerate(batch(40))]
    recs.append(record(99, sample_rate=0))  # invalid: quarantined, the rest stored
    recs.append(record(98, "u", started_at="2026-11-21T12:30:00Z"))
    body = ingest.post("/v1/requests", json=recs).json()
    assert body["accepted"] == 41 and body["rejected"] == 1
    (error,) = body["errors"]
    assert error["index"] == 40 and error["field"] == "sample_rate"
    assert "0 < p <= 1" in error["message"]
    live.settle()
    return recs


def test_the_analytics_apis_count_what_sampled_rows_stand_for(live, shipped):
    with live.client() as c:
        heat = c.get("/api/heatmap", params=SAMPLED).json()
        assert heat["total"] == 20 + 20 * 10
        sampling = heat["sampling"]
        assert sampling["rows"] == 40 and sampling["estimated_requests"] == 220
        assert (sampling["min_rate"], sampling["max_rate"]) == (0.1, 1.0)
        assert sampling["note"] == "estimated from a 10%–100% sample of 220 requests (40 stored)"
        shapes = c.get("/api/shapes", params=SAMPLED).json()
        assert shapes["total"] == 220 and shapes["sampling"] == sampling
        quantiles = c.get("/api/quantiles", params=SAMPLED).json()
        assert quantiles["sampling"] == sampling and quantiles["isl"]["max"] == 139
        trend = c.get("/api/latency/trend", params=SAMPLED).json()
        assert sum(p["requests"] for p in trend["points"]) == 220 and trend["sampling"] == sampling
        traffic = c.get("/api/traffic", params=SAMPLED).json()
        assert sum(p["requests"] for p in traffic["points"]) == 220
        assert traffic["sampling"] == sampling
        for path in ("/api/heatmap", "/api/shapes", "/api/quantiles", "/api/traffic"):
            plain = c.get(path, params=PLAIN).json()
            assert "sampling" not in plain, path
        assert c.get("/api/heatmap", params=PLAIN).json()["total"] == 1
