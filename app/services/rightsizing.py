"""Rightsizing an engine: its stored profile, its traffic (analytics) and the math (sizing).

The one place the dashboard, the JSON API, the CLI and the weekly email get a recommendation
from, so all four show the same numbers."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

from pydantic import ValidationError

from app.analytics.drift import WEEK, beyond, engine_weeks
from app.analytics.engine_load import engine_load, rejected
from app.analytics.filters import Filter
from app.analytics.mix import shape_mix
from app.analytics.rollups.missing import raw_only_note
from app.analytics.seasonal import HourlyLoad, hourly_load, local_hour_seconds
from app.analytics.stamp import data_stamp
from app.services.cache import TtlCache
from app.services.perfmodel import PerfModelError
from app.services.plans import LatencyPlan, calibrated_engine, latency_plan, settings_for_slo
from app.services.profiles import load_profile, problem, sizing_failure, stored_profiles
from app.sizing.catalog import GIB
from app.sizing.commands import commands, window_bounds
from app.sizing.drift import Finding, findings
from app.sizing.perf import Shape
from app.sizing.profile import EngineProfile
from app.sizing.recommend import (
    DEFAULT_COVERAGE,
    DEFAULT_GRANULARITY,
    DEFAULT_HEADROOM,
    Traffic,
    chunking,
    median_prompt,
    memory_for,
)
from app.sizing.rightsize import (
    CONCURRENCY_WORDS,
    Recommendation,
    Replicas,
    is_paged,
    proposed_bounds,
    replicas_verdict,
    rightsize,
)
from app.sizing.seasonal import (
    BINDING_WORDS,
    DEFAULT_THRESHOLD,
    DayTypes,
    HourDemand,
    Plan,
    Seasonal,
    binding_words,
    by_day_type,
    demand_from,
    fixed_config,
    peak_need,
    plans,
    window_label,
)
from app.sizing.slo import Fleet, Slo, cost_for, slo_for
from app.sizing.status import Status, engine_status, failed_status
from app.storage.database import Database

DEFAULT_WINDOW = timedelta(days=7)
WEEKDAYS, WEEKEND = (1, 2, 3, 4, 5), (6, 7)


def window_to(now: datetime, span: timedelta = DEFAULT_WINDOW) -> tuple[datetime, datetime]:
    """The window of `span` up to `now` to the minute: the Rightsizing page, the Overview's
    statuses, the API's default and the CLI ask for the same one within a minute (and share
    one cached recommendation)."""
    end = now.replace(second=0, microsecond=0)
    return end - span, end


def fleet_statuses(
    db: Database, *, now: datetime, tz: str, fleet: Fleet, coverage: float = DEFAULT_COVERAGE
) -> list[tuple[str, Status]]:
    """Every profiled engine's status over the last 7 days (the Rightsizing page's default
    window), in the vocabulary of app/sizing/status.py; a failing engine says why."""
    start, end = window_to(now)
    out = []
    for name in stored_profiles(db):
        try:
            r = recommend(db, name, start=start, end=end, coverage=coverage, tz=tz, fleet=fleet)
            out.append((name, engine_status(r)))
        except Exception as exc:  # one engine's failure must not hide the others' status
            out.append((name, failed_status(sizing_failure(name, exc))))
    return out


def recommend(
    db: Database,
    engine: str,
    *,
    start: datetime,
    end: datetime,
    coverage: float = DEFAULT_COVERAGE,
    granularity: int = DEFAULT_GRANULARITY,
    profile: EngineProfile | None = None,
    tz: str = "UTC",
    fleet: Fleet = Fleet(),
    headroom: float = DEFAULT_HEADROOM,
) -> Recommendation:
    """The recommendation for an engine over [start, end): bounds from the traffic, batch and
    step from the SLO (when it has an ITL target), and the replicas before and after.

    Kept five minutes for the same profile, stored rows and window: it runs the performance
    model, and the page's layout and its callbacks ask for the same one."""
    profile = profile or load_profile(db, engine)
    key = (
        str(db.path),
        engine,
        data_stamp(db.cursor(), engine),
        profile.model_dump_json(),
        start,
        end,
        coverage,
        granularity,
        tz,
        fleet,
        headroom,
    )
    return _recommendations.get_or_make(
        key,
        lambda: _recommend(
            db, engine, start, end, coverage, granularity, profile, tz, fleet, headroom
        ),
    )


