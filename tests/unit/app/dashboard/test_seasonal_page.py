"""The Seasonal page's reasons in numbers (app/dashboard/pages/seasonal): what holds each
hour's replicas when one engine is advised, and why the advised split beats the others, from
plans the sizing itself makes over known demand."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from app.dashboard.pages.seasonal import (
    Sizing,
    busy_hours,
    hour_runs,
    why_one_engine,
    why_this_split,
)
from app.services.rightsizing import SeasonalReport
from app.sizing.seasonal import HourDemand, plans

G = 256
DAY = range(8, 20)
KV = 300_000


def _demand(day: float, night: float, day_seq: int, night_seq: int) -> HourDemand:
    """1,000 requests per hour; `day` and `night` requests in flight, one length each."""
    hist = {k: np.zeros((24, 200), dtype=np.int64) for k in ("isl", "osl", "seq")}
    in_flight = np.zeros(24)
    for h in range(24):
        seq = day_seq if h in DAY else night_seq
        hist["isl"][h, (seq - 500) // G] = 1000
        hist["osl"][h, 500 // G] = 1000
        hist["seq"][h, seq // G] = 1000
        in_flight[h] = day if h in DAY else night
    zeros = np.zeros(24)
    return HourDemand(in_flight / 10, in_flight / 10, in_flight, zeros, zeros + 1000, hist, G)


def _report(d: HourDemand, latency: list[int] | None = None) -> tuple[SeasonalReport, Sizing]:
    result = plans(
        d, kv_capacity=KV, gpus=1, coverage=0.999, max_context=131_072, latency_need=latency
    )
    assert not isinstance(result, str), result
    t = datetime(2026, 11, 1, tzinfo=UTC)
    report = SeasonalReport("e", t, t, "UTC", 4, 1000, d, result, [], result.verdict)
    return report, Sizing(KV, None, False, 131_072, None, 1, latency or [0] * 24)


def test_one_replica_all_day_says_the_peak_needs_a_fraction_and_the_minimum_is_one():
    r, sizing = _report(_demand(2, 1, 2000, 2000))
    assert r.verdict.startswith("Run one engine")
    (reason,) = why_one_engine(r, sizing)
    # 2 requests in flight × 1.2 headroom over 300,000 // 2,048 = 146 slots: 0.02 of a replica.
    assert "The busiest hour (08:00) needs 0.02 of a replica's KV cache" in reason
    assert "at least one replica up" in reason and "nothing to save" in reason


def test_hours_the_latency_targets_hold_are_named_with_the_replicas():
    r, sizing = _report(_demand(2, 1, 2000, 2000), latency=[1] * 8 + [2] * 12 + [1] * 4)
    items = why_one_engine(r, sizing)
    assert items[0].startswith("12 h (20:00–08:00) need at most 0.01 of a replica's KV cache")
    assert items[1].startswith("12 h (08:00–20:00) are held at 2 replicas by the latency")
    assert "saves 0% of plan (b)'s GPU-hours (252 → 252 a week), under the 10%" in items[-1]


def test_the_advised_split_against_every_other_split():
    r, sizing = _report(_demand(20, 10, 2000, 30_000))
    assert r.verdict.startswith("Run two engines: 08:00–20:00")
    items = why_this_split(r, sizing)
    # 300,000 // 2,048 = 146 requests a replica by day, 300,000 // 30,208 = 9 by night.
    assert items[0].startswith(
        "Each window's bounds come from its own traffic: 08:00–20:00 keeps max_seq_len 2,048, "
        "so a replica holds 146 requests, where 20:00–08:00 needs 30,208 (9 a replica)"
    )
    assert "08:00–20:00 runs 1 replica where plan (b) runs 3 replicas" in items[0]
    assert "splits into two windows of at least 4 h" in items[1]
    assert "252 a week" in items[1] and "the next best" in items[1]


def test_the_reasons_are_left_out_when_the_rebuilt_sizing_disagrees_with_the_plans():
    r, sizing = _report(_demand(20, 10, 2000, 30_000))
    # Latency needs the plans never had: the replicas they give are not the report's.
    other = Sizing(KV, None, False, 131_072, None, 1, [5] * 24)
    assert why_this_split(r, other) == [] and why_one_engine(r, other) == []
    # A smaller KV cache: the plans' own replicas, but another search (another best split).
    smaller = Sizing(KV // 2, None, False, 131_072, None, 1, [0] * 24)
    assert why_this_split(r, smaller) == []
    assert why_this_split(r, sizing)  # with the plans' own inputs it speaks


def test_hour_runs_and_busy_hours():
    assert hour_runs([10, 11, 16, 17]) == "10:00–12:00, 16:00–18:00"
    assert hour_runs([22, 23, 0, 1, 12]) == "22:00–02:00, 12:00–13:00"
    assert hour_runs(list(range(24))) == "all day"
    d = _demand(20, 4, 2000, 2000)  # busy 08:00–20:00, a fifth of the rate at night
    assert busy_hours(d) == tuple(DAY)
