"""Latency and traffic views on hand-made data, checked with numpy; their JSON routes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analytics import latency, traffic, windows
from app.analytics.filters import Filter
from app.storage.database import Database
from tests.fixtures import BASE_TIME, record, store

# Three hours of traffic, 20 requests an hour; TTFT grows 0.5 ms per input token.
RECS = []
for k in range(60):
    isl = 100 * (k + 1)
    rec = record(
        k,
        isl=isl,
        osl=11,
        ttft_ms=20.0 + 0.5 * isl,
        itl_ms=10.0 + k % 3,
        e2e_ms=20.0 + 0.5 * isl + 10 * (10.0 + k % 3),
    )
    rec["started_at"] = (BASE_TIME + timedelta(minutes=3 * k)).isoformat()
    if k < 4:
        rec["token_gaps_ms"] = [float(g) for g in range(1, 11)]  # gap at position p is p ms
    RECS.append(rec)
RECS[5].update(ttft_ms=None, itl_ms=None, e2e_ms=None)


@pytest.fixture
def db(tmp_path):
    with Database(tmp_path / "l.duckdb").open() as database:
        store(database, RECS)
        yield database


def test_bucket_choice():
    t = BASE_TIME
    assert windows.bucket_for(t, t + timedelta(hours=6)) == "5m"
    assert windows.bucket_for(t, t + timedelta(days=7)) == "1h"
    assert windows.bucket_for(t, t + timedelta(days=30)) == "1d"


def test_trend_per_hour_matches_numpy(db):
    frame = latency.trend(db.cursor(), Filter(), "1h", "UTC")
    assert list(frame["requests"]) == [20, 20, 20]
    first_hour = [r["ttft_ms"] for r in RECS[:20] if r.get("ttft_ms") is not None]
    assert frame["ttft_ms_p90"][0] == pytest.approx(np.percentile(first_hour, 90))
    assert frame["bucket"][1].to_pydatetime() == BASE_TIME + timedelta(hours=1)


def test_ttft_slope_is_the_per_token_cost(db):
    frame, slope = latency.ttft_vs_isl(db.cursor(), Filter())
    assert slope == pytest.approx(500.0)  # 0.5 ms per token = 500 ms per 1k tokens
    assert frame["requests"].sum() == 59  # the null TTFT is left out


def test_itl_by_position_from_token_gaps(db):
    frame = latency.itl_by_position(db.cursor(), Filter())
    # positions 1..10 of 4 requests; bins start at 1, 2, 4, 8
    assert list(frame["position_from"]) == [1, 2, 4, 8]
    assert list(frame["gaps"]) == [4, 8, 16, 12]
    assert frame["itl_p50"].tolist() == [1.0, 2.5, 5.5, 9.0]


def test_e2e_distribution_counts_every_request_with_a_time(db):
    frame = latency.e2e_distribution(db.cursor(), Filter())
    e2e = [r["e2e_ms"] for r in RECS if r.get("e2e_ms") is not None]
    edges = np.asarray(latency.E2E_EDGES_MS)
    expected = np.bincount(np.searchsorted(edges, e2e, side="right") - 1, minlength=len(edges))
    assert frame["requests"].tolist() == expected.tolist()


def test_traffic_rates_and_weekday_hour_in_a_time_zone(db):
    frame = traffic.rates(db.cursor(), Filter(), "1h", "UTC")
    assert frame["requests_per_s"].tolist() == pytest.approx([20 / 3600] * 3)
    assert frame["input_tokens"][0] == sum(r["isl"] for r in RECS[:20])
    utc = traffic.hour_weekday(db.cursor(), Filter(), "UTC")
    tokyo = traffic.hour_weekday(db.cursor(), Filter(), "Asia/Tokyo")
    friday = BASE_TIME.weekday()  # 2026-11-20 is a Friday
    assert utc.sum() == 60 and utc[friday, 12:15].tolist() == [20, 20, 20]
    assert tokyo[friday, 21:24].tolist() == [20, 20, 20]  # UTC+9


def test_empty_window_gives_empty_views(db):
    flt = Filter(start=datetime(2020, 1, 1, tzinfo=UTC), end=datetime(2020, 1, 2, tzinfo=UTC))
    cur = db.cursor()
    assert latency.trend(cur, flt, "1h", "UTC").empty
    frame, slope = latency.ttft_vs_isl(cur, flt)
    assert frame.empty and slope is None
    assert latency.itl_by_position(cur, flt).empty
    assert latency.e2e_distribution(cur, flt)["requests"].sum() == 0
    assert traffic.hour_weekday(cur, flt, "UTC").sum() == 0


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