_recommendations: TtlCache[Recommendation] = TtlCache(300.0)


def _recommend(
    db: Database,
    engine: str,
    start: datetime,
    end: datetime,
    coverage: float,
    granularity: int,
    profile: EngineProfile,
    tz: str,
    fleet: Fleet,
    headroom: float,
) -> Recommendation:
    cur = db.cursor()
    flt = Filter(start=start, end=end, engines=(engine,))
    load = engine_load(cur, flt, coverage)
    traffic = Traffic(**load)
    if not traffic.requests:
        return rightsize(
            engine,
            profile,
            traffic,
            None,
            (None, None),
            coverage=coverage,
            granularity=granularity,
        )
    rec, notes = proposed_bounds(profile, traffic, granularity)
    slo = slo_for(profile, fleet)
    calibration = None
    chosen = None
    if slo is not None and memory_for(profile, profile.max_num_tokens).fits:
        try:
            calibration = calibrated_engine(db, profile, flt)
        except PerfModelError as exc:
            notes.append(f"the performance model cannot size this engine: {exc}")
    if calibration is not None and slo is not None:
        mix = shape_mix(cur, flt)
        shapes = [Shape(i, o, float(n)) for i, o, n in mix.cells]
        chosen = settings_for_slo(*calibration, shapes, slo, median_prompt(traffic))
        if chosen.max_batch_size is not None:
            # From the SLO, not from the observed peak alone (the peak says how many are in
            # flight today, the SLO how many one replica may run at once).
            notes = [n for n in notes if not n.startswith("max_batch_size covers")]
            rec = replace(
                rec, max_batch_size=chosen.max_batch_size, max_num_tokens=chosen.max_num_tokens
            )
            notes += list(chosen.notes)
    # Said of the final step (the SLO's, when it set one), never of one it replaced.
    chunked, warning = chunking(rec.max_num_tokens, rec.max_input_len, traffic)
    notes += [chunked] if chunked else []
    warnings = [warning] if warning else []
    if warning and chosen is not None and chosen.ttft_effect is not None:
        step, ms, whole, whole_ms = chosen.ttft_effect
        warnings.append(
            f"the performance model predicts a mean TTFT of {ms:,.0f} ms with max_num_tokens "
            f"{step:,} against {whole_ms:,.0f} ms with {whole:,} (the median prompt in one "
            f"step); {step:,} is kept because a larger step's prefill chunk holds every "
            "decoding request longer than the ITL target"
        )
    counts = rejected(
        cur,
        flt,
        [(profile.max_input_len, profile.max_seq_len), (rec.max_input_len, rec.max_seq_len)],
    )
    r = rightsize(
        engine,
        profile,
        traffic,
        rec,
        (counts[0], counts[1]),
        coverage=coverage,
        granularity=granularity,
        notes=notes,
        warnings=warnings,
    )
    if r.status != "ok" or r.memory_now is None or r.memory_after is None:
        return r
    replicas = _replicas(db, profile, r, flt, tz, fleet, slo, headroom, calibration)
    if replicas is None:
        return r
    verdict = f"{replicas_verdict(replicas, r.recommended)} {r.verdict}"
    return replace(r, replicas=replicas, verdict=verdict)


