"""The demo's latencies, from the same performance model the predictions use, at the load
each request met.

For each demo engine the model is sampled once on a grid (ISL × OSL × requests decoding) and
interpolated in log-space, so generating 500,000 rows costs 600 model calls per engine. The
load is a fluid queue per replica, hour by hour, from the engine's true arrival
rates (the traffic a sampled log stands for, not the rows kept): below what a replica serves
at its slot limit (the KV cache at the hour's mix, the batch cap), the requests running settle
where the throughput the model gives at that batch equals the arrival rate (Little's law);
above it, the replica runs full and the excess waits for a slot, a backlog that grows through
the peak and drains after it (a client gives up after PATIENCE_S: a timeout). A request then
decodes at the model's ITL for the requests running, and its TTFT is its prefill, the decode
steps its prefill chunks share, the M/G/1 wait on the prefill work (as app/sizing/perf.py has
it) and its wait for a slot. Noise: lognormal, σ 0.15 on ITL, 0.12 on prefill; the requests
running at an arrival vary as a Poisson count (or, when the rows are the whole traffic, are
counted from them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from app.services.performance import prepare
from app.sizing.profile import EngineProfile

ISL_GRID = np.unique(np.geomspace(16, 32768, 10).astype(int))
OSL_GRID = np.unique(np.geomspace(2, 4096, 6).astype(int))
# Up to the demo profiles' largest batch (256).
INFLIGHT_GRID = np.array([1, 2, 4, 8, 16, 32, 64, 128, 192, 256])
# Batches the service curve is evaluated at (between the grid's, interpolated).
SERVICE_GRID = np.unique(np.round(np.geomspace(1, INFLIGHT_GRID[-1], 48), 1))
# A client waits this long for a slot, then gives up (the gateway's timeout): the backlog a
# replica holds is at most what it serves in that time.
PATIENCE_S = 60.0


@dataclass(frozen=True)
class Physics:
    """One demo engine's latency surfaces and what a replica holds."""

    prefill: RegularGridInterpolator  # log ISL -> ms
    itl: RegularGridInterpolator  # (log ISL, log OSL, running) -> ms
    step_tokens: int
    kv_tokens: int
    max_batch: int
    full_step_ms: float  # the prefill of a full step: what a short prompt takes a share of

    def _points(self, isl: np.ndarray, osl: np.ndarray, c: np.ndarray) -> np.ndarray:
        li = np.log(np.clip(isl, ISL_GRID[0], ISL_GRID[-1]))
        lo = np.log(np.clip(np.maximum(osl, 2), OSL_GRID[0], OSL_GRID[-1]))
        return np.column_stack([li, lo, np.clip(c, 1, INFLIGHT_GRID[-1])])

    def prefill_ms(self, isl: np.ndarray) -> np.ndarray:
        """A prompt's prefill alone."""
        li = np.log(np.clip(isl, ISL_GRID[0], ISL_GRID[-1]))
        return np.asarray(self.prefill(li[:, None]))

    def itl_ms(self, isl: np.ndarray, osl: np.ndarray, running: np.ndarray) -> np.ndarray:
        """Time per output token with `running` requests decoding."""
        return np.asarray(self.itl(self._points(isl, osl, running)))

    def interference_ms(
        self, isl: np.ndarray, osl: np.ndarray, running: np.ndarray, itl: np.ndarray
    ) -> np.ndarray:
        """Before its first token a request waits half a step and shares each prefill chunk's
        step with the others decoding (as app/sizing/perf.py adds it)."""
        other = self.itl_ms(isl, osl, np.maximum(running - 1, 1))
        chunks = np.ceil(isl / self.step_tokens)
        return np.where(running > 1, itl / 2 + chunks * other, 0.0)

    def work_s(self, isl: np.ndarray, prefill_ms: np.ndarray) -> np.ndarray:
        """The prefill work a request puts on the replica (short prompts share a step)."""
        share = self.full_step_ms * isl / self.step_tokens
        return np.where(isl >= self.step_tokens, prefill_ms, np.minimum(prefill_ms, share)) / 1e3


