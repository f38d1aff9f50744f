"""Predicted latency and throughput for a profile or an engine's own traffic (docs/sizing.md).

Where the performance model (perfmodel, the library), the memory math (sizing) and the stored
traffic (analytics) meet: `predict` for what-ifs (`tokenshape perf`, GET /api/performance),
`engine_performance` for an engine's observed ISL × OSL mix and load, with the corrections
fitted to its own production latencies.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from app.analytics.filters import Filter
from app.analytics.load import levels_and_shapes
from app.analytics.mix import peak_hour_in_flight, shape_mix
from app.services import modelconfigs, perfmodel
from app.services.perfmodel import GpuFigures, PerfModelError, StepModel
from app.sizing.catalog import GIB, GpuSpec
from app.sizing.perf import (
    MIN_LEVEL_REQUESTS,
    Corrections,
    Observed,
    Prediction,
    Shape,
    Step,
    StepFn,
    at_concurrency,
    at_rate,
    fit_corrections,
    kv_concurrency,
    level_medians,
    max_throughput,
)
from app.sizing.profile import EngineProfile
from app.sizing.recommend import memory_for
from app.storage.database import Database

Mode = Literal["concurrency", "rate", "max-throughput"]
DEFAULT_STEP_TOKENS = 8192
# Measured against published figures (docs/sizing.md "Performance model: checked against
# published figures"); tests/unit/app/services/test_perf_published.py recomputes them.
PUBLISHED_ERROR = (
    "against 63 published benchmark figures the median error is 6.1% on output tokens/s, 14.9% on "
    "ITL and 25.1% on TTFT (docs/sizing.md, 'Checked against published figures')"
)
# Scaling covered GPUs from their generation's reference and comparing with their own data.
ROOFLINE_ERROR = (
    "covered GPUs scaled the same way from a card of their class come within ±14% of their "
    "measured data (docs/sizing.md, 'The roofline, checked')"
)
SM_VERSION = {"ampere": 80, "ada": 89, "hopper": 90, "blackwell": 100, "cdna3": 0}


def figures(gpu: GpuSpec) -> GpuFigures:
    """What the roofline mode needs of a GPU, from the catalog's spec-sheet fields."""
    bw = gpu.bandwidth_gbs * 1e9
    bf16 = gpu.bf16_tflops * 1e12
    if bw <= 0 or bf16 <= 0:
        raise PerfModelError(
            f"{gpu.name} has no bandwidth or FLOPS in the catalog: describe it with "
            "gpu_bandwidth_gbs and gpu_bf16_tflops"
        )
    form = gpu.form
    sm = SM_VERSION.get(gpu.arch, 80)
    if gpu.arch == "blackwell" and form in ("consumer", "workstation"):
        sm = 120
    return GpuFigures(
        name=gpu.name,
        memory_bytes=int(gpu.memory_gib * GIB),
        bandwidth_bytes_s=bw,
        bf16_flops=bf16,
        fp8_flops=gpu.fp8_tflops * 1e12,
        fp4_flops=gpu.fp4_tflops * 1e12,
        sm_version=sm,
        pcie=form != "sxm" and form != "superchip",
    )


# Batch sizes the library is asked at: every size to 16, then steps of about 12.5%.
GRID_EXACT = 16
BATCH_GRID: tuple[int, ...] = tuple(
    sorted({*range(1, GRID_EXACT + 1), *(round(GRID_EXACT * 1.125**k) for k in range(1, 80))})
)


def _bracket(batch: int) -> tuple[int, int]:
    """The grid sizes at or around a batch (beyond the grid: the batch itself)."""
    if batch <= GRID_EXACT or batch >= BATCH_GRID[-1]:
        return batch, batch
    i = bisect_left(BATCH_GRID, batch)
    if BATCH_GRID[i] == batch:
        return batch, batch
    return BATCH_GRID[i - 1], BATCH_GRID[i]


