"""Seasonal load over ingested traffic: DST-correct local hours, and the seasonal route."""

from __future__ import annotations

from datetime import UTC, datetime

from app.analytics.filters import Filter
from app.analytics.seasonal import hourly_load, local_hour_seconds
from tests.support.records import record

G = 256  # token granularity of the hourly histograms


def test_hours_are_local_and_dst_correct(live, ingest):
    # Europe/Berlin leaves summer time at 03:00 on Sunday 2026-10-25: local 02:00-03:00 happens
    # twice, at 00:00Z (CEST) and 01:00Z (CET).
    start, end = datetime(2026, 10, 24, 22, tzinfo=UTC), datetime(2026, 10, 25, 4, tzinfo=UTC)
    seconds = local_hour_seconds(start, end, "Europe/Berlin")
    assert seconds[("2026-10-25", 2)] == 7200 and seconds[("2026-10-25", 0)] == 3600
    assert sum(seconds.values()) == 6 * 3600
    times = ["2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"]
    recs = [record(i, "dst", started_at=t, e2e_ms=2000.0) for i, t in enumerate(times)]
    assert ingest.post("/v1/requests", json=recs).json()["accepted"] == 3
    load = hourly_load(live.db.cursor(), Filter(start=start, end=end), "Europe/Berlin", G)
    per_hour = {h: n for _, h, n, *_ in load["cells"]}
    assert per_hour == {2: 2, 3: 1}  # two requests in the repeated hour, one at 03:xx CET
    assert load["count"][2] == 2 and load["hist"]["isl"].sum() == 3


def test_seasonal_route_and_its_errors(live, ingest):
    admin = live.token("admin")
    profile = {"model": "llama-3.1-8b", "gpu": "H100", "max_input_len": 4096, "max_seq_len": 8192}
    # Four weeks ending 2026-11-22T12:00Z, a request every two hours on each day.
    recs = [
        record(i, "s", started_at=f"2026-11-{1 + i // 12:02d}T{(i % 12) * 2:02d}:10:00Z")
        for i in range(21 * 12)
    ]
    assert ingest.post("/v1/requests", json=recs).json()["accepted"] == len(recs)
    with live.client(admin) as c:
        assert c.get("/api/engines/chat-8b/seasonal").status_code == 404
        c.put("/api/engines/chat-8b", json=profile)
        bad = c.get("/api/engines/chat-8b/seasonal", params={"weeks": 0})
        assert bad.status_code == 422 and "weeks" in bad.json()["detail"]
        body = c.get("/api/engines/chat-8b/seasonal", params={"weeks": 4}).json()
    assert body["requests"] == live.scalar(
        "SELECT count(*) FROM requests WHERE started_at >= ? AND started_at < ?",
        [body["window"]["start"], body["window"]["end"]],
    )
    assert len(body["hours"]) == 24 and body["tz"] == "UTC"
    assert [h["hour"] for h in body["hours"] if h["peak_rate"] > 0] == list(range(0, 24, 2))
    plans_ = body["plans"]
    assert plans_["static"]["gpu_hours_week"] == 168  # one H100 replica, all week
    assert body["verdict"].startswith("Run one engine")