def _replicas(
    db: Database,
    profile: EngineProfile,
    r: Recommendation,
    flt: Filter,
    tz: str,
    fleet: Fleet,
    slo: Slo | None,
    headroom: float,
    calibration: tuple | None,
) -> Replicas | None:
    """The busiest hour's replicas with today's bounds and the recommended ones."""
    assert r.memory_now is not None and r.memory_after is not None and r.recommended
    granularity = DEFAULT_GRANULARITY
    context = profile.spec().max_position_embeddings
    load = hourly_load(
        db.cursor(), replace(flt, tz=tz), tz, granularity, context, with_quantiles=False
    )
    if not load["count"].sum() or flt.start is None or flt.end is None:
        return None
    d = demand_from(
        load["cells"],
        local_hour_seconds(flt.start, flt.end, tz),
        load["footprint_sum"],
        load["count"],
        load["hist"],
        granularity,
    )
    lat = latency_plan(
        db, profile, slo, flt, tz, list(d.peak_rate), headroom=headroom, calibration=calibration
    )
    cur, rec = r.current, r.recommended
    paged = is_paged(profile)
    today = fixed_config(
        d,
        cur.max_input_len,
        cur.max_seq_len or context,
        r.memory_now.kv_capacity_tokens,
        cur.max_batch_size,
        paged,
    )
    after = fixed_config(
        d,
        rec.max_input_len,
        rec.max_seq_len or context,
        r.memory_after.kv_capacity_tokens,
        rec.max_batch_size,
        paged,
    )
    rps = profile.measured_rps_per_replica
    n_today, why_today = peak_need(
        d, today, r.memory_now.kv_capacity_tokens, headroom, rps, lat.replicas
    )
    n_after, why_after = peak_need(
        d, after, r.memory_after.kv_capacity_tokens, headroom, rps, lat.replicas
    )
    infeasible = lat.infeasible
    note = None
    if infeasible:
        need = lat.needs[infeasible[0]]
        note = need.reason if need is not None else None
    if today.slots == 0:
        why_today = "cannot hold one full-length request"
    words = BINDING_WORDS
    return Replicas(
        running=profile.replicas,
        today=n_today,
        after=n_after,
        why_today=words.get(why_today, why_today),
        why_after=words.get(why_after, why_after),
        latency=max(lat.replicas),
        # Without the latency model the plan is memory's alone: it claims no SLO.
        slo=slo.words() if slo and not lat.error else None,
        feasible=not infeasible,
        gpus_per_replica=profile.gpus,
        cost_per_gpu_hour=cost_for(profile, fleet),
        currency=fleet.currency,
        note=note or lat.error,
    )


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value / GIB, 2)


def recommendation_dict(r: Recommendation) -> dict[str, Any]:
    """The recommendation as JSON: bounds, rejected counts, memory in GiB, commands, what-ifs."""

    def memory(m):
        if m is None:
            return None
        return {
            "gpus": m.gpus,
            "total_gib": _gib(m.total),
            "usable_gib": _gib(m.usable),
            "weights_gib": _gib(m.weights),
            "overhead_gib": _gib(m.overhead),
            "kv_cache_gib": _gib(max(m.kv_budget, 0)),
            "kv_bytes_per_token": m.kv_per_token,
            "kv_capacity_tokens": m.kv_capacity_tokens,
            "kv_capacity_range": [m.kv_low_tokens, m.kv_high_tokens],
            "measured": m.measured,
            "uncertain": list(m.uncertain),
            "hint": m.hint,
        }

    state = engine_status(r)
    return {
        "engine": r.engine,
        # The status in the one vocabulary of app/sizing/status.py (as every page says it).
        "status": state.key,
        "status_label": state.label,
        "status_reason": state.reason,
        "verdict": r.verdict,
        "warnings": r.warnings,
        "coverage": r.coverage,
        "granularity": r.granularity,
        "requests": r.traffic.requests,
        "observed": r.traffic.quantiles,
        "current": asdict(r.current),
        "recommended": asdict(r.recommended) if r.recommended else None,
        "rejected": {"current": r.rejected_current, "recommended": r.rejected_recommended},
        "memory": {"now": memory(r.memory_now), "after": memory(r.memory_after)},
        "concurrency": {
            "now": asdict(r.capacity_now) if r.capacity_now else None,
            "after": asdict(r.capacity_after) if r.capacity_after else None,
            "paged": r.paged,
            "words": CONCURRENCY_WORDS,
        },
        "replicas": None if r.replicas is None else _replicas_dict(r.replicas),
        "commands": r.commands,
        "what_if": [
            {
                "label": w.label,
                "possible": w.reason is None,
                "reason": w.reason,
                "caveat": w.caveat,
                "kv_capacity_tokens": w.memory.kv_capacity_tokens if w.memory else None,
                "concurrency": asdict(w.capacity) if w.capacity else None,
            }
            for w in r.whatifs
        ],
        "notes": r.notes,
    }


