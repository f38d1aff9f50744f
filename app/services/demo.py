"""Deterministic synthetic traffic at production volume: four engines on 21 GPUs, the four
shapes, a daily and weekly rhythm, a night batch window, latencies from the performance model
at the load each request met, shipped as a sampled log (docs/getting-started.md, "The demo").

The platform's traffic is set in true requests/s (`Workload.peak_rps`); the rows stored are a
sample of it, each carrying the probability it was kept (`sample_rate`), so every count the
product shows weighs a row by 1/p. `seed(requests=N, sample_rate=p)` stores N rows standing
for N / p requests: the platform's rhythm scaled to that volume.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa

from app.services import demo_physics
from app.storage import rollups
from app.storage.batches import Batch
from app.storage.database import Database
from app.storage.engines import get_profile, put_profile
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.store import RequestStore

# Rows generated at once (`make demo`'s fit in one).
CHUNK = 500_000
US = 1_000_000
DEFAULT_DAYS = 14
# `make demo` keeps about 1% of the platform's requests: ~331,000 rows for 14 days.
DEFAULT_SAMPLE_RATE = 0.01


@dataclass(frozen=True)
class Workload:
    """One kind of traffic: who sends it, its shape, when it arrives and how much of it."""

    name: str
    peak_rps: float  # true requests/s in the rhythm's busiest hour
    model: str
    engine: str
    gateway: str
    tenants: tuple[str, ...]
    isl_median: float
    isl_sigma: float
    osl_median: float
    osl_sigma: float
    rhythm: str  # "office", "always", "flat" or "night"
    isl_max: int
    osl_max: int
    stream: bool = True
    cached_share: float = 0.0  # prefix-cached tokens: up to this share of the prompt


WORKLOADS: tuple[Workload, ...] = (
    # chat: short in / long out, office hours; the engine's peak is 52 requests/s.
    Workload(
        "chat",
        52.0,
        "llama-3.1-8b-instruct",
        "chat-8b",
        "gw-public",
        ("web-chat", "support-bot", "sales-assist"),
        420,
        0.4,
        380,
        0.7,
        "office",
        isl_max=3_072,
        osl_max=1_024,
        cached_share=0.6,
    ),
    # RAG: long-ish in / short out, office hours, on the 70B engine by day.
    Workload(
        "rag",
        5.0,
        "llama-3.1-70b-instruct",
        "llm-70b",
        "gw-internal",
        ("search", "docs-qa"),
        2_000,
        0.45,
        200,
        0.5,
        "office",
        isl_max=6_144,
        osl_max=1_024,
        cached_share=0.6,
    ),
    # nightly digest batch: long in / long out, 22:00-06:00, on the same 70B engine.
    Workload(
        "digest",
        0.45,
        "llama-3.1-70b-instruct",
        "llm-70b",
        "gw-internal",
        ("nightly-digest",),
        12_000,
        0.35,
        700,
        0.4,
        "night",
        isl_max=25_600,
        osl_max=2_048,
        stream=False,
    ),
    # code assistant (chat in the IDE): medium in / medium out, office hours.
    Workload(
        "code-chat",
        3.0,
        "qwen2.5-coder-7b-instruct",
        "code-7b",
        "gw-public",
        ("ide-chat",),
        1_500,
        0.5,
        250,
        0.6,
        "office",
        isl_max=6_144,
        osl_max=1_024,
    ),
    # code completion: medium in / short out, office hours.
    Workload(
        "complete",
        9.0,
        "qwen2.5-coder-7b-instruct",
        "code-7b",
        "gw-public",
        ("ide-plugin",),
        1_200,
        0.5,
        40,
        0.6,
        "office",
        isl_max=6_144,
        osl_max=256,
    ),
    # classification and moderation: short in / short out, around the clock.
    Workload(
        "classify",
        14.0,
        "llama-3.1-8b-instruct",
        "guard-8b",
        "gw-internal",
        ("moderation", "routing"),
        300,
        0.45,
        6,
        0.4,
        "flat",
        isl_max=1_280,
        osl_max=32,
        stream=False,
    ),
)

# Illustrative on-demand list prices per GPU-hour (docs/getting-started.md, "The demo").
PRICES = {"H100": 5.50, "L40S": 1.85, "L4": 0.80}

# One profile per demo engine; with the traffic above they show (docs/getting-started.md):
# chat-8b too few replicas for its office peak (the queue grows: TTFT far above prefill);
# llm-70b built for the night's 27k-token digests all day, so a day/night split pays;
# code-7b built for the model's whole 32k context its ≤ 6k prompts never need, so its KV
# cache holds 13 requests without preemption where a rebuild holds 70 (memory-bound today);
# guard-8b already right.
DEMO_PROFILES: dict[str, dict] = {
    "chat-8b": {
        "model": "llama-3.1-8b",
        "gpu": "H100",
        "framework": "vllm",
        "engine_version": "0.19.0",
        "max_input_len": 3072,
        "max_seq_len": 4096,
        "max_batch_size": 256,
        "max_num_tokens": 8192,
        "replicas": 2,
        "slo_ttft_ms": 800.0,
        "slo_itl_ms": 40.0,
        "slo_percentile": 95.0,
        "cost_per_gpu_hour": PRICES["H100"],
    },
    "llm-70b": {
        "model": "llama-3.1-70b",
        "gpu": "H100",
        "tensor_parallel": 4,
        "framework": "trtllm",
        "max_input_len": 26624,
        "max_seq_len": 27648,
        "max_batch_size": 256,
        "max_num_tokens": 16384,
        "replicas": 3,
        "slo_ttft_ms": 3000.0,
        "slo_itl_ms": 80.0,
        "slo_percentile": 95.0,
        "cost_per_gpu_hour": PRICES["H100"],
    },
    "code-7b": {
        "model": "qwen2.5-7b",
        "hf_model": "Qwen/Qwen2.5-Coder-7B-Instruct",
        "gpu": "L40S",
        "framework": "trtllm",
        "max_input_len": 30720,
        "max_seq_len": 32768,
        "max_batch_size": 256,
        "max_num_tokens": 8192,
        "replicas": 5,
        "slo_ttft_ms": 800.0,
        "slo_itl_ms": 200.0,
        "slo_percentile": 95.0,
        "cost_per_gpu_hour": PRICES["L40S"],
    },
    "guard-8b": {
        "model": "llama-3.1-8b",
        "gpu": "L4",
        "weight_dtype": "fp8",
        "framework": "vllm",
        "engine_version": "0.19.0",
        "max_input_len": 1280,
        "max_seq_len": 1536,
        "max_batch_size": 16,
        "max_num_tokens": 4096,
        "replicas": 2,
        "slo_ttft_ms": 600.0,
        "slo_itl_ms": 400.0,
        "slo_percentile": 95.0,
        "cost_per_gpu_hour": PRICES["L4"],
    },
}

# The demo engines, in the order of DEMO_PROFILES.
ENGINES = tuple(DEMO_PROFILES)


@dataclass
class SeedStats:
    """What a seeding run stored, and the traffic it stands for."""

    accepted: int = 0
    duplicates: int = 0
    sample_rate: float = 1.0
    represented: float = 0.0  # the true requests the rows stand for (rows / sample_rate)


def _rhythm(kind: str, local_hour: np.ndarray, weekday: np.ndarray) -> np.ndarray:
    """Relative arrival rate per hour for a rhythm, in local time (1 at its busiest)."""
    h = local_hour.astype(np.float64)
    weekend = weekday >= 5
    if kind == "night":  # 22:00-06:00 every day, flat
        return np.where((h >= 22) | (h < 6), 1.0, 0.0)
    if kind == "flat":  # machine traffic (moderation, routing): the same every hour
        return np.ones_like(h)
    day = np.exp(-0.5 * ((h - 13.5) / 3.2) ** 2)  # peak early afternoon
    if kind == "office":
        return (0.04 + day) / 1.04 * np.where(weekend, 0.3, 1.0)
    return (0.35 + 0.65 * day) * np.where(weekend, 0.7, 1.0)


def _hour_grid(start: datetime, days: int, tz: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start of every UTC hour in the window with its local hour and weekday."""
    zone = ZoneInfo(tz)
    hours = [start + timedelta(hours=i) for i in range(days * 24)]
    local = [h.astimezone(zone) for h in hours]
    starts = np.array([int(h.timestamp()) * US for h in hours], dtype=np.int64)
    return (starts, np.array([t.hour for t in local]), np.array([t.weekday() for t in local]))


