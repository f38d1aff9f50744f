"""Deterministic synthetic traffic: several models and engines, the four shapes, a daily and
weekly rhythm, a night batch workload, and latencies that follow the physics of serving."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa

from app.services.demo_physics import physics
from app.storage import rollups
from app.storage.batches import Batch
from app.storage.database import Database
from app.storage.engines import get_profile, put_profile
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.store import RequestStore

# Rows generated at once. The requests in flight are counted within a chunk (and scaled up
# when there are several), so `make demo`'s 300,000 fit in one and count exactly.
CHUNK = 500_000
US = 1_000_000


@dataclass(frozen=True)
class Workload:
    """One kind of traffic: who sends it, its shape, and when it arrives."""

    name: str
    share: float
    model: str
    engine: str
    gateway: str
    tenants: tuple[str, ...]
    isl_median: float
    isl_sigma: float
    osl_median: float
    osl_sigma: float
    rhythm: str  # "office", "always" or "night"
    isl_max: int = 32_000
    osl_max: int = 4_096


WORKLOADS: tuple[Workload, ...] = (
    # chat: short in / long out, office hours
    Workload(
        "chat",
        0.38,
        "llama-3.1-8b-instruct",
        "chat-8b",
        "gw-public",
        ("web-chat", "support-bot", "sales-assist"),
        420,
        0.4,
        380,
        0.7,
        "office",
        isl_max=4_096,  # the engine is built for 4,096-token prompts (see DEMO_PROFILES)
    ),
    # classification: short in / short out, around the clock
    Workload(
        "classify",
        0.14,
        "llama-3.1-8b-instruct",
        "chat-8b",
        "gw-internal",
        ("moderation", "routing"),
        220,
        0.5,
        6,
        0.5,
        "always",
        osl_max=64,
    ),
    # RAG: long in / short out, office hours
    Workload(
        "rag",
        0.22,
        "llama-3.1-70b-instruct",
        "llm-70b",
        "gw-internal",
        ("search", "docs-qa"),
        3_600,
        0.55,
        170,
        0.6,
        "office",
    ),
    # summarisation batch: long in / long out, at night on the same engine as RAG
    Workload(
        "summarise",
        0.10,
        "llama-3.1-70b-instruct",
        "llm-70b",
        "gw-internal",
        ("nightly-digest",),
        9_000,
        0.45,
        900,
        0.45,
        "night",
        osl_max=3_000,
    ),
    # code completion: medium in / short out, weekday office hours
    Workload(
        "code",
        0.16,
        "qwen2.5-coder-7b-instruct",
        "code-7b",
        "gw-public",
        ("ide-plugin",),
        1_400,
        0.7,
        55,
        0.8,
        "office",
        isl_max=16_000,
        osl_max=512,
    ),
)

# The demo engines; their profiles (DEMO_PROFILES) decide their latencies.
ENGINES = ("chat-8b", "llm-70b", "code-7b")


@dataclass
class SeedStats:
    """What a seeding run stored."""

    accepted: int = 0
    duplicates: int = 0


def _rhythm(kind: str, local_hour: np.ndarray, weekday: np.ndarray) -> np.ndarray:
    """Relative arrival rate per hour for a rhythm, in local time."""
    h = local_hour.astype(np.float64)
    weekend = weekday >= 5
    if kind == "night":  # 22:00-06:00 every day, flat
        return np.where((h >= 22) | (h < 6), 1.0, 0.0)
    day = np.exp(-0.5 * ((h - 13.5) / 3.2) ** 2)  # peak early afternoon
    if kind == "office":
        return (0.04 + day) * np.where(weekend, 0.3, 1.0)
    return (0.35 + 0.65 * day) * np.where(weekend, 0.7, 1.0)


def _hour_grid(start: datetime, days: int, tz: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start of every UTC hour in the window with its local hour and weekday."""
    zone = ZoneInfo(tz)
    hours = [start + timedelta(hours=i) for i in range(days * 24)]
    local = [h.astimezone(zone) for h in hours]
    starts = np.array([int(h.timestamp()) * US for h in hours], dtype=np.int64)
    return (starts, np.array([t.hour for t in local]), np.array([t.weekday() for t in local]))


def _lognormal(
    rng: np.random.Generator, median: float, sigma: float, n: int, lo: int, hi: int
) -> np.ndarray:
    return np.clip(np.round(rng.lognormal(np.log(median), sigma, n)), lo, hi).astype(np.int64)


