"""Latency and throughput of one replica under load, from a per-step performance model.

The step model (AIConfigurator's, through app/services/perfmodel.py) says what one engine step
costs: a request's prefill alone, and the time per output token with `batch` requests decoding
under continuous batching. This module adds what it leaves out (docs/sizing.md "Performance
model"): the wait before a prefill starts, as an M/G/1 queue on the prefill work
(Pollaczek–Khinchine), a closed loop (a fixed concurrency) or an open one (an arrival rate)
solved for its steady state, the best batch for throughput, request-shape mixes evaluated bin by
bin, and the per-engine corrections fitted to what the engine actually did.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

# Corrections fitted to an engine's own latencies are clamped to this range: a factor outside
# it says the profile (GPU, dtype, TP) is wrong, not that the engine is slow.
CORRECTION_MIN, CORRECTION_MAX = 0.5, 2.0
# Below this many requests an in-flight level says too little to fit a correction on.
MIN_LEVEL_REQUESTS = 20
# --max-throughput takes the smallest batch within this share of the best output tokens/s.
THROUGHPUT_SLACK = 0.01


@dataclass(frozen=True)
class Step:
    """What the step model predicts for one (ISL, OSL, batch) point of one replica."""

    prefill_ms: float  # one request's prefill with nothing else running
    itl_ms: float  # time per output token with `batch` requests decoding
    kv_fits: bool  # the KV cache holds `batch` requests of ISL + OSL tokens


# (isl, osl, batch) -> Step; batch is a whole number of requests, at least 1.
StepFn = Callable[[int, int, int], Step]


@dataclass(frozen=True)
class Shape:
    """A request shape and its share of the traffic (weights need not sum to 1)."""

    isl: int
    osl: int
    weight: float = 1.0


@dataclass(frozen=True)
class Corrections:
    """Multipliers on the model's prefill and decode times, fitted to production latencies."""

    prefill: float = 1.0
    decode: float = 1.0
    prefill_levels: int = 0  # in-flight levels the prefill factor was fitted on
    decode_levels: int = 0
    clamped: bool = False


@dataclass(frozen=True)
class ShapeResult:
    """One request shape's latencies inside a mix."""

    isl: int
    osl: int
    weight: float
    ttft_ms: float
    itl_ms: float
    e2e_ms: float
    kv_fits: bool


@dataclass(frozen=True)
class Prediction:
    """One replica in steady state: latencies, throughput, and how it was reached."""

    concurrency: float  # requests in flight (decoding or waiting for prefill)
    ttft_ms: float  # mean over requests
    ttft_p90_ms: float  # over request shapes (a single shape: the mean)
    itl_ms: float  # mean time per output token, token-weighted
    e2e_ms: float
    requests_per_s: float
    output_tokens_per_s: float
    prefill_ms: float  # mean prefill alone
    queue_ms: float  # mean wait for the prefill to start
    utilisation: float  # share of time the prefill work keeps the replica busy
    kv_fits: bool
    saturated: bool  # the load cannot be served in steady state (queue without bound)
    shapes: tuple[ShapeResult, ...]
    corrections: Corrections = Corrections()


def _interp(step: StepFn, isl: int, osl: int, c: float) -> Step:
    """The step at a fractional batch, linear between the whole batches around it."""
    lo = max(1, math.floor(c))
    hi = max(1, math.ceil(c))
    a = step(isl, osl, lo)
    if hi == lo:
        return a
    b = step(isl, osl, hi)
    t = c - lo
    return Step(
        a.prefill_ms + t * (b.prefill_ms - a.prefill_ms),
        a.itl_ms + t * (b.itl_ms - a.itl_ms),
        a.kv_fits and b.kv_fits,
    )


