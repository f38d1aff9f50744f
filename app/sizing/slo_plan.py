"""Latency at a percentile, and the replicas and batch that keep an engine within its SLO.

The step model and the queue of app/sizing/perf.py give a replica's mean latencies at an arrival
rate. An SLO is a percentile, so this module adds the spread (docs/sizing.md "Replicas under
an SLO"), leaning conservative where the model is approximate:

- TTFT: each request shape's prefill plus the wait for the prefill to start. The M/G/1 wait is
  0 with probability 1 − ρ and otherwise about exponential with mean E[W]/ρ (the usual
  heavy-traffic form); the percentile is that of the mixture over the shapes (bisection).
- ITL: a request's mean time per token depends on the batch it decodes in, whose make-up is
  the mix weighted by output tokens (a long answer stays in the batch longer), and on how many
  decode at once. That number is taken at its own percentile (Poisson around the mean in
  flight, normal approximation): ITL p95 is the mix's token-weighted ITL at the
  95th-percentile batch. A request's mean over its tokens spreads less than that, which errs
  high.
- E2E: prefill, wait and output tokens at the percentile ITL.

Replicas under the SLO: latency depends on a replica's share of the arrivals, so the least
replicas whose per-replica rate meets every target is found by doubling then bisection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from app.sizing.perf import (
    Corrections,
    Prediction,
    Shape,
    StepFn,
    _interp,
    at_rate,
    weighted_quantile,
)
from app.sizing.slo import Slo

MAX_REPLICAS = 4096
# A rate this small is "one request at a time": the best latency any number of replicas gives.
IDLE_RATE = 1e-6


@dataclass(frozen=True)
class Tail:
    """A replica's latencies at one percentile (ms); inf when the load saturates it."""

    ttft_ms: float
    itl_ms: float
    e2e_ms: float


@dataclass(frozen=True)
class LatencyNeed:
    """The fewest replicas whose predicted tail latencies meet the SLO at a rate."""

    replicas: int  # 0 when there is no traffic; at least 1 otherwise
    feasible: bool  # False: no number of replicas meets it (see reason)
    tail: Tail  # with those replicas (or one request at a time when infeasible)
    binding: str  # "ttft", "itl", "e2e" or "" (which target decided the count)
    reason: str | None = None


def concurrency_quantile(mean: float, q: float) -> float:
    """The q-quantile of requests in flight around a mean (Poisson, normal approximation)."""
    if mean <= 0:
        return 0.0
    return mean + NormalDist().inv_cdf(q) * math.sqrt(mean)


def tail(
    step: StepFn,
    p: Prediction,
    q: float,
    *,
    max_running: int,
    corrections: Corrections = Corrections(),
) -> Tail:
    """TTFT, ITL and E2E at quantile q of a steady state (see the module's docstring)."""
    if p.saturated or not math.isfinite(p.ttft_ms):
        return Tail(math.inf, math.inf, math.inf)
    shapes = p.shapes
    weights = [s.weight for s in shapes]
    c_q = min(max(concurrency_quantile(p.concurrency, q), 1.0), float(max(max_running, 1)))
    per_shape = [_interp(step, s.isl, s.osl, c_q).itl_ms * corrections.decode for s in shapes]
    tokens = [w * max(s.osl, 1) for w, s in zip(weights, shapes, strict=True)]
    itl_q = sum(t * i for t, i in zip(tokens, per_shape, strict=True)) / sum(tokens)
    rho = min(max(p.utilisation, 0.0), 0.999999)
    mean_wait = p.queue_ms
    ttft_base = [s.ttft_ms - mean_wait for s in shapes]
    e2e_base = [
        s.e2e_ms - mean_wait + max(s.osl - 1, 0) * max(itl_q - s.itl_ms, 0.0) for s in shapes
    ]
    return Tail(
        _mixture_quantile(ttft_base, weights, rho, mean_wait, q),
        itl_q,
        _mixture_quantile(e2e_base, weights, rho, mean_wait, q),
    )


def _mixture_quantile(
    base: Sequence[float], weights: Sequence[float], rho: float, mean_wait: float, q: float
) -> float:
    """The q-quantile of base_i + W over shapes i, W the M/G/1 wait (atom at 0, exponential)."""
    total = sum(weights)
    if mean_wait <= 0 or rho <= 0:
        return weighted_quantile(base, weights, q)
    scale = mean_wait / rho  # mean of the wait when there is one

    def cdf(t: float) -> float:
        acc = 0.0
        for b, w in zip(base, weights, strict=True):
            if t >= b:
                acc += w * (1.0 - rho * math.exp(-(t - b) / scale))
        return acc / total

    lo = min(base)
    hi = max(base) + scale * (math.log(max(rho / max(1 - q, 1e-12), 1.0)) + 1.0)
    while cdf(hi) < q:
        hi += scale
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cdf(mid) < q else (lo, mid)
        if hi - lo < 1e-3:
            break
    return hi