@dataclass
class Engine:
    """A profile made ready for predictions: its step model, KV room and words on sources."""

    profile: EngineProfile
    model: StepModel
    kv_tokens: int
    step_tokens: int
    model_source: str
    notes: list[str] = field(default_factory=list)

    def step(self, isl: int, osl: int, batch: int) -> Step:
        """The library's step, with the KV check from tokenshape's own (calibrated) memory."""
        return self._checked(isl, osl, batch, self.model.step(isl, osl, batch))

    def grid_step(self, isl: int, osl: int, batch: int) -> Step:
        """`step`, with the library asked only at the batch sizes of BATCH_GRID (steps of at
        most 12.5%) and interpolated between them: the searches under an SLO visit many batch
        sizes, and time per token is smooth in the batch (bench/plan.py measures the
        difference against `step`)."""
        lo, hi = _bracket(batch)
        s = self.model.step(isl, osl, lo)
        if hi != lo:
            b = self.model.step(isl, osl, hi)
            t = (batch - lo) / (hi - lo)
            s = Step(s.prefill_ms, s.itl_ms + t * (b.itl_ms - s.itl_ms), s.kv_fits)
        return self._checked(isl, osl, batch, s)

    def _checked(self, isl: int, osl: int, batch: int, s: Step) -> Step:
        fits = batch * (isl + osl) <= self.kv_tokens
        if self.profile.max_batch_size is not None:
            fits = fits and batch <= self.profile.max_batch_size
        return Step(s.prefill_ms, s.itl_ms, fits)

    def max_concurrency(self, shapes: list[Shape]) -> int:
        """Requests that fit at once: the KV cache at the mix's mean length, the batch cap."""
        n = kv_concurrency(self.kv_tokens, shapes) if self.kv_tokens > 0 else 1
        if self.profile.max_batch_size is not None:
            n = min(n, self.profile.max_batch_size)
        return max(n, 1)


def profile_for(*, model: str, gpu: str, **fields: Any) -> EngineProfile:
    """A profile for a what-if: a catalog model name or a Hugging Face id, a catalog GPU."""
    from app.sizing.catalog import MODELS

    values = {k: v for k, v in fields.items() if v is not None}
    if model in MODELS:
        return EngineProfile(model=model, gpu=gpu, **values)
    return EngineProfile(model=model, hf_model=model, gpu=gpu, **values)


def prepare(profile: EngineProfile) -> Engine:
    """The step model and KV capacity for a profile; PerfModelError says why not."""
    gpu = profile.gpu_spec()
    target = perfmodel.target_for(
        profile.framework,
        gpu.aic_system,
        gpu.reference_system,
        lambda: figures(gpu),
    )
    spec = profile.spec()
    if profile.pipeline_parallel > spec.layers:
        raise PerfModelError(
            f"pipeline_parallel {profile.pipeline_parallel} is more stages than the model's "
            f"{spec.layers} layers: use at most {spec.layers}"
        )
    mem = memory_for(profile, profile.max_num_tokens or DEFAULT_STEP_TOKENS)
    if mem.kv_capacity_tokens <= 0:
        raise PerfModelError(
            f"the model does not fit: {mem.weights / GIB:,.1f} GiB of weights and "
            f"{mem.overhead / GIB:,.1f} GiB of overhead against {mem.usable / GIB:,.1f} GiB usable "
            f"on {profile.gpus}× {profile.gpu_spec().name}, so nothing is left for the KV cache: "
            "add GPUs (tensor_parallel), use fp8 weights, or raise memory_fraction"
        )
    path, source = modelconfigs.resolve_profile(profile)
    step_tokens = profile.max_num_tokens or DEFAULT_STEP_TOKENS
    model = perfmodel.step_model(
        path,
        target,
        profile.tensor_parallel,
        profile.pipeline_parallel,
        profile.weight_dtype,
        profile.kv_dtype,
        step_tokens,
    )
    notes = []
    if mem.hint:
        low, high = mem.kv_low_tokens, mem.kv_high_tokens
        notes.append(
            f"KV capacity {mem.kv_capacity_tokens:,} tokens, between {low:,} and {high:,} "
            f"({'; '.join(mem.uncertain)}): {mem.hint}"
        )
    if target.mode == "roofline":
        notes.append(
            f"{gpu.name} has no measured kernel data in the library: its figures are a "
            f"roofline scaled from {target.reference}; {ROOFLINE_ERROR}"
        )
    return Engine(profile, model, int(mem.kv_capacity_tokens), step_tokens, source, notes)


