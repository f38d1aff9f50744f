"""The load routes over HTTP, on the overlapping requests whose counts are worked out by hand
(tests/support/load_data.py)."""

from __future__ import annotations

import pytest

from tests.support.load_data import WINDOW, load_records

RECS = load_records()
PARAMS = {"start": WINDOW[0].isoformat(), "end": WINDOW[1].isoformat()}


def test_load_and_latency_by_inflight_routes(live, ingest):
    assert ingest.post("/v1/requests", json=RECS).json()["accepted"] == len(RECS)
    live.settle()
    with live.client() as c:
        series = c.get("/api/load", params=PARAMS).json()
        assert series["bucket"] == "5m" and series["tz"] == "UTC"
        chat = [p for p in series["points"] if p["engine"] == "chat-8b"]
        assert [p["inflight_mean"] for p in chat] == pytest.approx([430 / 300, 230 / 300])
        assert [p["inflight_max"] for p in chat] == [3, 1]
        hourly = c.get("/api/load", params=PARAMS | {"bucket": "1h"}).json()
        assert hourly["bucket"] == "1h" and len(hourly["points"]) == 2  # one hour, 2 engines

        levels = c.get("/api/latency/inflight", params=PARAMS).json()["levels"]
        chat = [lv for lv in levels if lv["engine"] == "chat-8b"]
        assert [(lv["inflight_lo"], lv["inflight_hi"], lv["requests"]) for lv in chat] == [
            (1, 1, 1),
            (2, 2, 2),
            (3, 4, 2),
        ]
        assert chat[2]["ttft_p50"] == pytest.approx(200.0) and chat[2]["isl_from"] is None
        team_b = c.get("/api/latency/inflight", params=PARAMS | {"tenant": "team-b"}).json()
        assert [(lv["inflight_lo"], lv["requests"]) for lv in team_b["levels"]] == [(2, 1)]
        split = c.get("/api/latency/inflight", params=PARAMS | {"by_isl": "true"}).json()
        assert {lv["isl_from"] for lv in split["levels"]} >= {128, 2048}
        pooled = c.get("/api/latency/inflight", params=PARAMS | {"per_engine": "false"}).json()
        assert [lv["engine"] for lv in pooled["levels"]] == [None, None, None]

        too_fine = c.get("/api/load", params={"start": "2020-01-01T00:00:00Z", "bucket": "5m"})
        assert too_fine.status_code == 422 and "bucket" in too_fine.json()["detail"]
        bad = c.get("/api/load", params={"bucket": "2m"})
        assert bad.status_code == 422
        empty = {"start": "2020-01-01T00:00:00Z", "end": "2020-01-02T00:00:00Z"}
        assert c.get("/api/load", params=empty).json()["points"] == []
        assert c.get("/api/latency/inflight", params=empty).json()["levels"] == []
