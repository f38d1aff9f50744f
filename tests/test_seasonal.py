"""Seasonal engine plans: a known day/night split, uniform traffic, and DST-correct hours."""

from __future__ import annotations

import math
from datetime import UTC, datetime

import numpy as np

from app.analytics.filters import Filter
from app.analytics.seasonal import hourly_load, local_hour_seconds
from app.sizing.seasonal import HourDemand, plans, window_label
from tests.fixtures import record

G = 256
DAY = range(8, 20)


def _demand(day_in_flight: float, night_in_flight: float, day_seq: int, night_seq: int):
    """1,000 requests per hour; chat by day (08:00-20:00), long batch jobs by night."""
    hist = {k: np.zeros((24, 200), dtype=np.int64) for k in ("isl", "osl", "seq")}
    in_flight = np.zeros(24)
    for h in range(24):
        day = h in DAY
        seq = day_seq if day else night_seq
        hist["isl"][h, (seq - 500) // G] = 1000
        hist["osl"][h, 500 // G] = 1000
        hist["seq"][h, seq // G] = 1000
        in_flight[h] = day_in_flight if day else night_in_flight
    zeros = np.zeros(24)
    return HourDemand(in_flight / 10, in_flight / 10, in_flight, zeros, zeros + 1000, hist, G)


def test_the_search_finds_the_known_split_and_its_savings():
    kv = 300_000
    d = _demand(20, 10, day_seq=2000, night_seq=30_000)
    result = plans(d, kv_capacity=kv, gpus=1, coverage=0.999, max_context=131_072)
    # By hand: the bucket holding each quantile, rounded up to the next multiple of 256.
    night_seq = (30_000 // G + 1) * G  # 30,208
    day_seq = max((2000 // G + 1) * G, ((2000 - 500) // G + 1) * G + G)  # 2,048
    union_slots, day_slots, night_slots = kv // night_seq, kv // day_seq, kv // night_seq
    day_union = math.ceil(20 * 1.2 / union_slots)  # 3
    night_union = math.ceil(10 * 1.2 / union_slots)  # 2
    hourly = (12 * day_union + 12 * night_union) * 7
    seasonal = (12 * math.ceil(20 * 1.2 / day_slots) + 12 * math.ceil(12 / night_slots)) * 7
    static = max(day_union, night_union) * 24 * 7
    assert result.hourly.gpu_hours_week == hourly == 420
    assert result.static.gpu_hours_week == static == 504
    assert result.split is not None and result.split.gpu_hours_week == seasonal == 252
    windows = {window_label(c.hours): c.max_seq_len for c in result.split.configs}
    assert windows == {"08:00–20:00": day_seq, "20:00–08:00": night_seq}
    assert result.savings_vs_hourly == 1 - seasonal / hourly
    assert result.savings_vs_static == 1 - seasonal / static
    assert result.verdict.startswith("Run two engines: 08:00–20:00 with max_seq_len 2,048")
    assert "saves 40% GPU-hours per week against hourly scaling (420 → 252)" in result.verdict


def test_uniform_traffic_means_one_engine():
    d = _demand(20, 20, day_seq=4000, night_seq=4000)
    result = plans(d, kv_capacity=300_000, gpus=2, coverage=0.999, max_context=131_072)
    assert result.savings_vs_hourly == 0
    assert result.verdict.startswith("Run one engine: seasonal profiles would save 0%")
    assert "threshold 10%" in result.verdict


def test_a_measured_throughput_caps_replicas():
    d = _demand(1, 1, day_seq=2000, night_seq=2000)  # 0.1 requests/s every hour
    capped = plans(
        d, kv_capacity=300_000, gpus=1, coverage=0.999, max_context=131_072, rps_per_replica=0.04
    )
    assert capped.hourly.replicas == [3] * 24  # ceil(0.1 / 0.04): throughput binds, not KV


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


def test_weekday_and_weekend_configurations_as_an_option():
    from app.sizing.seasonal import by_day_type

    kv = 300_000
    week = _demand(20, 20, day_seq=2000, night_seq=2000)  # chat all day on weekdays
    weekend = _demand(10, 10, day_seq=30_000, night_seq=30_000)  # batch jobs all weekend
    # The week as a whole, as the search sees it without the option: chat 5/7, batch 2/7.
    hist = {k: week.hist[k] * 5 + weekend.hist[k] * 2 for k in week.hist}
    whole = HourDemand(
        week.peak_rate, week.mean_rate, week.in_flight, week.kv_tokens, week.mean_footprint, hist, G
    )
    kw = {"kv_capacity": kv, "gpus": 1, "coverage": 0.999, "max_context": 131_072}
    overall = plans(whole, **kw)
    result = by_day_type(overall, plans(week, days=5, **kw), plans(weekend, days=2, **kw))
    # By hand: one configuration for all days holds 9 full 30,208-token requests per replica,
    # so the 20 chat requests in flight x 1.2 need 3 replicas every hour (7 x 24 x 3 = 504);
    # a weekday configuration for 2,048-token chat needs 1, the weekend one ceil(12 / 9) = 2.
    assert overall.hourly.gpu_hours_week == 504
    assert result.gpu_hours_week == 24 * 1 * 5 + 24 * 2 * 2 == 216
    assert result.savings_vs_hourly == 1 - 216 / 504
    assert result.verdict.startswith("Weekday and weekend configurations (weekdays")


def test_no_plan_when_a_replica_cannot_hold_a_request_or_latencies_are_missing():
    d = _demand(20, 10, day_seq=2000, night_seq=30_000)
    tiny = plans(d, kv_capacity=20_000, gpus=1, coverage=0.999, max_context=131_072)
    assert isinstance(tiny, str) and "cannot hold one request of max_seq_len 30,208" in tiny
    blind = _demand(0, 0, day_seq=2000, night_seq=2000)
    missing = plans(blind, kv_capacity=300_000, gpus=1, coverage=0.999, max_context=131_072)
    assert isinstance(missing, str) and "e2e_ms" in missing
    coarse = plans(d, kv_capacity=300_000, gpus=1, coverage=0.999, max_context=300)
    assert isinstance(coarse, str) and "too coarse" in coarse


def test_quarter_hour_zones_count_real_seconds():
    start, end = datetime(2026, 11, 20, 0, tzinfo=UTC), datetime(2026, 11, 20, 2, tzinfo=UTC)
    seconds = local_hour_seconds(start, end, "Asia/Kolkata")  # UTC+05:30
    assert seconds == {("2026-11-20", 5): 1800, ("2026-11-20", 6): 3600, ("2026-11-20", 7): 1800}