def _misses(t: Tail, slo: Slo) -> str:
    """The first target the tail misses ('' when it meets them all)."""
    for name, value, target in (
        ("itl", t.itl_ms, slo.itl_ms),
        ("ttft", t.ttft_ms, slo.ttft_ms),
        ("e2e", t.e2e_ms, slo.e2e_ms),
    ):
        if target is not None and not value <= target:
            return name
    return ""


def replicas_for_slo(
    step: StepFn,
    shapes: Sequence[Shape],
    rate: float,
    slo: Slo,
    *,
    max_concurrency: int,
    step_tokens: int,
    corrections: Corrections = Corrections(),
) -> LatencyNeed:
    """The fewest replicas (up to MAX_REPLICAS) whose share of `rate` meets every target."""
    q = slo.quantile
    none = Tail(0.0, 0.0, 0.0)
    if rate <= 0:
        return LatencyNeed(0, True, none, "")

    def at(replicas: float) -> Tail:
        per = rate / replicas if replicas else IDLE_RATE
        p = at_rate(
            step,
            shapes,
            max(per, IDLE_RATE),
            max_concurrency=max_concurrency,
            step_tokens=step_tokens,
            corrections=corrections,
        )
        return tail(step, p, q, max_running=max_concurrency, corrections=corrections)

    idle = at(0)
    missed = _misses(idle, slo)
    if missed:
        value = {"itl": idle.itl_ms, "ttft": idle.ttft_ms, "e2e": idle.e2e_ms}[missed]
        target = {"itl": slo.itl_ms, "ttft": slo.ttft_ms, "e2e": slo.e2e_ms}[missed]
        return LatencyNeed(
            1,
            False,
            idle,
            missed,
            f"even one request at a time the model predicts {missed.upper()} "
            f"p{slo.percentile:g} {value:,.1f} ms against a target of {target:,.1f} ms: more "
            "replicas cannot meet it (a faster GPU, more tensor parallelism, FP8 or a looser "
            "target can)",
        )
    lo, hi = 0, 1
    t_hi = at(1)
    while _misses(t_hi, slo):
        lo, hi = hi, hi * 2
        if hi > MAX_REPLICAS:
            return LatencyNeed(
                MAX_REPLICAS, False, t_hi, _misses(t_hi, slo), "beyond 4,096 replicas"
            )
        t_hi = at(hi)
    # The least count in (lo, hi] that meets the SLO: latency falls as replicas rise.
    while hi - lo > 1:
        mid = (lo + hi) // 2
        t_mid = at(mid)
        if _misses(t_mid, slo):
            lo = mid
        else:
            hi, t_hi = mid, t_mid
    # Which target one replica fewer would miss: the one that sets the count.
    binding = _misses(at(hi - 1), slo) if hi > 1 else ""
    return LatencyNeed(hi, True, t_hi, binding)


def best_batch(
    step: StepFn,
    shapes: Sequence[Shape],
    itl_target_ms: float,
    q: float,
    *,
    max_concurrency: int,
    corrections: Corrections = Corrections(),
) -> int:
    """The largest batch (up to what the KV cache holds) whose ITL at quantile q over the mix's
    shapes stays within the target; 0 when even one request alone misses it."""
    tokens = [s.weight * max(s.osl, 1) for s in shapes]

    def itl(b: int) -> float:
        # The batch's make-up is the mix weighted by output tokens (see `tail`); `b` decoding
        # at the mean is the batch the SLO's percentile is met at (q sets how far above).
        values = [step(s.isl, s.osl, b).itl_ms * corrections.decode for s in shapes]
        return sum(t * v for t, v in zip(tokens, values, strict=True)) / sum(tokens)

    if itl(1) > itl_target_ms:
        return 0
    lo, hi = 1, max(max_concurrency, 1)
    if itl(hi) <= itl_target_ms:
        return hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if itl(mid) <= itl_target_ms else (lo, mid)
    return lo


def best_step_tokens(
    step: StepFn,
    itl_target_ms: float,
    *,
    candidates: Sequence[int] = (2048, 3072, 4096, 6144, 8192, 12288, 16384),
    corrections: Corrections = Corrections(),
) -> int:
    """The largest prefill step (max_num_tokens) whose one chunk takes no longer than the ITL
    target: a token never waits longer than the target behind another prompt's chunk."""
    best = candidates[0]
    for tokens in candidates:
        if step(tokens, 2, 1).prefill_ms * corrections.prefill <= itl_target_ms:
            best = tokens
    return best