def _evaluate(
    step: StepFn,
    shapes: Sequence[Shape],
    concurrency: float,
    step_tokens: int,
    corr: Corrections,
    rate: float | None = None,
) -> Prediction:
    """Latencies of a mix with `concurrency` requests decoding, at a given or implied rate."""
    total_w = sum(s.weight for s in shapes)
    c = max(1.0, concurrency)
    steps = [_interp(step, s.isl, s.osl, c) for s in shapes]
    others = [_interp(step, s.isl, s.osl, c - 1) if c > 1 else None for s in shapes]
    w = [s.weight / total_w for s in shapes]
    prefill = [st.prefill_ms * corr.prefill for st in steps]
    itl = [st.itl_ms * corr.decode for st in steps]
    # Before its prefill starts, an arrival waits for the step in progress (half a decode step
    # on average) and, while prefilling in chunks, shares each chunk's step with the decodes of
    # the other requests in flight.
    fixed = []
    for s, o, i in zip(shapes, others, itl, strict=True):
        if o is None:
            fixed.append(0.0)
            continue
        chunks = math.ceil(s.isl / max(step_tokens, 1))
        fixed.append(i / 2 + chunks * o.itl_ms * corr.decode)
    # The prefill work each request puts on the replica, which the queue is made of. Prompts
    # shorter than a step share one (the engine batches them up to `step_tokens`), so a short
    # prompt costs its share of a full step, not a whole forward pass of its own.
    budget = max(step_tokens, 1)
    full = None
    work = []
    for s, p in zip(shapes, prefill, strict=True):
        if s.isl >= budget:
            work.append(p)
            continue
        if full is None:
            full = step(budget, 2, 1).prefill_ms * corr.prefill
        work.append(min(p, full * s.isl / budget))
    mean_s = sum(wi * x for wi, x in zip(w, work, strict=True)) / 1000.0
    second = sum(wi * (x / 1000.0) ** 2 for wi, x in zip(w, work, strict=True))
    base_e2e = [
        p + f + max(s.osl - 1, 0) * i
        for s, p, f, i in zip(shapes, prefill, fixed, itl, strict=True)
    ]
    mean_base = sum(wi * e for wi, e in zip(w, base_e2e, strict=True))
    saturated = False

    def wait(lam: float) -> float:
        return 1000.0 * lam * second / (2 * (1 - lam * mean_s))

    if rate is not None:  # open loop: unstable once the prefill work alone fills the replica
        lam = rate
        saturated = lam * mean_s >= 1
        queue = math.inf if saturated else wait(lam)
    else:
        # Closed loop: λ = c / (E2E + wait(λ)) has one root below 1/E[S] (the left side falls
        # as λ rises, the right side rises): bisection. A closed loop never diverges.
        lo, hi = 0.0, (1.0 / mean_s if mean_s > 0 else c / (mean_base / 1000) * 2)
        for _ in range(80):
            mid = (lo + hi) / 2
            q = wait(mid) if mid * mean_s < 1 else math.inf
            if c / ((mean_base + q) / 1000) > mid:
                lo = mid
            else:
                hi = mid
        lam = lo
        queue = wait(lam)
    results = tuple(
        ShapeResult(
            s.isl,
            s.osl,
            s.weight,
            p + f + queue,
            i,
            e + queue,
            st.kv_fits,
        )
        for s, st, p, f, i, e in zip(shapes, steps, prefill, fixed, itl, base_e2e, strict=True)
    )
    mean_osl = sum(wi * s.osl for wi, s in zip(w, shapes, strict=True))
    ttft = sum(wi * r.ttft_ms for wi, r in zip(w, results, strict=True))
    token_w = [wi * max(s.osl, 1) for wi, s in zip(w, shapes, strict=True)]
    itl_mean = sum(tw * r.itl_ms for tw, r in zip(token_w, results, strict=True)) / sum(token_w)
    e2e = sum(wi * r.e2e_ms for wi, r in zip(w, results, strict=True))
    return Prediction(
        concurrency=c,
        ttft_ms=ttft,
        ttft_p90_ms=weighted_quantile([r.ttft_ms for r in results], w, 0.9),
        itl_ms=itl_mean,
        e2e_ms=e2e,
        requests_per_s=0.0 if saturated else lam,
        output_tokens_per_s=0.0 if saturated else lam * mean_osl,
        prefill_ms=mean_s * 1000,
        queue_ms=queue,
        utilisation=min(lam * mean_s, 1.0),
        kv_fits=all(r.kv_fits for r in results),
        saturated=saturated,
        shapes=results,
        corrections=corr,
    )


def at_concurrency(
    step: StepFn,
    shapes: Sequence[Shape],
    concurrency: float,
    *,
    step_tokens: int = 8192,
    corrections: Corrections = Corrections(),
    max_running: int | None = None,
) -> Prediction:
    """Steady state with `concurrency` requests in flight (a closed loop, as benchmarks run).

    When more are in flight than the engine runs at once (`max_running`: what its KV cache and
    batch cap hold), the rest wait for a slot: the replica runs `max_running`, and each
    request first waits (concurrency − max_running) ÷ λ (Little's law on the waiting room)."""
    shapes = _check(shapes)
    if max_running is None or concurrency <= max_running:
        return _evaluate(step, shapes, concurrency, step_tokens, corrections)
    run = _evaluate(step, shapes, max_running, step_tokens, corrections)
    if run.saturated or run.requests_per_s <= 0:
        return replace(run, concurrency=concurrency)
    slot_wait = 1000.0 * (concurrency - max_running) / run.requests_per_s
    return replace(
        run,
        concurrency=concurrency,
        ttft_ms=run.ttft_ms + slot_wait,
        ttft_p90_ms=run.ttft_p90_ms + slot_wait,
        e2e_ms=run.e2e_ms + slot_wait,
        queue_ms=run.queue_ms + slot_wait,
        shapes=tuple(
            replace(r, ttft_ms=r.ttft_ms + slot_wait, e2e_ms=r.e2e_ms + slot_wait)
            for r in run.shapes
        ),
    )


