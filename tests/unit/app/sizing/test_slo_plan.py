"""Tail latencies and replicas under an SLO (app/sizing/slo_plan) on step models whose answers
are known in closed form."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from app.sizing.perf import Shape, Step, at_rate
from app.sizing.slo import Slo
from app.sizing.slo_plan import (
    best_batch,
    best_step_tokens,
    concurrency_quantile,
    replicas_for_slo,
    tail,
)


def linear(isl: int, osl: int, batch: int) -> Step:
    """Prefill 0.01 ms a token; ITL 10 ms + 0.5 ms per request decoding."""
    return Step(isl * 0.01, 10 + 0.5 * batch, True)


def flat_itl(isl: int, osl: int, batch: int) -> Step:
    """Prefill 0.01 ms a token; ITL 20 ms whatever the batch."""
    return Step(isl * 0.01, 20.0, True)


def ttft_q_closed_form(rate: float, service_s: float, q: float) -> float:
    """M/D/1 (one prompt size): prefill + the wait's q-quantile, P(W > t) = ρ exp(−t ρ / E[W])."""
    rho = rate * service_s
    if rho >= 1:
        return math.inf
    mean_wait = 1000 * rate * service_s**2 / (2 * (1 - rho))
    wait = 0.0 if rho <= 1 - q else mean_wait / rho * math.log(rho / (1 - q))
    return 1000 * service_s + wait


def test_the_ttft_percentile_is_the_wait_mixture_in_closed_form():
    shapes = [Shape(10_000, 1)]
    for rate in (1.0, 3.0, 6.0, 9.0):
        p = at_rate(flat_itl, shapes, rate, max_concurrency=64, step_tokens=16_384)
        t = tail(flat_itl, p, 0.95, max_running=64)
        # With others in flight, an arrival also waits half a decode step and shares its one
        # chunk's step with their decodes: 20 / 2 + 20 ms (perf.py's fixed term).
        fixed = 30.0 if p.concurrency > 1 else 0.0
        expected = ttft_q_closed_form(rate, 0.1, 0.95) + fixed
        assert t.ttft_ms == pytest.approx(expected, abs=0.01)


def test_the_least_replicas_meeting_a_ttft_target_match_the_hand_count():
    # 40 requests/s of 10,000-token prompts (0.1 s of prefill each), TTFT p95 <= 200 ms:
    # count up by hand with the closed form.
    # (At 40/18 requests/s each, fewer than one is in flight: no fixed term.)
    by_hand = next(r for r in range(1, 100) if ttft_q_closed_form(40 / r, 0.1, 0.95) <= 200)
    assert by_hand == 18
    need = replicas_for_slo(
        flat_itl,
        [Shape(10_000, 1)],
        40.0,
        Slo(ttft_ms=200, itl_ms=None),
        max_concurrency=64,
        step_tokens=16_384,
    )
    assert need.feasible and need.replicas == by_hand and need.binding == "ttft"
    assert need.tail.ttft_ms <= 200


def test_the_itl_percentile_is_the_batch_at_its_own_percentile():
    shapes = [Shape(500, 200)]
    p = at_rate(linear, shapes, 2.0, max_concurrency=256, step_tokens=8192)
    t = tail(linear, p, 0.95, max_running=256)
    c95 = p.concurrency + NormalDist().inv_cdf(0.95) * math.sqrt(p.concurrency)
    assert concurrency_quantile(p.concurrency, 0.95) == pytest.approx(c95)
    assert t.itl_ms == pytest.approx(10 + 0.5 * c95, rel=1e-9)
    assert t.itl_ms > p.itl_ms  # the tail is above the mean


def test_an_itl_target_below_one_request_alone_is_infeasible_and_says_so():
    need = replicas_for_slo(
        linear,
        [Shape(500, 200)],
        5.0,
        Slo(ttft_ms=None, itl_ms=10.0),
        max_concurrency=64,
        step_tokens=8192,
    )
    assert not need.feasible and need.binding == "itl"
    assert "more replicas cannot meet it" in (need.reason or "")


def test_replicas_rise_with_the_rate_and_each_count_is_the_least():
    slo = Slo(ttft_ms=None, itl_ms=30.0)
    shapes = [Shape(500, 200)]
    counts = []
    for rate in (1.0, 5.0, 20.0, 80.0):
        need = replicas_for_slo(linear, shapes, rate, slo, max_concurrency=256, step_tokens=8192)
        counts.append(need.replicas)
        fewer = need.replicas - 1
        if fewer >= 1:
            p = at_rate(linear, shapes, rate / fewer, max_concurrency=256, step_tokens=8192)
            assert tail(linear, p, 0.95, max_running=256).itl_ms > 30.0
    assert counts == sorted(counts) and counts[-1] > counts[0]
    idle = replicas_for_slo(linear, shapes, 0.0, slo, max_concurrency=8, step_tokens=8)
    assert idle.replicas == 0


def test_the_largest_batch_and_step_within_the_itl_target():
    # ITL 10 + 0.5 b <= 30 ms: b <= 40; prefill 0.01 ms/token <= 50 ms: up to 5,000 tokens.
    assert best_batch(linear, [Shape(500, 200)], 30.0, 0.95, max_concurrency=100) == 40
    assert best_batch(linear, [Shape(500, 200)], 30.0, 0.95, max_concurrency=16) == 16
    assert best_batch(linear, [Shape(500, 200)], 9.0, 0.95, max_concurrency=100) == 0
    assert best_step_tokens(linear, 50.0) == 4096