def _replicas_dict(x: Replicas) -> dict[str, Any]:
    cost_now, cost_after = x.cost_month(x.baseline), x.cost_month(x.after)
    return {
        "running": x.running,
        "needed_with_current_bounds": x.today,
        "needed_with_recommended_bounds": x.after,
        "set_by_now": x.why_today,
        "set_by_after": x.why_after,
        "latency_need_at_peak": x.latency,
        "slo": x.slo,
        "slo_feasible": x.feasible,
        "gpus_per_replica": x.gpus_per_replica,
        "cost_per_gpu_hour": x.cost_per_gpu_hour,
        "currency": x.currency,
        "cost_month_now": None if cost_now is None else round(cost_now, 2),
        "cost_month_after": None if cost_after is None else round(cost_after, 2),
        "note": x.note,
    }


@dataclass(frozen=True)
class SeasonalReport:
    """An engine's seasonal plans over whole weeks, with commands for each window."""

    engine: str
    start: datetime
    end: datetime
    tz: str
    weeks: int
    requests: int
    demand: HourDemand | None
    result: Seasonal | None
    commands: list[dict[str, str]]
    verdict: str
    quantiles: dict[int, dict[str, list[float]]] = field(default_factory=dict)
    day_types: DayTypes | None = None
    slo: Slo | None = None
    latency: LatencyPlan | None = None
    currency: str = "$"
    cost_per_gpu_hour: float | None = None
    gpus_per_replica: int = 1
    # What the raw rows cannot count (hours sealed by retention or imported), in words.
    raw_only_note: str | None = None
    # The whole-day recommendation over the same window (`recommend`): the settings and
    # commands of plans (a) and (b), the same as the Rightsizing page's for this window.
    whole_day: Recommendation | None = None


