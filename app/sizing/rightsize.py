"""The rightsizing recommendation for one engine: bounds, memory, concurrency, what-ifs, words."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TypedDict

from app.sizing.catalog import GIB, dtype_supported
from app.sizing.commands import commands
from app.sizing.gpus import WHATIF_GPUS
from app.sizing.memory import Memory
from app.sizing.profile import EngineProfile
from app.sizing.recommend import (
    DEFAULT_COVERAGE,
    DEFAULT_GRANULARITY,
    Bounds,
    Capacity,
    Traffic,
    batch_and_step,
    bounds_from_traffic,
    capacity,
    memory_for,
)
from app.sizing.seasonal import HOURS_PER_MONTH
from app.sizing.slo import money

LOW_PRECISION_CAVEAT = "lower precision needs its own quality check on your prompts"


@dataclass(frozen=True)
class WhatIf:
    """One alternative build: its memory and concurrency, or why it cannot be built."""

    label: str
    reason: str | None  # None when the GPU supports it
    memory: Memory | None = None
    capacity: Capacity | None = None
    caveat: str | None = None


@dataclass(frozen=True)
class Replicas:
    """Replicas for the window's busiest hour with today's bounds and with the recommended
    ones, each the larger of the memory need and the SLO's latency need."""

    running: int | None  # the profile's replicas today
    today: int  # what today's build needs
    after: int  # what the recommended build needs
    why_today: str  # "memory", "latency", "throughput" or "minimum"
    why_after: str
    latency: int  # the SLO's need at the busiest hour (0: no SLO or no model)
    slo: str | None  # the targets in words
    feasible: bool = True  # False: no replica count meets the SLO at some hour
    gpus_per_replica: int = 1
    cost_per_gpu_hour: float | None = None
    currency: str = "$"
    note: str | None = None

    @property
    def baseline(self) -> int:
        """What the engine runs (or, unknown, needs) today."""
        return self.running or self.today

    def cost_month(self, replicas: int) -> float | None:
        """What `replicas` cost over an average month, all day."""
        if self.cost_per_gpu_hour is None:
            return None
        return replicas * self.gpus_per_replica * HOURS_PER_MONTH * self.cost_per_gpu_hour


@dataclass(frozen=True)
class Recommendation:
    """Everything the page, the API, the CLI and the weekly email show for one engine."""

    engine: str
    status: str  # "ok", "no-data" or "does-not-fit"
    verdict: str
    coverage: float
    granularity: int
    traffic: Traffic
    current: Bounds
    recommended: Bounds | None = None
    rejected_current: int | None = None
    rejected_recommended: int | None = None
    memory_now: Memory | None = None
    memory_after: Memory | None = None
    capacity_now: Capacity | None = None
    capacity_after: Capacity | None = None
    commands: dict[str, str] = field(default_factory=dict)
    whatifs: list[WhatIf] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    replicas: Replicas | None = None
    paged: bool = True  # the KV cache holds requests at their real length (not TensorRT-LLM)
    warnings: list[str] = field(default_factory=list)  # shown beside the bounds, not in notes


def replicas_verdict(r: Replicas, rec: Bounds | None) -> str:
    """'Rebuilding to max_seq_len 3,584 serves the same traffic within the SLO on 3 replicas
    instead of 5 (saves $4,210 a month).'"""
    if r.slo:
        within = f"within the SLO ({r.slo})"
    elif r.note:
        within = "(memory alone: the latency model is unavailable)"
    else:
        within = "(memory alone: no SLO set)"
    base = r.baseline

    def n(count: int) -> str:
        return f"{count} replica{'s' if count != 1 else ''}"

    def saves(fewer: int) -> str:
        saved = r.cost_month(fewer) if fewer > 0 else None
        return f" (saves {money(saved, r.currency)} a month)" if saved is not None else ""

    if not r.feasible:
        return (
            f"No replica count meets the SLO ({r.slo}) at the busiest hour: "
            f"{r.note or 'see the latency plan'}; the replicas below are memory's need alone."
        )
    if r.running is not None and r.running < r.after:
        return (
            f"Today's {n(r.running)} {'is' if r.running == 1 else 'are'} too few for the "
            f"busiest hour {within}: it needs "
            f"{r.after}, set by {r.why_after}."
        )
    seq = "the recommended bounds"
    if rec and rec.max_seq_len:
        seq = f"max_seq_len {rec.max_seq_len:,}"
    if r.today == 0:
        return (
            f"Today's build cannot hold one full-length request in its KV cache: rebuilding to "
            f"{seq} serves the traffic {within} on {n(r.after)}."
        )
    if r.after < r.today:
        running = f"; {r.running} run today" if r.running and r.running != r.today else ""
        return (
            f"Rebuilding to {seq} serves the same traffic {within} on {n(r.after)} instead of "
            f"{r.today}{running}{saves(base - r.after)}."
        )
    if base > r.after:
        return (
            f"The busiest hour needs {n(r.after)} {within}, set by {r.why_after}: {base - r.after} "
            f"of the {base} running today are spare{saves(base - r.after)}."
        )
    return f"The busiest hour needs {n(r.after)} {within}, set by {r.why_after}; today: {base}."