def hourly_rates(days: int, tz: str, end: datetime, scale: float = 1.0) -> np.ndarray:
    """True arrivals/s per hour of the window (hours × WORKLOADS) at `scale` × the design."""
    _, local_hour, weekday = _hour_grid(end - timedelta(days=days), days, tz)
    return np.column_stack(
        [scale * w.peak_rps * _rhythm(w.rhythm, local_hour, weekday) for w in WORKLOADS]
    )


def design_requests(days: int = DEFAULT_DAYS, tz: str = "UTC") -> float:
    """The platform's true requests over `days` at its design volume."""
    # Any end will do for whole weeks; a fixed one keeps a partial week's count fixed too.
    return float(hourly_rates(days, tz, datetime(2026, 1, 5, tzinfo=UTC)).sum() * 3600.0)


def default_rows(days: int = DEFAULT_DAYS, tz: str = "UTC") -> int:
    """Rows `make demo` stores: the design volume at DEFAULT_SAMPLE_RATE."""
    return round(design_requests(days, tz) * DEFAULT_SAMPLE_RATE)


def _lognormal(
    rng: np.random.Generator, median: float, sigma: float, n: int, lo: int, hi: int
) -> np.ndarray:
    return np.clip(np.round(rng.lognormal(np.log(median), sigma, n)), lo, hi).astype(np.int64)