def seasonal(
    db: Database,
    engine: str,
    *,
    now: datetime,
    tz: str,
    weeks: int = 4,
    coverage: float = DEFAULT_COVERAGE,
    granularity: int = DEFAULT_GRANULARITY,
    headroom: float = DEFAULT_HEADROOM,
    threshold: float = DEFAULT_THRESHOLD,
    day_types: bool = False,
    fleet: Fleet = Fleet(),
) -> SeasonalReport:
    """Plans (a) static, (b) hourly, (c) the best day/night split for the last whole weeks;
    with `day_types`, also separate weekday and weekend plans. Each hour's replicas are the
    larger of what its memory and its latency targets (the SLO) need."""
    profile = load_profile(db, engine)
    slo = slo_for(profile, fleet)
    cost = cost_for(profile, fleet)
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(weeks=weeks)
    seconds = local_hour_seconds(start, end, tz)
    gone = window_note(db, engine, start, end, now)

    def flt_for(weekdays: tuple[int, ...]) -> Filter:
        return Filter(start=start, end=end, engines=(engine,), weekdays=weekdays, tz=tz)

    def demand_for(weekdays: tuple[int, ...]) -> tuple[HourlyLoad, HourDemand | None]:
        flt = flt_for(weekdays)
        load = hourly_load(
            db.cursor(),
            flt,
            tz,
            granularity,
            profile.spec().max_position_embeddings,
            with_quantiles=not weekdays,  # the per-hour quantiles shown are all days'
        )
        if not load["count"].sum():
            return load, None
        secs = seconds
        if weekdays:
            secs = {
                k: v
                for k, v in seconds.items()
                if date.fromisoformat(k[0]).isoweekday() in weekdays
            }
        demand = demand_from(
            load["cells"], secs, load["footprint_sum"], load["count"], load["hist"], granularity
        )
        return load, demand

    load, demand = demand_for(())
    requests = int(load["count"].sum())
    if demand is None:
        verdict = f"Not enough data: no requests for engine {engine} in the last {weeks} weeks."
        if gone:  # the rollups count its requests, but plans need raw rows
            verdict = f"Not enough raw rows for engine {engine} in the last {weeks} weeks: {gone}"
        return SeasonalReport(
            engine, start, end, tz, weeks, 0, None, None, [], verdict, raw_only_note=gone
        )
    memory = memory_for(profile, profile.max_num_tokens)
    if not memory.fits:
        verdict = f"{engine}'s profile does not fit its GPUs; fix it on the Rightsizing page."
        return SeasonalReport(
            engine, start, end, tz, weeks, requests, demand, None, [], verdict, raw_only_note=gone
        )

    calibration = None
    if slo is not None:
        try:
            calibration = calibrated_engine(db, profile, flt_for(()))
        except PerfModelError:
            calibration = None  # latency_plan says why
    # The whole-day build is the recommendation over the same window: the one function that
    # says an engine's settings, so this page's one-engine plan and the Rightsizing page agree.
    whole_day = recommend(
        db,
        engine,
        start=start,
        end=end,
        coverage=coverage,
        granularity=granularity,
        profile=profile,
        tz=tz,
        fleet=fleet,
        headroom=headroom,
    )
    built = whole_day.recommended if whole_day.status == "ok" else None
    kv = memory.kv_capacity_tokens
    batch = profile.max_batch_size
    if built is not None and whole_day.memory_after is not None:
        kv, batch = whole_day.memory_after.kv_capacity_tokens, built.max_batch_size
    answers: dict = {}  # latency needs shared by the day types' plans (same mix, same rate)

    def plans_for(
        d: HourDemand, days: int, weekdays: tuple[int, ...]
    ) -> tuple[Seasonal | str, LatencyPlan]:
        lat = latency_plan(
            db,
            profile,
            slo,
            flt_for(weekdays),
            tz,
            list(d.peak_rate),
            headroom=headroom,
            calibration=calibration,
            cache=answers,
        )
        everything = None
        if built is not None and built.max_seq_len:
            everything = fixed_config(
                d, built.max_input_len, built.max_seq_len, kv, batch, is_paged(profile)
            )
        result = plans(
            d,
            kv_capacity=kv,
            gpus=profile.gpus,
            coverage=coverage,
            max_context=profile.spec().max_position_embeddings,
            headroom=headroom,
            rps_per_replica=profile.measured_rps_per_replica,
            cost_per_gpu_hour=cost,
            threshold=threshold,
            days=days,
            max_batch_size=batch,
            paged=is_paged(profile),
            latency_need=lat.replicas,
            replicas_now=profile.replicas,
            currency=fleet.currency,
            whole_day=everything,
        )
        return result, lat

    result, latency = plans_for(demand, 7, ())
    if isinstance(result, str):
        verdict = f"No seasonal plan for {engine}: {result}."
        return SeasonalReport(
            engine, start, end, tz, weeks, requests, demand, None, [], verdict, raw_only_note=gone
        )
    if result.now is None:
        # Without the replicas running today, "now" is what today's bounds need at the peak.
        context = profile.spec().max_position_embeddings
        config = fixed_config(
            demand,
            profile.max_input_len,
            profile.max_seq_len or context,
            memory.kv_capacity_tokens,
            profile.max_batch_size,
            is_paged(profile),
        )
        n, why = peak_need(
            demand,
            config,
            memory.kv_capacity_tokens,
            headroom,
            profile.measured_rps_per_replica,
            latency.replicas,
        )
        # A build whose KV cache cannot hold one full-length request has no "now" to price:
        # the money then counts from the rebuilt plan.
        if config.slots > 0:
            hours = float(n * 24 * 7 * profile.gpus)
            priced = hours * cost if cost is not None else None
            today = Plan("today", [n] * 24, hours, [config], priced, [why] * 24)
            result = replace(result, now=today)
    split_days = None
    if day_types:
        parts = []
        for weekdays, days in ((WEEKDAYS, 5), (WEEKEND, 2)):
            part = demand_for(weekdays)[1]
            parts.append(plans_for(part, days, weekdays)[0] if part is not None else None)
        if all(isinstance(part, Seasonal) for part in parts):
            # all(isinstance(...)) does not narrow the items: both are Seasonal here.
            split_days = by_day_type(result, cast(Seasonal, parts[0]), cast(Seasonal, parts[1]))
    windows = result.split.configs if result.split else []
    cmds = []
    if built is not None:
        for w in windows:
            bounds = window_bounds(built, w.max_input_len, w.max_seq_len, w.slots)
            label = window_label(w.hours)
            cmds.append(
                commands(profile, bounds) | {"window": label, "build": f"per-window build, {label}"}
            )
    return SeasonalReport(
        engine,
        start,
        end,
        tz,
        weeks,
        requests,
        demand,
        result,
        cmds,
        result.verdict,
        load["quantiles"],
        split_days,
        slo,
        latency,
        fleet.currency,
        cost,
        profile.gpus,
        gone,
        whole_day,
    )


