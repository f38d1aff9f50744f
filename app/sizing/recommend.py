"""Bounds from observed traffic, concurrency before and after, batch and step sizes (DESIGN §7)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from app.sizing.memory import Memory, memory_for_profile
from app.sizing.profile import EngineProfile

DEFAULT_COVERAGE = 0.999
DEFAULT_GRANULARITY = 256
DEFAULT_HEADROOM = 0.2
# max_num_tokens: prefill tokens one scheduler step should take at the peak minute. A step of
# a quarter second keeps time to first token reasonable under a burst of long prompts; longer
# prompts are prefilled in chunks. Bounded so the activation memory stays modest.
STEP_SECONDS = 0.25
MIN_STEP_TOKENS = 2048
MAX_STEP_TOKENS = 16384


@dataclass(frozen=True)
class Traffic:
    """What sizing needs of an engine's traffic over a window (computed in app/analytics)."""

    requests: int
    isl_q: float | None  # quantile at the coverage target
    osl_q: float | None
    seq_q: float | None  # of ISL + OSL
    mean_kv_tokens: float | None  # E[ISL + OSL/2]: a request's average KV footprint
    peak_rate: float  # requests/s in the busiest minute
    mean_e2e_s: float | None
    peak_prefill_tps: float  # input tokens/s in the busiest minute
    quantiles: dict[str, dict[str, float | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class Bounds:
    """Engine bounds; None where a profile does not say."""

    max_input_len: int | None
    max_seq_len: int | None
    max_output_len: int | None = None
    max_batch_size: int | None = None
    max_num_tokens: int | None = None


def round_up(value: float, granularity: int) -> int:
    """The next multiple of granularity at or above value (at least one granule)."""
    return max(granularity, int(math.ceil(value / granularity)) * granularity)


def bounds_from_traffic(
    t: Traffic, max_context: int, granularity: int = DEFAULT_GRANULARITY
) -> tuple[Bounds, list[str]]:
    """Recommended length bounds for the coverage quantiles, with notes on what limited them."""
    notes: list[str] = []
    assert t.isl_q is not None and t.osl_q is not None and t.seq_q is not None
    max_input = round_up(t.isl_q, granularity)
    max_output = round_up(t.osl_q, granularity)
    # Never below what one request needs: a full prompt plus at least one granule of output.
    max_seq = max(round_up(t.seq_q, granularity), max_input + granularity)
    if granularity * 2 > max_context:
        raise ValueError(
            f"granularity: {granularity:,} is too coarse for a {max_context:,}-token context"
        )
    if max_seq > max_context:
        notes.append(
            f"the traffic asks for {max_seq:,} tokens but the model's context is "
            f"{max_context:,}: capped"
        )
        max_seq = max_context
        max_input = min(max_input, max_context - granularity)
    return Bounds(max_input, max_seq, max_output), notes


@dataclass(frozen=True)
class Capacity:
    """How many requests one replica holds: worst case and expected with a paged KV cache."""

    worst: int | None  # kv_capacity // max_seq_len: every request reserves a full sequence
    expected: float | None  # kv_capacity / E[ISL + OSL/2]


def capacity(memory: Memory, max_seq_len: int | None, mean_kv_tokens: float | None) -> Capacity:
    """Concurrency of one replica for a max_seq_len and the observed mean KV footprint."""
    kv = memory.kv_capacity_tokens
    worst = kv // max_seq_len if max_seq_len and memory.fits else None
    expected = kv / mean_kv_tokens if mean_kv_tokens and memory.fits else None
    return Capacity(worst, expected)


def batch_and_step(
    t: Traffic, expected: float | None, max_input: int, headroom: float = DEFAULT_HEADROOM
) -> tuple[int | None, int, list[str]]:
    """max_batch_size: the peak demand (Little's law) + headroom, at most what the KV cache holds.

    max_num_tokens: the prefill tokens of a quarter second at the peak minute, between 2,048
    and 16,384; prompts longer than that are prefilled in chunks (`chunking_notes`)."""
    notes: list[str] = []
    batch: int | None = None
    if expected:
        room = max(1, math.floor(expected))
        batch = room // 8 * 8 if room >= 8 else room
        if t.mean_e2e_s:
            demand = t.peak_rate * t.mean_e2e_s  # requests in flight at the peak minute
            wanted = max(8, math.ceil(demand * (1 + headroom) / 8) * 8)
            batch = min(wanted, room)
            if demand * (1 + headroom) > room:
                notes.append(
                    f"the peak minute keeps {demand:,.0f} requests in flight (+{headroom:.0%} "
                    f"headroom) but one replica holds about {room:,}: run more replicas"
                )
            else:
                notes.append(
                    f"max_batch_size covers the peak minute's {demand:,.1f} requests in flight "
                    f"+{headroom:.0%}; the KV cache would hold about {room:,}"
                )
    step_wanted = min(max(t.peak_prefill_tps * STEP_SECONDS, MIN_STEP_TOKENS), MAX_STEP_TOKENS)
    step = round_up(step_wanted, DEFAULT_GRANULARITY)
    return batch, step, notes


def median_prompt(t: Traffic) -> float | None:
    """The window's median prompt (ISL p50), when the traffic says."""
    return (t.quantiles.get("isl") or {}).get("p50")


def chunking(step: int | None, max_input: int | None, t: Traffic) -> tuple[str | None, str | None]:
    """(note, warning) on what a max_num_tokens of `step` does to prefills: prompts longer than
    it are prefilled in chunks, one chunk a scheduler step; below the median prompt, most are
    (the warning)."""
    if not step or not max_input or step >= max_input:
        return None, None
    note = (
        f"prompts longer than max_num_tokens ({step:,}) are prefilled in chunks: on by "
        "default in vLLM; TensorRT-LLM needs paged context FMHA and chunked context"
    )
    median = median_prompt(t)
    if not median or step >= median:
        return note, None
    chunks = math.ceil(median / step)
    return note, (
        f"max_num_tokens {step:,} is below the median prompt ({median:,.0f} tokens): most "
        f"prompts are prefilled in {chunks} or more chunks, each waiting a scheduler step, "
        "which adds to their time to first token"
    )


def memory_for(profile: EngineProfile, step_tokens: int | None) -> Memory:
    """One replica's memory for a profile (a measured KV capacity wins over the estimate):
    the parallelism split, framework and version, context, batch and logged weights."""
    return memory_for_profile(profile, step_tokens)
