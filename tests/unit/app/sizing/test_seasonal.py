"""Seasonal engine plans (app/sizing/seasonal): a known day/night split, uniform traffic."""

from __future__ import annotations

import math

import numpy as np
import pytest

from app.sizing.seasonal import (
    HourDemand,
    Plan,
    Seasonal,
    below,
    plans,
    share_words,
    window_label,
)

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
    assert (
        "saves 40% of GPU-hours against hourly scaling, at least the 10% threshold "
        "(420 → 252 GPU-hours per week)" in result.verdict
    )


def test_uniform_traffic_means_one_engine():
    d = _demand(20, 20, day_seq=4000, night_seq=4000)
    result = plans(d, kv_capacity=300_000, gpus=2, coverage=0.999, max_context=131_072)
    assert result.savings_vs_hourly == 0
    assert result.verdict.startswith("Run one engine: a seasonal split saves 0% of GPU-hours")
    assert "below the 10% threshold" in result.verdict


def test_a_measured_throughput_caps_replicas():
    d = _demand(1, 1, day_seq=2000, night_seq=2000)  # 0.1 requests/s every hour
    capped = plans(
        d, kv_capacity=300_000, gpus=1, coverage=0.999, max_context=131_072, rps_per_replica=0.04
    )
    assert capped.hourly.replicas == [3] * 24  # ceil(0.1 / 0.04): throughput binds, not KV


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


def test_the_latency_need_raises_the_hours_it_binds_and_the_money_follows():
    # Same day/night traffic as above; the SLO needs 5 replicas at 10:00–14:00 (more than the
    # memory's 3) and 1 at night. By hand: the hour's replicas are the larger of the two.
    kv = 300_000
    d = _demand(20, 10, day_seq=2000, night_seq=30_000)
    latency = [1] * 24
    for h in range(10, 14):
        latency[h] = 5
    result = plans(
        d,
        kv_capacity=kv,
        gpus=2,
        coverage=0.999,
        max_context=131_072,
        latency_need=latency,
        replicas_now=6,
        cost_per_gpu_hour=2.0,
    )
    union_slots = kv // ((30_000 // G + 1) * G)
    memory = [math.ceil((20 if h in DAY else 10) * 1.2 / union_slots) for h in range(24)]
    expected = [max(m, lat) for m, lat in zip(memory, latency, strict=True)]
    assert result.hourly.replicas == expected
    assert result.hourly.binding[11] == "latency" and result.hourly.binding[9] == "memory"
    assert result.hourly.gpu_hours_week == sum(expected) * 2 * 7
    assert result.static.replicas == [5] * 24
    # Today's six replicas, all day: 6 × 2 GPUs × 168 h at $2.
    assert result.now is not None and result.now.gpu_hours_week == 6 * 2 * 168
    assert result.now.cost_week == 6 * 2 * 168 * 2.0
    assert result.now.cost_month == result.now.cost_week * 365.25 / 12 / 7
    # The seasonal split keeps the latency floor in every hour it binds.
    assert result.split is not None
    assert all(n >= lat for n, lat in zip(result.split.replicas, latency, strict=True))


def test_one_replica_at_the_peak_says_why_there_is_nothing_to_scale():
    d = _demand(0.3, 0.1, day_seq=4000, night_seq=4000)
    result = plans(d, kv_capacity=300_000, gpus=1, coverage=0.999, max_context=131_072)
    assert result.hourly.replicas == [1] * 24
    assert set(result.hourly.binding) == {"memory"}
    assert "The busiest hour needs one replica" in result.verdict


def test_a_saving_just_under_the_threshold_never_reads_as_reaching_it():
    # The known split saves exactly 40% (420 → 252): at a 40% threshold it is worth it; at
    # 40.001% it is not, and the words say the unrounded comparison, not "40%" against "40%".
    d = _demand(20, 10, day_seq=2000, night_seq=30_000)
    kw = {"kv_capacity": 300_000, "gpus": 1, "coverage": 0.999, "max_context": 131_072}
    at = plans(d, threshold=0.40, **kw)
    assert at.verdict.startswith("Run two engines") and "at least the 40% threshold" in at.verdict
    over = plans(d, threshold=0.40001, **kw)
    assert over.verdict.startswith("Run one engine")
    assert "saves 40% of GPU-hours against hourly scaling, below the 40.001% threshold" in (
        over.verdict
    )


def _seasonal(hourly_hours: float, split_hours: float | None) -> Seasonal:
    hourly = Plan("hourly", [1] * 24, hourly_hours)
    split = Plan("seasonal", [1] * 24, split_hours) if split_hours is not None else None
    return Seasonal(hourly, hourly, split, 0.0, 0.0, "", 0.10)


@pytest.mark.parametrize(
    ("split", "words"),
    [
        # 1 - 904 / 1000 = 9.6%: rounded to whole percent this read "saves 10%" beside the
        # 10% threshold and "not worth it".
        (904, "not worth it, saves 9.6% of GPU-hours against hourly scaling, below the 10%"),
        (900.1, "not worth it, saves 9.9% of GPU-hours against hourly scaling, below the 10%"),
        (900, "saves 10% of GPU-hours against hourly scaling, at least the 10% threshold"),
        (875, "saves 12.5% of GPU-hours against hourly scaling, at least the 10% threshold"),
    ],
)
def test_weekday_and_weekend_savings_at_the_threshold(split, words):
    from app.sizing.seasonal import by_day_type

    overall = _seasonal(1000, None)
    # Weekdays' split and weekends' hourly plan add up to `split` GPU-hours a week.
    result = by_day_type(overall, _seasonal(800, split - 100), _seasonal(100, None))
    assert result.gpu_hours_week == split
    assert words in result.verdict, result.verdict
    assert ("not worth it" in result.verdict) == (split > 900)


@pytest.mark.parametrize(
    ("saving", "threshold", "said"),
    [
        (0.096, 0.10, ("9.6%", "10%")),
        (0.09999, 0.10, ("9.9%", "10%")),  # rounded down: never up to the threshold
        (1 - 252 / 280, 0.10, ("10%", "10%")),  # 0.0999…98 in floats: exactly 10%
        (0.4, 0.40001, ("40%", "40.001%")),  # more decimals until they differ
        (-0.2, 0.10, ("0%", "10%")),
    ],
)
def test_share_words_compare_as_the_numbers_do(saving, threshold, said):
    assert share_words(saving, threshold) == said
    assert below(saving, threshold) == (said[0] != said[1])