@dataclass(frozen=True)
class Service:
    """A workload's mean service on one replica, per batch in SERVICE_GRID."""

    e2e_ms: np.ndarray  # mean prefill + first-token wait + decode at each batch
    seq_tokens: float  # mean ISL + OSL (what the KV cache holds per request)
    work_s: float  # mean prefill work per request (seconds)
    work2_s: float  # its second moment


def service(ph: Physics, isl: np.ndarray, osl: np.ndarray) -> Service:
    """Mean service of requests of these shapes at every batch of SERVICE_GRID."""
    n, k = len(isl), len(SERVICE_GRID)
    ii, oo = np.tile(isl, k), np.tile(osl, k)
    cc = np.repeat(SERVICE_GRID, n)
    itl = ph.itl_ms(ii, oo, cc)
    pre = np.tile(ph.prefill_ms(isl), k)
    e2e = pre + ph.interference_ms(ii, oo, cc, itl) + itl * np.maximum(oo - 1, 0)
    work = ph.work_s(isl, ph.prefill_ms(isl))
    return Service(
        e2e.reshape(k, n).mean(axis=1),
        float((isl + osl).mean()),
        float(work.mean()),
        float((work**2).mean()),
    )


@dataclass(frozen=True)
class Load:
    """One engine's load per replica, hour by hour of the window (a fluid queue)."""

    rate: np.ndarray  # arrivals/s per replica
    running: np.ndarray  # requests decoding at once in steady state (when no backlog)
    cap: np.ndarray  # requests a replica runs at once at the hour's mix
    served: np.ndarray  # requests/s a replica completes running `cap`
    backlog: np.ndarray  # requests waiting for a slot at the start of the hour
    work_s: np.ndarray  # mean prefill work per request at the hour's mix
    work2_s: np.ndarray

    def at(
        self, hour: np.ndarray, offset_s: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(requests decoding, requests waiting for a slot, share of arrivals that give up)
        per replica at these moments."""
        slope = self.rate[hour] - self.served[hour]
        limit = self.served[hour] * PATIENCE_S
        waiting = np.clip(self.backlog[hour] + slope * offset_s, 0.0, limit)
        full = (waiting > 0) | (slope > 0)
        # At the limit the queue holds still: the arrivals beyond what is served time out.
        give_up = np.where((waiting >= limit) & (slope > 0), slope / self.rate[hour], 0.0)
        return np.where(full, self.cap[hour], self.running[hour]), waiting, give_up


def load(ph: Physics, rates: np.ndarray, services: list[Service], replicas: int) -> Load:
    """The fluid queue of one replica for per-hour arrival rates (hours × workloads, true
    requests/s of the whole engine) and each workload's service."""
    rate = rates.sum(axis=1) / replicas
    share = rates / np.maximum(rates.sum(axis=1, keepdims=True), 1e-12)
    e2e = share @ np.array([s.e2e_ms for s in services])  # hours × SERVICE_GRID
    seq = share @ np.array([s.seq_tokens for s in services])
    cap = np.clip(np.minimum(ph.max_batch, ph.kv_tokens // np.maximum(seq, 1)), 1, SERVICE_GRID[-1])
    # Throughput at each batch; a replica never serves less by running more it could hold.
    mu = np.maximum.accumulate(1000.0 * SERVICE_GRID / e2e, axis=1)
    served = np.array([np.interp(cap[h], SERVICE_GRID, mu[h]) for h in range(len(rate))])
    running = np.empty(len(rate))
    for h in range(len(rate)):
        below = SERVICE_GRID < cap[h]
        if rate[h] <= mu[h, 0]:  # less than one at a time on average
            running[h] = rate[h] * e2e[h, 0] / 1000.0
        else:
            batches = np.append(SERVICE_GRID[below], cap[h])
            running[h] = np.interp(rate[h], np.append(mu[h, below], served[h]), batches)
    backlog = np.zeros(len(rate))
    for h in range(1, len(rate)):
        grown = backlog[h - 1] + (rate[h - 1] - served[h - 1]) * 3600.0
        backlog[h] = min(max(0.0, grown), served[h - 1] * PATIENCE_S)
    work = share @ np.array([s.work_s for s in services])
    work2 = share @ np.array([s.work2_s for s in services])
    return Load(rate, np.minimum(running, cap), cap, served, backlog, work, work2)


def sample(
    ph: Physics,
    ld: Load,
    rng: np.random.Generator,
    isl: np.ndarray,
    osl: np.ndarray,
    hour: np.ndarray,
    offset_s: np.ndarray,
    *,
    itl_scale: float = 1.0,
    counted: tuple[np.ndarray, float] | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(TTFT, ITL, queue) in ms for one engine's requests arriving `offset_s` into `hour`, and
    which of them gave up waiting for a slot (a timeout).

    `counted` = (start times in µs, requests per other row per replica): when the rows are the
    traffic itself (not a sample of it), the requests decoding at each arrival are counted from
    them, as tokenshape counts them (a sweep: started so far minus ended so far), and solved
    with the latencies three times over (each count moves the E2Es a little)."""
    n = len(isl)
    pre = ph.prefill_ms(isl) * rng.lognormal(0, 0.12, n)
    itl_noise = rng.lognormal(0, 0.15, n)
    mean_running, waiting, give_up = ld.at(hour, offset_s)
    cap = ld.cap[hour]
    # The others decoding at an arrival vary around the mean as a Poisson count.
    running = np.minimum(1 + rng.poisson(np.maximum(mean_running - 1, 0)), cap).astype(float)
    # M/G/1 wait on the prefill work (Pollaczek–Khinchine) at the hour's rate per replica,
    # then the wait for a slot: the backlog ahead of it at the rate the replica completes.
    lam = ld.rate[hour]
    rho = np.minimum(lam * ld.work_s[hour], 0.95)
    prefill_wait = rng.exponential(1.0, n) * 1000.0 * lam * ld.work2_s[hour] / (2 * (1 - rho))
    queue = prefill_wait + 1000.0 * waiting / ld.served[hour]
    for _ in range(3 if counted is not None else 1):
        itl = ph.itl_ms(isl, osl, running) * itl_scale
        ttft = pre + ph.interference_ms(isl, osl, running, itl) + queue
        if counted is None:
            break
        started_us, per_row = counted
        ends = started_us + ((ttft + itl * itl_noise * np.maximum(osl - 1, 0)) * 1e3)
        here = np.searchsorted(np.sort(started_us), started_us, side="right") - np.searchsorted(
            np.sort(ends.astype(np.int64)), started_us, side="right"
        )
        running = np.clip(1 + (here - 1) * per_row, 1, cap)
    return ttft, itl * itl_noise, queue, rng.random(n) < give_up


def physics(profile: dict[str, Any]) -> Physics:
    """The latency surfaces of a demo engine's profile (built once per process)."""
    return _physics(json.dumps(profile, sort_keys=True))


@lru_cache(maxsize=8)
def _physics(profile_json: str) -> Physics:
    eng = prepare(EngineProfile(**json.loads(profile_json)))
    step = eng.model.step
    pre = np.array([step(int(i), 1, 1).prefill_ms for i in ISL_GRID])
    itl = np.empty((len(ISL_GRID), len(OSL_GRID), len(INFLIGHT_GRID)))
    for a, i in enumerate(ISL_GRID):
        for b, o in enumerate(OSL_GRID):
            for k, c in enumerate(INFLIGHT_GRID):
                itl[a, b, k] = step(int(i), int(o), int(c)).itl_ms
    # A step never gets faster with more decoding in it (the model wobbles by <1% in places).
    itl = np.maximum.accumulate(itl, axis=2)
    log_isl, log_osl = np.log(ISL_GRID), np.log(OSL_GRID)
    return Physics(
        RegularGridInterpolator((log_isl,), pre),
        RegularGridInterpolator((log_isl, log_osl, INFLIGHT_GRID.astype(float)), itl),
        eng.step_tokens,
        eng.kv_tokens,
        int(eng.profile.max_batch_size or INFLIGHT_GRID[-1]),
        float(step(eng.step_tokens, 2, 1).prefill_ms),
    )