def is_paged(profile: EngineProfile) -> bool:
    """Whether the engine's KV cache holds requests at their real length (vLLM, SGLang, NIM on
    vLLM) rather than reserving max_seq_len for each (TensorRT-LLM's no-evict scheduler)."""
    return profile.framework != "trtllm"


# Where "full-length" and "expected" concurrency appear side by side, this line says which is
# which (the pages, the email and the docs use it as is).
CONCURRENCY_WORDS = (
    "expected: requests of your traffic's average size that one replica's paged KV cache "
    "holds at once (what vLLM and SGLang run); full-length: requests that each use "
    "max_seq_len, the worst case (what TensorRT-LLM reserves)"
)


def current_bounds(profile: EngineProfile) -> Bounds:
    """The bounds the engine runs with today."""
    return Bounds(
        profile.max_input_len,
        profile.max_seq_len,
        None,
        profile.max_batch_size,
        profile.max_num_tokens,
    )


def proposed_bounds(
    profile: EngineProfile, t: Traffic, granularity: int
) -> tuple[Bounds, list[str]]:
    """Length bounds from the traffic, then batch and step sizes for the memory they leave."""
    lengths, notes = bounds_from_traffic(t, profile.spec().max_position_embeddings, granularity)
    assert lengths.max_input_len is not None
    step = batch_and_step(t, None, lengths.max_input_len)[1]
    after = memory_for(profile, step)
    cap = capacity(after, lengths.max_seq_len, t.mean_kv_tokens)
    batch, step, more = batch_and_step(t, cap.expected, lengths.max_input_len)
    return (
        Bounds(lengths.max_input_len, lengths.max_seq_len, lengths.max_output_len, batch, step),
        notes + more,
    )


def _gib(value: float) -> str:
    return f"{value / GIB:,.1f} GiB"


