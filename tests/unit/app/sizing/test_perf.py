"""The queueing, rate, best-batch, mix and correction math of app/sizing/perf.py, on a step
model whose numbers are known by hand."""

from __future__ import annotations

import math

import pytest

from app.sizing.perf import (
    Corrections,
    Observed,
    Shape,
    Step,
    at_concurrency,
    at_rate,
    fit_corrections,
    kv_concurrency,
    max_throughput,
    weighted_quantile,
)


def linear(isl: int, osl: int, batch: int) -> Step:
    """Prefill 0.1 ms per prompt token; ITL 10 ms + 0.5 ms per request decoding; KV for 64."""
    return Step(prefill_ms=0.1 * isl, itl_ms=10.0 + 0.5 * batch, kv_fits=batch <= 64)


def test_one_request_alone_is_prefill_plus_decode() -> None:
    p = at_concurrency(linear, [Shape(1000, 101)], 1)
    # Alone: no wait for a step, no decode interference; the queue is the M/D/1 wait of its
    # own prefill work: λ·S²/(2(1-ρ)) with λ = 1/E2E.
    e2e0 = 100 + 100 * 10.5
    lam = 1 / (e2e0 / 1000)
    s = 0.1
    assert p.prefill_ms == pytest.approx(100)
    assert p.itl_ms == pytest.approx(10.5)
    queue = 1000 * lam * s**2 / (2 * (1 - lam * s))
    assert p.queue_ms == pytest.approx(queue, rel=0.02)
    assert p.ttft_ms == pytest.approx(100 + p.queue_ms)
    assert p.requests_per_s == pytest.approx(1000 / p.e2e_ms, rel=1e-6)
    assert p.output_tokens_per_s == pytest.approx(p.requests_per_s * 101, rel=1e-6)


def test_concurrency_adds_the_step_wait_and_the_decode_interference() -> None:
    p = at_concurrency(linear, [Shape(20_000, 11)], 8, step_tokens=8192)
    itl = 10 + 0.5 * 8
    other = 10 + 0.5 * 7
    fixed = itl / 2 + math.ceil(20_000 / 8192) * other
    assert p.ttft_ms == pytest.approx(2000 + fixed + p.queue_ms)
    # Little's law holds in the steady state it reports.
    assert p.requests_per_s * p.e2e_ms / 1000 == pytest.approx(8, rel=1e-3)


def test_more_in_flight_than_the_cache_holds_wait_for_a_slot() -> None:
    at_cap = at_concurrency(linear, [Shape(100, 100)], 64)
    over = at_concurrency(linear, [Shape(100, 100)], 128, max_running=64)
    assert over.itl_ms == pytest.approx(at_cap.itl_ms)
    assert over.requests_per_s == pytest.approx(at_cap.requests_per_s)
    assert over.ttft_ms - at_cap.ttft_ms == pytest.approx(1000 * 64 / at_cap.requests_per_s)


def test_rate_finds_the_concurrency_littles_law_gives() -> None:
    p = at_rate(linear, [Shape(500, 200)], 5.0, max_concurrency=64)
    assert not p.saturated
    assert p.requests_per_s == 5.0
    # c = 5/s × E2E(c), with E2E(c) = 50 + 199 × (10 + 0.5c) ms: c ≈ 20.3, and the wait for a
    # step and the queue add under 0.5 more
    assert p.concurrency == pytest.approx(5.0 * p.e2e_ms / 1000, abs=0.05)
    assert 20.3 < p.concurrency < 20.8


def test_a_trickle_has_less_than_one_request_in_flight() -> None:
    p = at_rate(linear, [Shape(500, 200)], 0.01, max_concurrency=64)
    assert p.concurrency == pytest.approx(0.01 * p.e2e_ms / 1000)
    assert p.concurrency < 0.1