def at_rate(
    step: StepFn,
    shapes: Sequence[Shape],
    rate: float,
    *,
    max_concurrency: int,
    step_tokens: int = 8192,
    corrections: Corrections = Corrections(),
) -> Prediction:
    """Steady state at `rate` arrivals/s (an open loop): the concurrency c = rate × E2E(c).

    Saturated when even `max_concurrency` in flight cannot carry the rate."""
    shapes = _check(shapes)
    if rate <= 0:
        raise ValueError("rate must be above 0 requests/s")

    def excess(c: float) -> tuple[float, Prediction]:
        p = _evaluate(step, shapes, c, step_tokens, corrections, rate=rate)
        return rate * p.e2e_ms / 1000 - c, p

    lo, hi = 1.0, float(max(max_concurrency, 1))
    f_lo, p_lo = excess(lo)
    if f_lo <= 0:
        # One request at a time is enough: in flight on average, rate × E2E (under 1).
        return replace(
            p_lo,
            concurrency=rate * p_lo.e2e_ms / 1000,
            requests_per_s=rate,
            output_tokens_per_s=rate * _mean_osl(shapes),
        )
    f_hi, p_hi = excess(hi)
    if f_hi > 0 or p_hi.saturated:
        # More arrivals than the replica serves: the queue grows without bound, so no TTFT or
        # E2E is finite. What it does serve, at most: its throughput at `max_concurrency`.
        best = at_concurrency(step, shapes, hi, step_tokens=step_tokens, corrections=corrections)
        return replace(
            best,
            saturated=True,
            ttft_ms=math.inf,
            ttft_p90_ms=math.inf,
            e2e_ms=math.inf,
            queue_ms=math.inf,
            shapes=tuple(replace(r, ttft_ms=math.inf, e2e_ms=math.inf) for r in best.shapes),
        )
    for _ in range(40):
        mid = (lo + hi) / 2
        f_mid, p_mid = excess(mid)
        if p_mid.saturated or f_mid > 0:
            lo = mid
        else:
            hi, p_hi = mid, p_mid
        if hi - lo < 0.01:
            break
    return replace(p_hi, requests_per_s=rate, output_tokens_per_s=rate * _mean_osl(shapes))


def max_throughput(
    step: StepFn,
    shapes: Sequence[Shape],
    *,
    max_concurrency: int,
    step_tokens: int = 8192,
    corrections: Corrections = Corrections(),
) -> Prediction:
    """The concurrency (up to what the KV cache holds) with the most output tokens/s."""
    shapes = _check(shapes)
    candidates = sorted({1, *(2**k for k in range(1, 14) if 2**k < max_concurrency)})
    candidates.append(max(max_concurrency, 1))
    tried: list[Prediction] = []
    for c in candidates:
        p = at_concurrency(step, shapes, c, step_tokens=step_tokens, corrections=corrections)
        if not p.kv_fits:
            break
        tried.append(p)
    if not tried:
        return at_concurrency(step, shapes, 1, step_tokens=step_tokens, corrections=corrections)
    # The smallest batch within 1% of the best: more in flight for no more tokens/s only
    # lengthens every request's wait.
    top = max(p.output_tokens_per_s for p in tried)
    return next(p for p in tried if p.output_tokens_per_s >= top * (1 - THROUGHPUT_SLACK))


@dataclass(frozen=True)
class Observed:
    """An engine's measured latencies at one level of requests in flight."""

    inflight: float  # mean requests in flight at arrival
    requests: int
    isl: float  # median ISL at this level
    osl: float
    ttft_ms: float  # median
    itl_ms: float  # median
    shapes: tuple[Shape, ...] = ()  # the level's request shapes (weights: requests), if known
    lowest: int = 0  # the level's lowest in-flight count (its bin's edge)
    itl_p90_ms: float = math.nan


# A level's shapes evaluated one by one: the most frequent, the rest left to them.
MAX_LEVEL_SHAPES = 24