def _n(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def _whatifs(profile: EngineProfile, rec: Bounds, t: Traffic) -> list[WhatIf]:
    gpu = profile.gpu_spec()
    variants: list[tuple[str, dict]] = [
        ("FP8 KV cache", {"kv_dtype": "fp8"}),
        ("FP8 weights", {"weight_dtype": "fp8"}),
        ("FP8 weights and KV cache", {"weight_dtype": "fp8", "kv_dtype": "fp8"}),
        ("FP4 weights", {"weight_dtype": "fp4"}),
    ]
    variants += [
        (f"{name} × {profile.gpus}", {"gpu": name, "gpu_memory_gib": None})
        for name in WHATIF_GPUS
        if name != gpu.name
    ]
    # A logged capacity belongs to today's build: alternatives are estimates, scaled by how far
    # the estimate for today's build is from what its engine logged.
    scale = 1.0
    if profile.measured_kv_tokens:
        estimate = memory_for(profile.model_copy(update={"measured_kv_tokens": None}), None)
        if estimate.kv_capacity_tokens:
            scale = profile.measured_kv_tokens / estimate.kv_capacity_tokens
    out = []
    for label, change in variants:
        alt = profile.model_copy(update={**change, "measured_kv_tokens": None})
        alt_gpu = alt.gpu_spec()
        reason = dtype_supported(alt_gpu, alt.weight_dtype) or dtype_supported(
            alt_gpu, alt.kv_dtype
        )
        if reason:
            out.append(WhatIf(label, reason))
            continue
        mem = memory_for(alt, rec.max_num_tokens)
        if scale != 1.0 and mem.fits:
            mem = replace(mem, kv_capacity_tokens=int(mem.kv_capacity_tokens * scale))
        caveat = LOW_PRECISION_CAVEAT if "dtype" in " ".join(change) else None
        if not mem.fits:
            reason = f"does not fit: weights {_gib(mem.weights)} + overhead {_gib(mem.overhead)}"
            out.append(WhatIf(label, reason, mem, None, caveat))
            continue
        out.append(
            WhatIf(label, None, mem, capacity(mem, rec.max_seq_len, t.mean_kv_tokens), caveat)
        )
    return out


class _Common(TypedDict):
    """The fields every Recommendation that `rightsize` builds shares."""

    engine: str
    coverage: float
    granularity: int
    traffic: Traffic
    current: Bounds
    paged: bool


def rightsize(
    engine: str,
    profile: EngineProfile,
    traffic: Traffic,
    recommended: Bounds | None,
    rejected: tuple[int | None, int | None],
    *,
    coverage: float = DEFAULT_COVERAGE,
    granularity: int = DEFAULT_GRANULARITY,
    notes: list[str] | None = None,
    warnings: list[str] | None = None,
) -> Recommendation:
    """Assemble the recommendation; rejected = (by current bounds, by recommended bounds)."""
    cur = current_bounds(profile)
    base: _Common = {
        "engine": engine,
        "coverage": coverage,
        "granularity": granularity,
        "traffic": traffic,
        "current": cur,
        "paged": is_paged(profile),
    }
    now = memory_for(profile, profile.max_num_tokens)
    if not now.fits:
        usable = _gib(now.usable)
        return Recommendation(
            status="does-not-fit",
            verdict=(
                f"{profile.model} does not fit on {profile.gpus}× {profile.gpu}: weights "
                f"{_gib(now.weights)} and overhead {_gib(now.overhead)} exceed the {usable} "
                "the engine may use. Use more GPUs (tensor parallel), a bigger GPU or FP8 weights."
            ),
            memory_now=now,
            recommended=recommended,
            whatifs=_whatifs(profile, recommended, traffic) if recommended else [],
            **base,
        )
    if traffic.requests == 0 or recommended is None:
        return Recommendation(
            status="no-data",
            verdict=(
                f"Not enough data: no requests for engine {engine} in the window. Ship its "
                "gateway logs, or choose a longer window."
            ),
            memory_now=now,
            capacity_now=capacity(now, cur.max_seq_len, None),
            **base,
        )
    after = memory_for(profile, recommended.max_num_tokens)
    cap_now = capacity(now, cur.max_seq_len, traffic.mean_kv_tokens)
    cap_after = capacity(after, recommended.max_seq_len, traffic.mean_kv_tokens)
    all_notes = list(notes or [])
    if traffic.requests < 1 / (1 - coverage):
        all_notes.append(
            f"only {traffic.requests:,} requests: the {coverage:.1%} quantile is close to the "
            "maximum seen; widen the window for a firmer answer"
        )
    return Recommendation(
        status="ok",
        verdict=_verdict(
            traffic, cur, recommended, cap_now, cap_after, coverage, is_paged(profile)
        ),
        recommended=recommended,
        rejected_current=rejected[0],
        rejected_recommended=rejected[1],
        memory_now=now,
        memory_after=after,
        capacity_now=cap_now,
        capacity_after=cap_after,
        commands=commands(profile, recommended),
        whatifs=_whatifs(profile, recommended, traffic),
        notes=all_notes,
        warnings=list(warnings or []),
        **base,
    )


def _verdict(
    t: Traffic,
    cur: Bounds,
    rec: Bounds,
    now: Capacity,
    after: Capacity,
    coverage: float,
    paged: bool = True,
) -> str:
    """One plain sentence: what the engine is built for, what the traffic needs, the gain in
    the concurrency that matters (expected with a paged KV cache, full-length without)."""
    needed = f"{coverage:.1%} of the window's prompts were under {t.isl_q:,.0f} tokens"
    if not cur.max_input_len and not cur.max_seq_len:
        return (
            f"No current bounds in the profile; {needed}: build for max_input_len "
            f"{rec.max_input_len:,} and max_seq_len {rec.max_seq_len:,}."
        )
    built = f"Built for {cur.max_input_len or cur.max_seq_len:,}-token prompts"
    if now.worst == 0:
        return (
            f"{built}, but today's KV cache cannot hold one full-length request of "
            f"{cur.max_seq_len:,} tokens; {needed}: rebuild with max_seq_len "
            f"{rec.max_seq_len:,} ({_n(after.worst)} full-length requests fit)."
        )
    rebuild = f"rebuilding with max_seq_len {rec.max_seq_len:,}"
    full = ""
    if now.worst and after.worst and after.worst != now.worst:
        full = f"{now.worst:,} → {after.worst:,} full-length"
    if paged and now.expected and after.expected and round(after.expected) > round(now.expected):
        change = after.expected / now.expected - 1
        worst = f" (worst case {full})" if full else ""
        return (
            f"{built}; {needed}: {rebuild}, one replica holds {now.expected:,.0f} → "
            f"{after.expected:,.0f} of your traffic's requests at once "
            f"({change:+.0%}, expected with a paged KV cache){worst}."
        )
    grew = bool(now.worst and after.worst and after.worst > now.worst)
    if paged and now.expected and after.expected and grew:
        # The full-length gain alone: what vLLM runs of the real traffic barely moves.
        return (
            f"{built}; {needed}: {rebuild} changes little for your traffic, one replica holds "
            f"about {after.expected:,.0f} of its requests at once either way (expected with a "
            f"paged KV cache); only the worst case moves, {full}."
        )
    if not paged and now.worst and after.worst and after.worst > now.worst:
        return (
            f"{built}; {needed}: {rebuild}, one replica holds {full} requests at once "
            f"({after.worst / now.worst - 1:+.0%}; TensorRT-LLM reserves max_seq_len for each)."
        )
    if cur.max_seq_len and rec.max_seq_len and rec.max_seq_len > cur.max_seq_len:
        return (
            f"{built}; the traffic needs more: {coverage:.1%} of requests fit in "
            f"{rec.max_seq_len:,} tokens, beyond today's max_seq_len {cur.max_seq_len:,}."
        )
    return f"{built}; {needed}: the current bounds fit the traffic, no rebuild needed."