def test_a_rate_beyond_capacity_is_saturated() -> None:
    best = max_throughput(linear, [Shape(500, 200)], max_concurrency=64)
    p = at_rate(linear, [Shape(500, 200)], best.requests_per_s * 3, max_concurrency=64)
    assert p.saturated
    # An open queue beyond capacity grows without bound: no finite wait is reported.
    assert math.isinf(p.ttft_ms) and math.isinf(p.e2e_ms)


def test_max_throughput_stays_inside_the_kv_cache() -> None:
    p = max_throughput(linear, [Shape(100, 1000)], max_concurrency=64)
    assert p.kv_fits and p.concurrency <= 64
    # Throughput rises with the batch here (ITL grows slower than the batch): the cap wins.
    assert p.concurrency == 64


def test_a_mix_is_evaluated_shape_by_shape_not_at_its_mean() -> None:
    mix = [Shape(100, 10, 0.5), Shape(10_000, 1000, 0.5)]
    p = at_concurrency(linear, mix, 1)
    short, long_ = p.shapes
    assert short.ttft_ms < long_.ttft_ms
    # ITL is token-weighted: the long requests carry 100x the tokens.
    assert p.itl_ms == pytest.approx((10 * short.itl_ms + 1000 * long_.itl_ms) / 1010)
    assert p.ttft_p90_ms == pytest.approx(long_.ttft_ms)


def test_corrections_recover_a_known_slowdown() -> None:
    def slow(isl: int, osl: int, batch: int) -> Step:
        s = linear(isl, osl, batch)
        return Step(s.prefill_ms * 1.6, s.itl_ms * 1.3, s.kv_fits)

    levels = []
    for c in (1, 2, 4, 8, 16):
        truth = at_concurrency(slow, [Shape(2000, 200)], c)
        levels.append(Observed(c, 500, 2000, 200, truth.ttft_ms, truth.itl_ms))
    corr = fit_corrections(linear, levels)
    assert corr.decode == pytest.approx(1.3, rel=0.01)
    assert corr.prefill == pytest.approx(1.6, rel=0.1)
    assert not corr.clamped


def test_corrections_respect_what_the_engine_runs_at_once() -> None:
    """Above the cap the engine decodes at the cap (the rest wait for a slot): a fit that
    modelled the whole in-flight count as one batch would find a decode faster than real."""

    def slow(isl: int, osl: int, batch: int) -> Step:
        s = linear(isl, osl, batch)
        return Step(s.prefill_ms * 1.5, s.itl_ms * 1.3, s.kv_fits)

    levels = []
    for c in (16, 64, 96, 128):
        truth = at_concurrency(slow, [Shape(500, 200)], c, max_running=40)
        levels.append(Observed(c, 500, 500, 200, truth.ttft_ms, truth.itl_ms))
    corr = fit_corrections(linear, levels, max_running=40)
    assert corr.decode == pytest.approx(1.3, rel=0.01)
    assert corr.prefill == pytest.approx(1.5, rel=0.05)


def test_max_throughput_takes_the_smallest_batch_within_one_percent() -> None:
    def flat(isl: int, osl: int, batch: int) -> Step:  # tokens/s saturate at ~100 in flight
        return Step(1.0, 10.0 * max(1.0, batch / 100), True)

    p = max_throughput(flat, [Shape(10, 100)], max_concurrency=100_000)
    assert p.concurrency <= 256


def test_corrections_are_clamped_and_skip_thin_levels() -> None:
    levels = [Observed(1, 500, 100, 100, 1.0, 1000.0), Observed(2, 3, 100, 100, 1.0, 1.0)]
    corr = fit_corrections(linear, levels)
    assert corr.decode == 2.0 and corr.clamped and corr.decode_levels == 1
    assert fit_corrections(linear, []) == Corrections()


def test_helpers() -> None:
    assert weighted_quantile([3, 1, 2], [1, 1, 1], 0.5) == 2
    assert kv_concurrency(10_000, [Shape(400, 100)]) == 20
    with pytest.raises(ValueError, match="at least 1 token"):
        at_concurrency(linear, [Shape(0, 10)], 1)