def within_bounds(eng: Engine, shapes: list[Shape]) -> tuple[list[Shape], float]:
    """The shapes the engine can serve at all (within its context, bounds and KV cache), and
    the share of the weight left out. A single shape out of bounds is an error that says so."""
    profile = eng.profile
    context = profile.spec().max_position_embeddings
    limits = [("the model's context", context), ("the KV cache", eng.kv_tokens)]
    if profile.max_seq_len:
        limits.append(("the engine's max_seq_len", profile.max_seq_len))

    def reason(s: Shape) -> str | None:
        if profile.max_input_len and s.isl > profile.max_input_len:
            return f"ISL {s.isl:,} is beyond the engine's max_input_len {profile.max_input_len:,}"
        for what, limit in limits:
            if s.isl + s.osl > limit:
                return f"ISL + OSL = {s.isl + s.osl:,} tokens is beyond {what} ({limit:,})"
        return None

    kept = [s for s in shapes if reason(s) is None]
    if not kept:
        raise PerfModelError(f"{reason(shapes[0])}: no request of that shape can be served")
    total = sum(s.weight for s in shapes)
    return kept, 1 - sum(s.weight for s in kept) / total


def predict(
    profile: EngineProfile,
    shapes: list[Shape],
    *,
    mode: Mode,
    concurrency: float | None = None,
    rate: float | None = None,
    corrections: Corrections = Corrections(),
    engine: Engine | None = None,
) -> tuple[Engine, Prediction]:
    """One steady state of a replica for a mix of request shapes (those it can serve)."""
    eng = engine or prepare(profile)
    shapes, _ = within_bounds(eng, shapes)
    cap = eng.max_concurrency(shapes)
    step: StepFn = eng.step
    if mode == "max-throughput":
        p = max_throughput(
            step, shapes, max_concurrency=cap, step_tokens=eng.step_tokens, corrections=corrections
        )
    elif mode == "rate":
        if rate is None:
            raise ValueError("--rate needs a value in requests/s")
        p = at_rate(
            step,
            shapes,
            rate,
            max_concurrency=cap,
            step_tokens=eng.step_tokens,
            corrections=corrections,
        )
    else:
        if concurrency is None or concurrency < 1:
            raise ValueError("concurrency must be at least 1 request in flight")
        p = at_concurrency(
            step,
            shapes,
            concurrency,
            step_tokens=eng.step_tokens,
            corrections=corrections,
            max_running=cap,
        )
    return eng, p


def _num(x: float) -> float | None:
    return None if not math.isfinite(x) else round(x, 3)


def prediction_dict(eng: Engine, p: Prediction, shapes: list[Shape]) -> dict[str, Any]:
    """The JSON form shared by the CLI and the API."""
    target = eng.model.target
    kept, left_out = within_bounds(eng, shapes)
    cap = eng.max_concurrency(kept)
    return {
        "ttft_ms": _num(p.ttft_ms),
        "ttft_shapes_p90_ms": _num(p.ttft_p90_ms),
        "itl_ms": _num(p.itl_ms),
        "e2e_ms": _num(p.e2e_ms),
        "output_tokens_per_s": _num(p.output_tokens_per_s),
        "requests_per_s": _num(p.requests_per_s),
        "concurrency": _num(p.concurrency),
        "prefill_ms": _num(p.prefill_ms),
        "queue_ms": _num(p.queue_ms),
        "prefill_utilisation": _num(p.utilisation),
        # All in flight at once in the cache (at the mix's mean length); beyond, they queue.
        "kv_fits": p.concurrency <= cap,
        "saturated": p.saturated,
        "kv_capacity_tokens": eng.kv_tokens,
        "max_concurrency": cap,
        "source": target.source,
        "source_kind": target.mode,
        "library": f"{perfmodel.LIBRARY} {perfmodel.library_version()}",
        "model_config": eng.model_source,
        "corrections": {"prefill": p.corrections.prefill, "decode": p.corrections.decode},
        "notes": list(eng.notes)
        + (
            ["the load exceeds what one replica serves in steady state (the queue grows)"]
            if p.saturated
            else []
        )
        + (
            []
            if p.concurrency <= cap
            else [
                f"the KV cache holds {cap:,} requests at once: the other "
                f"{p.concurrency - cap:,.0f} wait for a slot (in TTFT)"
            ]
        )
        + (
            [f"{left_out:.1%} of the requests are beyond the engine's bounds and left out"]
            if left_out > 0
            else []
        ),
        "error": PUBLISHED_ERROR,
    }