def _loads(rates: np.ndarray) -> dict[str, tuple[demo_physics.Physics, demo_physics.Load]]:
    """Each engine's latency surfaces and its fluid load per replica, hour by hour."""
    out = {}
    for name, profile in DEMO_PROFILES.items():
        ph = demo_physics.physics(profile)
        ks = [k for k, w in enumerate(WORKLOADS) if w.engine == name]
        services = []
        for k in ks:
            w = WORKLOADS[k]
            shape_rng = np.random.default_rng([k, 7])  # the same shapes every run
            isl = _lognormal(shape_rng, w.isl_median, w.isl_sigma, 256, 1, w.isl_max)
            osl = _lognormal(shape_rng, w.osl_median, w.osl_sigma, 256, 1, w.osl_max)
            services.append(demo_physics.service(ph, isl, osl))
        out[name] = (ph, demo_physics.load(ph, rates[:, ks], services, profile["replicas"]))
    return out


def generate(
    n: int,
    *,
    days: int = DEFAULT_DAYS,
    seed: int = 1,
    tz: str = "UTC",
    end: datetime | None = None,
    offset: int = 0,
    total: int | None = None,
    sample_rate: float = DEFAULT_SAMPLE_RATE,
    scale: float = 1.0,
    itl_scale: float = 1.0,
) -> pa.Table:
    """Rows `offset`..`offset+n` of `total` rows of a demo log kept at `sample_rate` of the
    platform's traffic at `scale` × its design volume (same seed and chunks, same rows).

    Latencies come from the performance model of each engine's profile (demo_physics.py) at
    the load its true arrival rate puts on each replica; `itl_scale` slows every decode step
    by that factor (what a calibration must find)."""
    end = end or datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    hour_starts, _, _ = _hour_grid(end - timedelta(days=days), days, tz)
    rates = hourly_rates(days, tz, end, scale)
    rng = np.random.default_rng([seed, offset])
    total = total or n
    volume = rates.sum(axis=0)
    which = rng.choice(len(WORKLOADS), size=n, p=volume / volume.sum())

    started = np.empty(n, dtype=np.int64)
    hour = np.empty(n, dtype=np.int64)
    isl = np.empty(n, dtype=np.int64)
    osl = np.empty(n, dtype=np.int64)
    for k, w in enumerate(WORKLOADS):
        idx = np.flatnonzero(which == k)
        if not len(idx):
            continue
        hour[idx] = rng.choice(len(hour_starts), size=len(idx), p=rates[:, k] / volume[k])
        started[idx] = hour_starts[hour[idx]] + rng.integers(0, 3600 * US, len(idx))
        isl[idx] = _lognormal(rng, w.isl_median, w.isl_sigma, len(idx), 1, w.isl_max)
        osl[idx] = _lognormal(rng, w.osl_median, w.osl_sigma, len(idx), 1, w.osl_max)

    engine_names = np.array([w.engine for w in WORKLOADS])[which]
    ttft = np.empty(n)
    itl = np.empty(n)
    queue = np.empty(n)
    timed_out = np.zeros(n, dtype=bool)
    offset_s = (started - hour_starts[hour]) / US
    for name, (ph, ld) in _loads(rates).items():
        idx = np.flatnonzero(engine_names == name)
        if not len(idx):
            continue
        # Unsampled rows are the traffic: count what is in flight from them (this chunk's rows
        # stand for all chunks'), per replica.
        per_row = total / n / DEMO_PROFILES[name]["replicas"]
        counted = (started[idx], per_row) if sample_rate >= 1 else None
        ttft[idx], itl[idx], queue[idx], timed_out[idx] = demo_physics.sample(
            ph,
            ld,
            rng,
            isl[idx],
            osl[idx],
            hour[idx],
            offset_s[idx],
            itl_scale=itl_scale,
            counted=counted,
        )
    status = np.full(n, "ok", dtype=object)
    error_type = np.full(n, None, dtype=object)
    roll = rng.random(n)
    failed = roll < 0.005
    cancelled = (roll >= 0.005) & (roll < 0.007) & ~timed_out
    error_type[failed] = rng.choice(
        ["http_500", "timeout", "http_503", "context_length"], size=int(failed.sum())
    )
    error_type[timed_out] = "timeout"  # gave up waiting for a slot at an overloaded peak
    failed |= timed_out
    status[failed] = "error"
    status[cancelled] = "cancelled"
    osl = np.where(failed, 0, osl)
    osl = np.where(cancelled, np.maximum(1, osl // 3), osl)
    e2e = ttft + itl * np.maximum(osl - 1, 0)
    e2e = np.where(failed, ttft + rng.exponential(200, n), e2e)

    # Per-token gaps for ~2% of successful requests: ITL drifts up as the context grows.
    with_gaps = (rng.random(n) < 0.02) & (osl > 1) & (status == "ok")
    counts = np.where(with_gaps, osl - 1, 0)
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    owner = np.repeat(np.arange(n), counts)
    position = np.arange(len(owner)) - np.repeat(offsets[:-1], counts)
    gaps = itl[owner] * (1 + position / 4000) * rng.lognormal(0, 0.25, len(owner))
    gap_list = pa.ListArray.from_arrays(
        pa.array(offsets), pa.array(np.round(gaps, 3)), mask=pa.array(~with_gaps)
    )

    tenants = np.empty(n, dtype=object)
    for k, w in enumerate(WORKLOADS):
        idx = np.flatnonzero(which == k)
        tenants[idx] = np.array(w.tenants, dtype=object)[rng.integers(0, len(w.tenants), len(idx))]
    cached_share = np.array([w.cached_share for w in WORKLOADS])[which]
    cached = (isl * rng.uniform(0, 1, n) * cached_share).astype(np.int64)
    ids = np.char.add(f"demo-{seed}-", np.char.zfill((np.arange(n) + offset).astype(str), 10))

    ts = pa.timestamp("us", tz="UTC")
    columns = {
        "gateway": pa.array(np.array([w.gateway for w in WORKLOADS])[which]),
        "request_id": pa.array(ids.astype(object)),
        "started_at": pa.array(started).cast(ts),
        "received_at": pa.array(started + (e2e * 1000).astype(np.int64) + 50_000).cast(ts),
        "model": pa.array(np.array([w.model for w in WORKLOADS])[which]),
        "engine": pa.array(engine_names),
        "tenant": pa.array(tenants, pa.string()),
        "isl": pa.array(isl, pa.int32()),
        "osl": pa.array(osl, pa.int32()),
        "tokens_estimated": pa.array(np.zeros(n, dtype=bool)),
        "ttft_ms": pa.array(np.round(ttft, 3)),
        "e2e_ms": pa.array(np.round(e2e, 3)),
        "itl_ms": pa.array(np.where(osl > 1, np.round(itl, 3), np.nan), from_pandas=True),
        "queue_ms": pa.array(np.round(queue, 3)),
        "token_gaps_ms": gap_list,
        "status": pa.array(status, pa.string()),
        "error_type": pa.array(error_type, pa.string()),
        "stream": pa.array(np.array([w.stream for w in WORKLOADS])[which]),
        "cached_tokens": pa.array(cached, pa.int32()),
        "sample_rate": pa.array(np.full(n, sample_rate)),
    }
    # Built for the schema as it stands (older schemas have no sample_rate column).
    return pa.table({c: columns[c] for c in REQUESTS_SCHEMA.names}, schema=REQUESTS_SCHEMA)


def plan(
    requests: int | None, sample_rate: float | None, days: int, tz: str
) -> tuple[int, float, float]:
    """(rows, sample rate, scale of the design volume) for a seeding run.

    No `requests`: the design volume at `sample_rate` (default 1%). With `requests`: that many
    rows, kept at `sample_rate` (default 1: every request), standing for requests / rate."""
    if sample_rate is not None and not 0 < sample_rate <= 1:
        raise ValueError("sample_rate must be above 0 and at most 1")
    design = design_requests(days, tz)
    if requests is None:
        rate = DEFAULT_SAMPLE_RATE if sample_rate is None else sample_rate
        return max(1, round(design * rate)), rate, 1.0
    if requests < 1:
        raise ValueError("requests must be at least 1")
    rate = 1.0 if sample_rate is None else sample_rate
    return requests, rate, requests / rate / design


def seed(
    db: Database,
    *,
    requests: int | None = None,
    sample_rate: float | None = None,
    days: int = DEFAULT_DAYS,
    seed: int = 1,
    tz: str = "UTC",
    end: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    itl_scale: float = 1.0,
) -> SeedStats:
    """Generate and store demo traffic in chunks; re-running with the same seed adds nothing.

    See `plan` for `requests` and `sample_rate`; `itl_scale` slows every decode step by that
    factor (a known slowdown to calibrate on)."""
    end = end or datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    rows, rate, scale = plan(requests, sample_rate, days, tz)
    store = RequestStore(db.new_cursor())
    stats = SeedStats(sample_rate=rate, represented=rows / rate)
    try:
        for offset in range(0, rows, CHUNK):
            n = min(CHUNK, rows - offset)
            table = generate(
                n,
                days=days,
                seed=seed,
                tz=tz,
                end=end,
                offset=offset,
                total=rows,
                sample_rate=rate,
                scale=scale,
                itl_scale=itl_scale,
            )
            (result,) = store.write([Batch("demo", "demo", end, table)])
            stats.accepted += result.accepted
            stats.duplicates += result.duplicates
            if progress:
                progress(n)
        rollups.rebuild_all(store.con, tz)  # the dashboard reads whole hours from them at once
    finally:
        store.con.close()
    cur = db.cursor()
    for name, profile in DEMO_PROFILES.items():
        if get_profile(cur, name) is None:  # a profile the user edited stays as it is
            put_profile(cur, name, profile, end)
    return stats