def level_medians(
    step: StepFn,
    level: Observed,
    *,
    step_tokens: int = 8192,
    corrections: Corrections = Corrections(),
    max_running: int | None = None,
) -> tuple[float, float]:
    """The model's median TTFT and ITL over a level's requests: each of its shapes at the
    level's in-flight count, then the request-weighted median (the latency of the median shape
    is not the median latency when ISL and OSL vary together)."""
    shapes = sorted(level.shapes, key=lambda s: -s.weight)[:MAX_LEVEL_SHAPES] or [
        Shape(max(1, round(level.isl)), max(1, round(level.osl)))
    ]
    preds = [
        at_concurrency(
            step,
            [s],
            level.inflight,
            step_tokens=step_tokens,
            corrections=corrections,
            max_running=max_running,
        )
        for s in shapes
    ]
    weights = [s.weight for s in shapes]
    ttft = [math.inf if p.saturated else p.ttft_ms for p in preds]
    return (
        weighted_quantile(ttft, weights, 0.5),
        weighted_quantile([p.itl_ms for p in preds], weights, 0.5),
    )


def fit_corrections(
    step: StepFn,
    levels: Sequence[Observed],
    *,
    step_tokens: int = 8192,
    max_running: int | None = None,
) -> Corrections:
    """One decode and one prefill factor that bring the model to the engine's medians.

    decode: the request-weighted median over in-flight levels of observed ÷ predicted median
    ITL (the model's median over the level's own shapes). prefill: per level, the factor on
    the prefill time that makes the predicted median TTFT (with the decode factor applied) the
    observed one; the weighted median of those. Both clamped to [0.5, 2]."""
    use = [lv for lv in levels if lv.requests >= MIN_LEVEL_REQUESTS and lv.itl_ms > 0]
    if not use:
        return Corrections()
    decode_ratios, prefill_ratios, weights = [], [], []
    for lv in use:
        _, itl = level_medians(step, lv, step_tokens=step_tokens, max_running=max_running)
        decode_ratios.append(lv.itl_ms / itl)
        weights.append(lv.requests)
    decode = weighted_quantile(decode_ratios, weights, 0.5)
    clamped = not CORRECTION_MIN <= decode <= CORRECTION_MAX
    decode = min(max(decode, CORRECTION_MIN), CORRECTION_MAX)
    pw = []
    for lv in use:
        if lv.ttft_ms <= 0:
            continue

        def ttft(f: float, lv: Observed = lv) -> float:
            corr = Corrections(f, decode)
            return level_medians(
                step, lv, step_tokens=step_tokens, corrections=corr, max_running=max_running
            )[0]

        # TTFT rises with the prefill factor (prefill and its queue): bisection for the
        # factor that gives the observed median, searched a little beyond the clamp.
        lo, hi = CORRECTION_MIN / 2, CORRECTION_MAX * 2
        if ttft(lo) >= lv.ttft_ms:
            f = lo
        elif ttft(hi) <= lv.ttft_ms:
            f = hi
        else:
            for _ in range(25):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if ttft(mid) < lv.ttft_ms else (lo, mid)
            f = (lo + hi) / 2
        prefill_ratios.append(f)
        pw.append(lv.requests)
    prefill = weighted_quantile(prefill_ratios, pw, 0.5) if prefill_ratios else 1.0
    clamped = clamped or not CORRECTION_MIN <= prefill <= CORRECTION_MAX
    prefill = min(max(prefill, CORRECTION_MIN), CORRECTION_MAX)
    return Corrections(prefill, decode, len(prefill_ratios), len(decode_ratios), clamped)


def weighted_quantile(values: Sequence[float], weights: Sequence[float], q: float) -> float:
    """The smallest value whose cumulative weight reaches q of the total."""
    pairs = sorted(zip(values, weights, strict=True))
    total = sum(wt for _, wt in pairs)
    if not pairs or total <= 0:
        return math.nan
    acc = 0.0
    for v, wt in pairs:
        acc += wt
        if acc >= q * total - 1e-12:
            return v
    return pairs[-1][0]


def kv_concurrency(kv_tokens: int, shapes: Sequence[Shape]) -> int:
    """Requests the KV cache holds at once at the mix's mean ISL + OSL (paged, no preemption)."""
    shapes = _check(shapes)
    total_w = sum(s.weight for s in shapes)
    mean = sum(s.weight * (s.isl + s.osl) for s in shapes) / total_w
    return max(1, int(kv_tokens // max(mean, 1)))


def _mean_osl(shapes: Sequence[Shape]) -> float:
    total_w = sum(s.weight for s in shapes)
    return sum(s.weight * s.osl for s in shapes) / total_w


def _check(shapes: Sequence[Shape]) -> list[Shape]:
    out = [s for s in shapes if s.weight > 0]
    if not out:
        raise ValueError("no request shapes with weight above 0")
    for s in out:
        if s.isl < 1 or s.osl < 1:
            raise ValueError(f"ISL and OSL must be at least 1 token (got {s.isl}, {s.osl})")
    return out