def observed_levels(db: Database, flt: Filter, replicas: int | None = None) -> list[Observed]:
    """The engine's measured latency medians per level of requests in flight, with the
    level's request shapes (ISL × OSL cells and their counts) to evaluate the model on.

    The levels count the engine's requests in flight; the model is one replica's, so with the
    profile's `replicas` the others in flight are shared among them (an even load balancer):
    an arrival meets 1 + (n − 1) / replicas on its own replica."""
    share = float(replicas or 1)

    def per_replica(n: float) -> float:
        return 1 + (n - 1) / share if n >= 1 else n

    df, cells = levels_and_shapes(db.cursor(), flt)
    by_level: dict[tuple[object, int], list[Shape]] = {}
    for c in cells.itertuples(index=False):
        key = (c.engine, int(c.inflight_lo))
        shape = Shape(max(1, round(c.isl)), max(1, round(c.osl)), float(c.requests))
        by_level.setdefault(key, []).append(shape)
    out = []
    for row in df.itertuples(index=False):
        if not row.requests or row.itl_p50 is None or math.isnan(row.itl_p50):
            continue
        out.append(
            Observed(
                per_replica(float(row.inflight_mean)),
                int(row.requests),
                float(row.isl_p50),
                float(row.osl_p50),
                float(row.ttft_p50) if row.ttft_p50 == row.ttft_p50 else 0.0,
                float(row.itl_p50),
                tuple(by_level.get((row.engine, int(row.inflight_lo)), ())),
                int(row.inflight_lo),  # the engine-wide bin: it names the level
                float(row.itl_p90),
            )
        )
    return out


def engine_performance(
    db: Database,
    engine: str,
    profile: EngineProfile,
    *,
    start: datetime,
    end: datetime,
    isl: int | None = None,
    osl: int | None = None,
    concurrency: float | None = None,
) -> dict[str, Any]:
    """The model's figures for an engine at its observed mix and load, raw and calibrated."""
    flt = Filter(start=start, end=end, engines=(engine,))
    cur = db.cursor()
    if isl is not None and osl is not None:
        shapes = [Shape(isl, osl)]
        mix_words = f"one shape: ISL {isl}, OSL {osl}"
        covered = 1.0
    else:
        mix = shape_mix(cur, flt)
        if not mix.cells:
            raise LookupError(f"engine {engine!r} has no requests in the window: give isl and osl")
        shapes = [Shape(i, o, float(n)) for i, o, n in mix.cells]
        if isl is not None:
            shapes = [Shape(isl, s.osl, s.weight) for s in shapes]
        if osl is not None:
            shapes = [Shape(s.isl, osl, s.weight) for s in shapes]
        covered = mix.covered
        mix_words = (
            f"the observed ISL × OSL mix: {len(mix.cells)} cells, each evaluated on its own, "
            f"holding {covered:.1%} of {mix.total:,} requests (the rarest folded into the "
            "nearest cell with a longer prompt)"
        )
    observed = peak_hour_in_flight(cur, flt)
    if concurrency is None:
        replicas = profile.replicas or 1
        concurrency = max((observed or 1.0) / replicas, 1.0)
        load_words = "the busiest hour's mean requests in flight" + (
            f", shared by the profile's {replicas} replicas" if replicas > 1 else ""
        )
    else:
        load_words = "as asked"
    eng = prepare(profile)
    levels = observed_levels(db, flt, profile.replicas)
    corr = fit_corrections(
        eng.step, levels, step_tokens=eng.step_tokens, max_running=eng.max_concurrency(shapes)
    )
    _, raw = predict(profile, shapes, mode="concurrency", concurrency=concurrency, engine=eng)
    _, cal = predict(
        profile,
        shapes,
        mode="concurrency",
        concurrency=concurrency,
        corrections=corr,
        engine=eng,
    )
    by_level = []
    cap = eng.max_concurrency(shapes)
    for lv in levels:
        kept, _ = within_bounds(eng, list(lv.shapes)) if lv.shapes else ([], 0.0)
        level = replace(lv, shapes=tuple(kept)) if kept else lv
        try:
            m_ttft, m_itl = level_medians(
                eng.step, level, step_tokens=eng.step_tokens, max_running=cap
            )
            k_ttft, k_itl = level_medians(
                eng.step, level, step_tokens=eng.step_tokens, corrections=corr, max_running=cap
            )
        except PerfModelError:  # a level whose requests the engine cannot serve
            continue
        by_level.append(
            {
                "inflight": round(lv.inflight, 2),
                "requests": lv.requests,
                "isl_p50": round(lv.isl),
                "osl_p50": round(lv.osl),
                "observed_ttft_p50_ms": round(lv.ttft_ms, 2),
                "model_ttft_ms": _num(m_ttft),
                "calibrated_ttft_ms": _num(k_ttft),
                "observed_itl_p50_ms": round(lv.itl_ms, 3),
                "model_itl_ms": _num(m_itl),
                "calibrated_itl_ms": _num(k_itl),
            }
        )
    return {
        "engine": engine,
        "window": {"start": start.isoformat(), "end": end.isoformat()},
        "by_inflight": by_level,
        "mix": mix_words,
        "mix_coverage": round(covered, 4),
        "concurrency_from": load_words,
        "observed_peak_in_flight": None if observed is None else round(observed, 3),
        "model": prediction_dict(eng, raw, shapes),
        "calibrated": prediction_dict(eng, cal, shapes),
        "corrections": {
            "prefill": round(corr.prefill, 3),
            "decode": round(corr.decode, 3),
            "prefill_levels": corr.prefill_levels,
            "decode_levels": corr.decode_levels,
            "clamped": corr.clamped,
            "range": [0.5, 2.0],
            "how": (
                "request-weighted medians over in-flight levels of observed ÷ predicted ITL "
                "(decode) and of the prefill share of TTFT (prefill); levels with fewer than "
                "20 requests are skipped"
            ),
        },
    }