def seasonal_dict(r: SeasonalReport) -> dict[str, Any]:
    """The seasonal report as JSON."""

    def plan(p):
        if p is None:
            return None
        return {
            "name": p.name,
            "gpu_hours_week": p.gpu_hours_week,
            "gpu_hours_month": round(p.gpu_hours_month, 1),
            "cost_week": None if p.cost_week is None else round(p.cost_week, 2),
            "cost_month": None if p.cost_month is None else round(p.cost_month, 2),
            "replicas_per_hour": p.replicas,
            "binding_per_hour": p.binding,
            "binding": binding_words(p),
            "windows": [
                {
                    "hours": window_label(c.hours),
                    "max_input_len": c.max_input_len,
                    "max_seq_len": c.max_seq_len,
                    "requests_per_replica": c.slots,
                }
                for c in p.configs
            ],
        }

    d = r.demand
    lat = r.latency

    def need(h: int) -> dict[str, Any] | None:
        n = lat.needs[h] if lat is not None else None
        if n is None:
            return None
        return {
            "replicas": n.replicas,
            "feasible": n.feasible,
            "binding": n.binding or None,
            "ttft_ms": _finite(n.tail.ttft_ms),
            "itl_ms": _finite(n.tail.itl_ms),
            "e2e_ms": _finite(n.tail.e2e_ms),
            "reason": n.reason,
        }

    return {
        "engine": r.engine,
        "slo": None if r.slo is None else r.slo.as_dict(),
        "currency": r.currency,
        "cost_per_gpu_hour": r.cost_per_gpu_hour,
        "gpus_per_replica": r.gpus_per_replica,
        "latency_model": None
        if lat is None
        else {
            "error": lat.error,
            "notes": lat.notes,
            "corrections": {"prefill": lat.corrections.prefill, "decode": lat.corrections.decode},
            "infeasible_hours": lat.infeasible,
        },
        "window": {"start": r.start.isoformat(), "end": r.end.isoformat(), "weeks": r.weeks},
        "tz": r.tz,
        "requests": r.requests,
        "verdict": r.verdict,
        "raw_only_note": r.raw_only_note,
        "hours": None
        if d is None
        else [
            {
                "hour": h,
                "mean_rate": round(float(d.mean_rate[h]), 6),
                "peak_rate": round(float(d.peak_rate[h]), 6),
                "in_flight_peak": round(float(d.in_flight[h]), 3),
                "kv_tokens_peak": round(float(d.kv_tokens[h]), 1),
                "slo_need": need(h),
                **{
                    f"{m}_{name}": (r.quantiles.get(h, {}).get(m) or [None] * 3)[k]  # type: ignore[list-item]  # mypy: [None] * 3 as list[float]
                    for m in ("isl", "osl")
                    for k, name in enumerate(("p50", "p99", "p99.9"))
                },
            }
            for h in range(24)
        ],
        "plans": None
        if r.result is None
        else {
            "now": plan(r.result.now),
            "static": plan(r.result.static),
            "hourly": plan(r.result.hourly),
            "seasonal": plan(r.result.split),
            "savings_vs_static": round(r.result.savings_vs_static, 4),
            "savings_vs_hourly": round(r.result.savings_vs_hourly, 4),
            "threshold": r.result.threshold,
        },
        "whole_day": None if r.whole_day is None else whole_day_dict(r.whole_day),
        "commands": r.commands,
        "assumptions": (
            "each hour's replicas are the larger of the memory need (the peak requests in "
            "flight, peak arrival rate x mean E2E, and KV demand with the headroom; a replica "
            "admits kv_capacity // max_seq_len requests, at most max_batch_size) and the latency "
            "need (the fewest replicas whose predicted TTFT and ITL at the SLO's percentile, at "
            "the hour's peak rate + headroom and its ISL x OSL mix, meet the targets: the "
            "performance model calibrated to the engine's own latencies, docs/sizing.md)"
        ),
        "day_types": None
        if r.day_types is None
        else {
            "weekdays": plan(r.day_types.weekdays.split or r.day_types.weekdays.hourly),
            "weekends": plan(r.day_types.weekends.split or r.day_types.weekends.hourly),
            "gpu_hours_week": r.day_types.gpu_hours_week,
            "savings_vs_hourly": round(r.day_types.savings_vs_hourly, 4),
            "verdict": r.day_types.verdict,
        },
    }


