"""The demo's latencies, from the same performance model the predictions use.

For each demo engine the model is sampled once on a grid (ISL × OSL × requests in flight) and
interpolated in log-space, so generating 300,000 rows costs a few thousand model calls. A demo
request decodes at the model's ITL for the requests in flight on its engine at its arrival
(counted from the generated rows themselves, as tokenshape counts them), and waits for its
prefill as app/sizing/perf.py's queue says. Noise: lognormal, σ 0.15 on ITL, 0.12 on prefill.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from scipy.interpolate import RegularGridInterpolator

from app.services.performance import prepare
from app.sizing.perf import Shape
from app.sizing.profile import EngineProfile

ISL_GRID = np.unique(np.geomspace(16, 32768, 12).astype(int))
OSL_GRID = np.unique(np.geomspace(2, 4096, 6).astype(int))
INFLIGHT_GRID = np.array([1, 2, 3, 4, 6, 8, 16, 32, 64])


@dataclass(frozen=True)
class Physics:
    """One demo engine's latency surfaces."""

    prefill: RegularGridInterpolator  # log ISL -> ms
    itl: RegularGridInterpolator  # (log ISL, log OSL, in flight) -> ms
    step_tokens: int
    max_inflight: int

    def sample(
        self,
        rng: np.random.Generator,
        isl: np.ndarray,
        osl: np.ndarray,
        started_us: np.ndarray,
        rate: np.ndarray,
        *,
        thinning: float = 1.0,
        itl_scale: float = 1.0,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(TTFT, ITL, queue) in ms for one engine's requests starting at `started_us`.

        The requests in flight at each arrival are counted from these very requests (a sweep:
        started so far minus ended so far, itself included), as tokenshape measures them, and
        the latencies solved with them three times over (each count moves the E2Es a little).
        When these rows are one chunk of the engine's traffic, `thinning` (all rows ÷ these)
        scales the others in flight up to what the whole traffic holds."""
        li = np.log(np.clip(isl, ISL_GRID[0], ISL_GRID[-1]))
        lo = np.log(np.clip(np.maximum(osl, 2), OSL_GRID[0], OSL_GRID[-1]))
        pre = self.prefill(li[:, None]) * rng.lognormal(0, 0.12, len(isl))
        itl_noise = rng.lognormal(0, 0.15, len(isl))
        queue_draw = rng.exponential(1.0, len(isl))
        # M/G/1 wait on the prefill work (Pollaczek–Khinchine) at each request's hour's rate.
        s = pre / 1000.0
        es, es2 = float(s.mean()), float((s**2).mean())
        rho = np.minimum(rate * es, 0.95)
        queue = queue_draw * 1000.0 * rate * es2 / (2 * (1 - rho))
        inflight = np.ones(len(isl))
        order = np.argsort(started_us, kind="stable")
        starts = started_us[order]
        for _ in range(3):
            c = np.minimum(inflight, self.max_inflight)
            itl = self.itl(np.column_stack([li, lo, c])) * itl_scale
            other = self.itl(np.column_stack([li, lo, np.maximum(c - 1, 1)])) * itl_scale
            chunks = np.ceil(isl / self.step_tokens)
            interference = np.where(c > 1, itl / 2 + chunks * other, 0.0)
            ttft = pre + interference + queue
            e2e = ttft + itl * np.maximum(osl - 1, 0)
            ends = np.sort((started_us + (e2e * 1000).astype(np.int64))[order])
            here = np.searchsorted(starts, starts, side="right") - np.searchsorted(
                ends, starts, side="right"
            )
            counted = np.empty(len(isl))
            counted[order] = here
            inflight = 1 + (counted - 1) * thinning
        return ttft, itl * itl_noise, queue


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
    log_isl, log_osl = np.log(ISL_GRID), np.log(OSL_GRID)
    return Physics(
        RegularGridInterpolator((log_isl,), pre),
        RegularGridInterpolator((log_isl, log_osl, INFLIGHT_GRID.astype(float)), itl),
        eng.step_tokens,
        # What the engine runs at once (its batch cap, its KV cache at a middling 1,024 + 256
        # tokens), within the grid: more in flight wait for a slot rather than decode.
        int(min(INFLIGHT_GRID[-1], eng.max_concurrency([Shape(1024, 256)]))),
    )