def backtest(
    db: Database,
    engine: str,
    profile: EngineProfile,
    *,
    fit: tuple[datetime, datetime],
    test: tuple[datetime, datetime],
) -> dict[str, Any]:
    """Fit the corrections on one window, predict the next window's ITL p50/p90 per in-flight
    level (the calibrated model's median over the level's own shapes; p90 = that × the fit
    window's p90/p50 spread at the nearest level), and say how far off each was."""
    eng = prepare(profile)
    fit_levels = observed_levels(
        db, Filter(start=fit[0], end=fit[1], engines=(engine,)), profile.replicas
    )
    shapes = [s for lv in fit_levels for s in lv.shapes]
    cap = eng.max_concurrency(shapes) if shapes else profile.max_batch_size
    corr = fit_corrections(eng.step, fit_levels, step_tokens=eng.step_tokens, max_running=cap)
    spread = {
        lv.lowest: lv.itl_p90_ms / lv.itl_ms
        for lv in fit_levels
        if lv.itl_ms > 0 and not math.isnan(lv.itl_p90_ms)
    }
    rows = []
    test_flt = Filter(start=test[0], end=test[1], engines=(engine,))
    for lv in observed_levels(db, test_flt, profile.replicas):
        if lv.requests < MIN_LEVEL_REQUESTS:
            continue
        _, itl = level_medians(
            eng.step, lv, step_tokens=eng.step_tokens, corrections=corr, max_running=cap
        )
        near = min(spread, key=lambda k: abs(k - lv.lowest)) if spread else None
        ratio = spread[near] if near is not None else math.nan
        rows.append(
            {
                "inflight": round(lv.inflight, 2),
                "requests": lv.requests,
                "observed_p50": round(lv.itl_ms, 3),
                "predicted_p50": round(itl, 3),
                "error_p50": itl / lv.itl_ms - 1,
                "observed_p90": round(lv.itl_p90_ms, 3),
                "predicted_p90": round(itl * ratio, 3),
                "error_p90": itl * ratio / lv.itl_p90_ms - 1,
            }
        )
    return {
        "engine": engine,
        "corrections": {"prefill": corr.prefill, "decode": corr.decode},
        "levels": rows,
    }