def whole_day_dict(r: Recommendation) -> dict[str, Any]:
    """The whole-day build of a seasonal report: the recommendation's window, settings and
    commands, exactly as /api/engines/{name}/recommendation gives them for that window."""
    return {
        "build": "whole day",
        "status": engine_status(r).key,
        "recommended": asdict(r.recommended) if r.recommended else None,
        "commands": r.commands,
        "warnings": r.warnings,
    }


def _finite(x: float) -> float | None:
    return round(x, 2) if math.isfinite(x) else None


def engine_drift(db: Database, engine: str, stored: dict[str, Any], end: datetime) -> list[Finding]:
    """The drift findings of one engine over the two weeks before end."""
    try:
        profile = EngineProfile.model_validate(stored)
    except ValidationError as exc:
        # One broken profile must not hide the other engines' drift.
        message = (
            f"the stored profile is no longer valid ({problem(exc).removeprefix('profile: ')}): "
            f"save it again with PUT /api/engines/{engine} or on the Rightsizing page"
        )
        return [Finding(engine, "profile", "warning", message, 0.0)]
    try:
        cur = db.cursor()
        bounds = (profile.max_input_len, profile.max_seq_len)
        weeks = engine_weeks(cur, engine, end)
        counts = beyond(cur, engine, end - WEEK, end, *bounds)
        return findings(engine, bounds, weeks, counts)
    except Exception as exc:  # nor one engine's failure the others' drift
        return [Finding(engine, "profile", "warning", sizing_failure(engine, exc), 0.0)]


def drift_report(db: Database, end: datetime) -> dict[str, Any]:
    """Findings of every engine with a stored profile, by engine name, as JSON."""
    engines = []
    for name, stored in stored_profiles(db).items():
        rows = engine_drift(db, name, stored, end)
        engines.append(
            {
                "engine": name,
                "findings": [{k: v for k, v in asdict(f).items() if k != "engine"} for f in rows],
                "raw_only_note": drift_note(db, name, end),
            }
        )
    return {"end": end.isoformat(), "engines": engines}


def window_note(
    db: Database, engine: str | None, start: datetime, end: datetime, now: datetime | None = None
) -> str | None:
    """What the raw rows of [start, end) (of one engine, or all) cannot count since some of its
    hours have none left (sealed by retention, imported), in words; None when nothing is gone.
    Rightsizing, seasonal plans and drift read raw rows only."""
    flt = Filter(start=start, end=end, engines=(engine,) if engine else ())
    return raw_only_note(db.cursor(), flt, now)


def drift_note(
    db: Database, engine: str | None, end: datetime, now: datetime | None = None
) -> str | None:
    """`window_note` over the two weeks drift compares (the week before `end` and the one
    before that)."""
    return window_note(db, engine, end - 2 * WEEK, end, now)


def engine_findings(db: Database, end: datetime) -> list[list[Finding]]:
    """Drift findings of every profiled engine over the week before end."""
    return [engine_drift(db, name, stored, end) for name, stored in stored_profiles(db).items()]