def generate(
    n: int,
    *,
    days: int = 14,
    seed: int = 1,
    tz: str = "UTC",
    end: datetime | None = None,
    offset: int = 0,
    total: int | None = None,
    itl_scale: float = 1.0,
) -> pa.Table:
    """Rows `offset`..`offset+n` of `total` demo requests (same seed and chunks, same rows).

    Latencies come from the performance model of each engine's profile (demo_physics.py) at
    the requests in flight the engine's arrival rate gives; `itl_scale` slows every decode
    step by that factor (what a calibration must find)."""
    end = end or datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    hour_starts, local_hour, weekday = _hour_grid(start, days, tz)
    rng = np.random.default_rng([seed, offset])
    shares = np.array([w.share for w in WORKLOADS])
    which = rng.choice(len(WORKLOADS), size=n, p=shares / shares.sum())

    started = np.empty(n, dtype=np.int64)
    isl = np.empty(n, dtype=np.int64)
    osl = np.empty(n, dtype=np.int64)
    rate = np.zeros(n, dtype=np.float64)  # the engine's arrival rate in the request's hour
    total = total or n
    engine_rate = {name: np.zeros(len(hour_starts)) for name in ENGINES}
    for w in WORKLOADS:
        p = _rhythm(w.rhythm, local_hour, weekday)
        engine_rate[w.engine] += total * w.share / shares.sum() * p / p.sum() / 3600.0
    for k, w in enumerate(WORKLOADS):
        idx = np.flatnonzero(which == k)
        if not len(idx):
            continue
        p = _rhythm(w.rhythm, local_hour, weekday)
        hours = rng.choice(len(hour_starts), size=len(idx), p=p / p.sum())
        started[idx] = hour_starts[hours] + rng.integers(0, 3600 * US, len(idx))
        isl[idx] = _lognormal(rng, w.isl_median, w.isl_sigma, len(idx), 1, w.isl_max)
        osl[idx] = _lognormal(rng, w.osl_median, w.osl_sigma, len(idx), 1, w.osl_max)
        rate[idx] = engine_rate[w.engine][hours]

    engine_names = np.array([w.engine for w in WORKLOADS])[which]
    ttft = np.empty(n)
    itl = np.empty(n)
    queue = np.empty(n)
    for name in ENGINES:
        idx = np.flatnonzero(engine_names == name)
        if len(idx):
            ttft[idx], itl[idx], queue[idx] = physics(DEMO_PROFILES[name]).sample(
                rng,
                isl[idx],
                osl[idx],
                started[idx],
                rate[idx],
                thinning=total / n,
                itl_scale=itl_scale,
            )
    status = np.full(n, "ok", dtype=object)
    error_type = np.full(n, None, dtype=object)
    roll = rng.random(n)
    failed = roll < 0.005
    cancelled = (roll >= 0.005) & (roll < 0.007)
    status[failed] = "error"
    error_type[failed] = rng.choice(
        ["http_500", "timeout", "http_503", "context_length"], size=int(failed.sum())
    )
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
    cached = np.where(np.isin(which, [0, 2]), (isl * rng.uniform(0, 0.6, n)).astype(np.int64), 0)
    ids = np.char.add(f"demo-{seed}-", np.char.zfill((np.arange(n) + offset).astype(str), 10))

    ts = pa.timestamp("us", tz="UTC")
    return pa.table(
        {
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
            "stream": pa.array(which != 1),
            "cached_tokens": pa.array(cached, pa.int32()),
        },
        schema=REQUESTS_SCHEMA,
    )


# One profile per demo engine. chat-8b is deliberately over-provisioned: built for 4,096-token
# prompts while 99.9% of its traffic is under about 1,300, so `make demo` shows a rebuild at once.
DEMO_PROFILES: dict[str, dict] = {
    "chat-8b": {
        "model": "llama-3.1-8b",
        "gpu": "L40S",
        "framework": "vllm",
        "max_input_len": 4096,
        "max_seq_len": 8192,
        "max_batch_size": 64,
        "max_num_tokens": 8192,
        "cost_per_gpu_hour": 1.1,
    },
    "llm-70b": {
        "model": "llama-3.1-70b",
        "gpu": "H100",
        "tensor_parallel": 4,
        "framework": "trtllm",
        "max_input_len": 32768,
        "max_seq_len": 36864,
        "max_batch_size": 64,
        "max_num_tokens": 16384,
        "cost_per_gpu_hour": 2.5,
    },
    "code-7b": {
        "model": "qwen2.5-7b",
        "hf_model": "Qwen/Qwen2.5-Coder-7B-Instruct",
        "gpu": "L4",
        "framework": "nim",
        "max_input_len": 16384,
        "max_seq_len": 16896,
        "max_batch_size": 32,
        "max_num_tokens": 16384,
        "cost_per_gpu_hour": 0.8,
    },
}


def seed(
    db: Database,
    *,
    requests: int = 300_000,
    days: int = 14,
    seed: int = 1,
    tz: str = "UTC",
    end: datetime | None = None,
    progress: Callable[[int], None] | None = None,
    itl_scale: float = 1.0,
) -> SeedStats:
    """Generate and store demo traffic in chunks; re-running with the same seed adds nothing.

    `itl_scale` slows every decode step by that factor (a known slowdown to calibrate on)."""
    end = end or datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    store = RequestStore(db.new_cursor())
    stats = SeedStats()
    try:
        for offset in range(0, requests, CHUNK):
            n = min(CHUNK, requests - offset)
            rows = generate(
                n,
                days=days,
                seed=seed,
                tz=tz,
                end=end,
                offset=offset,
                total=requests,
                itl_scale=itl_scale,
            )
            (result,) = store.write([Batch("demo", "demo", end, rows)])
            stats.accepted += result.accepted
            stats.duplicates += result.duplicates
            if progress:
                progress(n)
        rollups.rebuild_all(store.con)  # the dashboard reads whole hours from them at once
    finally:
        store.con.close()
    cur = db.cursor()
    for name, profile in DEMO_PROFILES.items():
        if get_profile(cur, name) is None:  # a profile the user edited stays as it is
            put_profile(cur, name, profile, end)
    return stats
