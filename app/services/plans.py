"""Replicas under an SLO: the performance model, calibrated to the engine, applied per local hour.

The seasonal plans, the rightsizing verdict and the money all take their latency need from
here, so every page says the same number of replicas."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta

from app.analytics.filters import Filter
from app.analytics.hour_mix import hour_mixes
from app.services.cache import TtlCache
from app.services.perfmodel import PerfModelError
from app.services.performance import Engine, observed_levels, prepare, within_bounds
from app.sizing.perf import Corrections, Shape, at_concurrency, fit_corrections
from app.sizing.profile import EngineProfile
from app.sizing.recommend import DEFAULT_GRANULARITY, DEFAULT_HEADROOM, round_up
from app.sizing.slo import Slo
from app.sizing.slo_plan import LatencyNeed, best_batch, best_step_tokens, replicas_for_slo
from app.storage.database import Database


@dataclass
class LatencyPlan:
    """Per local hour, the replicas the SLO needs at its peak rate, and how it was reached."""

    replicas: list[int]  # 24 values; 0 where the hour has no traffic or no SLO applies
    needs: list[LatencyNeed | None]
    corrections: Corrections = Corrections()
    notes: list[str] = field(default_factory=list)
    error: str | None = None  # the model could not be used (why); memory alone decides

    @property
    def infeasible(self) -> list[int]:
        """Hours whose SLO no number of replicas meets."""
        return [h for h, n in enumerate(self.needs) if n is not None and not n.feasible]


# Fitted corrections barely move within an hour: kept this long per (file, profile, window).
CALIBRATION_WINDOW = timedelta(days=7)
_calibrations: TtlCache[tuple[Engine, Corrections]] = TtlCache(600.0, size=64)


def calibrated_engine(
    db: Database, profile: EngineProfile, flt: Filter
) -> tuple[Engine, Corrections]:
    """The engine's step model and the corrections fitted to its own latencies over the week
    up to the end of `flt` (whatever its start: the recommendation's and the seasonal plans'
    windows share one fit), cached ten minutes per file, profile and hour."""
    end = (flt.end or datetime.now(UTC)).astimezone(UTC)
    end = end.replace(minute=0, second=0, microsecond=0)
    flt = replace(flt, start=end - CALIBRATION_WINDOW, end=end, hours=(), weekdays=())
    key = (str(db.path), profile.model_dump_json(), flt)
    hit = _calibrations.get(key)
    if hit is not None:
        return hit
    eng = prepare(profile)
    levels = observed_levels(db, flt, profile.replicas)
    shapes = [s for lv in levels for s in lv.shapes] or [Shape(512, 256)]
    # On the batch grid, as the searches the corrections are for (far fewer library calls).
    corr = fit_corrections(
        eng.grid_step,
        levels,
        step_tokens=eng.step_tokens,
        max_running=eng.max_concurrency(shapes),
    )
    _calibrations.put(key, (eng, corr))
    return eng, corr


def latency_plan(
    db: Database,
    profile: EngineProfile,
    slo: Slo | None,
    flt: Filter,
    tz: str,
    peak_rate: list[float],
    *,
    headroom: float = DEFAULT_HEADROOM,
    calibration: tuple[Engine, Corrections] | None = None,
    cache: dict[tuple, LatencyNeed] | None = None,
) -> LatencyPlan:
    """The latency need of each local hour: its peak arrival rate (+ headroom) with that hour's
    ISL × OSL mix, through the calibrated model, against the SLO."""
    empty: list[LatencyNeed | None] = [None] * 24
    if slo is None:
        return LatencyPlan([0] * 24, empty, notes=["no SLO: replicas from memory alone"])
    try:
        eng, corr = calibration or calibrated_engine(db, profile, flt)
    except PerfModelError as exc:
        return LatencyPlan(
            [0] * 24,
            empty,
            error=f"the performance model cannot size this engine ({exc}); replicas from "
            "memory alone, which may not meet the SLO",
        )
    mixes = hour_mixes(db.cursor(), flt, tz)
    needs: list[LatencyNeed | None] = list(empty)
    replicas = [0] * 24
    cache = {} if cache is None else cache  # shared by callers planning several day types
    for h in range(24):
        cells = mixes.get(h)
        rate = float(peak_rate[h]) * (1 + headroom)
        if not cells or rate <= 0:
            continue
        shapes = [Shape(i, o, n) for i, o, n in cells]
        try:
            kept, _ = within_bounds(eng, shapes)
        except PerfModelError:
            continue
        # Hours with the same mix (shares to 5%) and rate (to 2%) share one answer.
        total = sum(s.weight for s in kept)
        key = (
            tuple((s.isl, s.osl, round(20 * s.weight / total)) for s in kept),
            round(math.log(rate) * 50),
        )
        if key not in cache:
            cache[key] = replicas_for_slo(
                eng.grid_step,
                kept,
                rate,
                slo,
                max_concurrency=eng.max_concurrency(kept),
                step_tokens=eng.step_tokens,
                corrections=corr,
            )
        needs[h] = cache[key]
        replicas[h] = cache[key].replicas
    notes = list(eng.notes)
    return LatencyPlan(replicas, needs, corr, notes)


@dataclass(frozen=True)
class SloSettings:
    """max_batch_size and max_num_tokens chosen from the SLO, with the reasons."""

    max_batch_size: int | None
    max_num_tokens: int | None
    notes: tuple[str, ...] = ()
    # When max_num_tokens is below the median prompt: the mean TTFT the model predicts with it,
    # and with a step that holds the median prompt whole — (step, ms, whole step, ms).
    ttft_effect: tuple[int, float, int, float] | None = None


def _median_isl(shapes: list[Shape]) -> float:
    """The weighted median prompt of a mix."""
    total = sum(s.weight for s in shapes)
    seen = 0.0
    for s in sorted(shapes, key=lambda s: s.isl):
        seen += s.weight
        if seen >= total / 2:
            return float(s.isl)
    return 0.0


def ttft_effect(
    eng: Engine,
    corr: Corrections,
    shapes: list[Shape],
    batch: int,
    step: int,
    median: float | None = None,
) -> tuple[int, float, int, float] | None:
    """The mean TTFT predicted at `batch` requests in flight with max_num_tokens `step`, and
    with a step rounded up from the median prompt (the mix's, unless given); None when the
    step holds the median prompt whole."""
    median = median or _median_isl(shapes)
    if not shapes or step >= median:
        return None
    whole = round_up(median, DEFAULT_GRANULARITY)
    cap = eng.max_concurrency(shapes)
    try:
        chunked, single = (
            at_concurrency(
                eng.grid_step,
                shapes,
                max(batch, 1),
                step_tokens=tokens,
                corrections=corr,
                max_running=cap,
            )
            for tokens in (step, whole)
        )
    except PerfModelError:
        return None
    if not (math.isfinite(chunked.ttft_ms) and math.isfinite(single.ttft_ms)):
        return None
    return step, chunked.ttft_ms, whole, single.ttft_ms


def settings_for_slo(
    eng: Engine,
    corr: Corrections,
    shapes: list[Shape],
    slo: Slo | None,
    median_isl: float | None = None,
) -> SloSettings:
    """The largest batch whose ITL at the SLO's percentile stays within target (at most what
    the KV cache holds), and the largest prefill step whose one chunk stays within it; below
    the median prompt (`median_isl`, else the mix's), the TTFT either step is predicted."""
    if slo is None or slo.itl_ms is None or not shapes:
        return SloSettings(None, None)
    try:
        kept, _ = within_bounds(eng, shapes)
    except PerfModelError:
        return SloSettings(None, None)
    cap = eng.max_concurrency(kept)
    batch = best_batch(
        eng.grid_step, kept, slo.itl_ms, slo.quantile, max_concurrency=cap, corrections=corr
    )
    step = best_step_tokens(eng.step, slo.itl_ms, corrections=corr)
    notes = []
    if batch == 0:
        notes.append(
            f"even one request alone is predicted above the ITL target of {slo.itl_ms:g} ms: "
            "no batch size meets it"
        )
        batch = 1
    else:
        notes.append(
            f"max_batch_size {batch:,}: the largest batch whose ITL p{slo.percentile:g} the "
            f"model keeps within {slo.itl_ms:g} ms for this mix (the KV cache holds {cap:,})"
        )
    notes.append(
        f"max_num_tokens {step:,}: the largest prefill step whose one chunk takes no longer "
        f"than the ITL target ({slo.itl_ms:g} ms), so no token waits longer behind a prompt"
    )
    effect = ttft_effect(eng, corr, kept, batch, step, median_isl)
    return SloSettings(batch, step, tuple(notes), effect)
