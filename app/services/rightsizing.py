"""Rightsizing an engine: its stored profile, its traffic (analytics) and the math (sizing).

The one place the dashboard, the JSON API, the CLI and the weekly email get a recommendation
from, so all four show the same numbers."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import Any, cast

from pydantic import ValidationError

from app.analytics.drift import WEEK, beyond, engine_weeks
from app.analytics.engine_load import engine_load, rejected
from app.analytics.filters import Filter
from app.analytics.seasonal import HourlyLoad, hourly_load, local_hour_seconds
from app.services.profiles import load_profile, problem, stored_profiles
from app.sizing.catalog import GIB
from app.sizing.commands import commands
from app.sizing.drift import Finding, findings
from app.sizing.profile import EngineProfile
from app.sizing.recommend import (
    DEFAULT_COVERAGE,
    DEFAULT_GRANULARITY,
    DEFAULT_HEADROOM,
    Bounds,
    Traffic,
    memory_for,
)
from app.sizing.rightsize import Recommendation, proposed_bounds, rightsize
from app.sizing.seasonal import (
    DEFAULT_THRESHOLD,
    DayTypes,
    HourDemand,
    Seasonal,
    by_day_type,
    demand_from,
    plans,
    window_label,
)
from app.storage.database import Database

DEFAULT_WINDOW = timedelta(days=7)
WEEKDAYS, WEEKEND = (1, 2, 3, 4, 5), (6, 7)


def recommend(
    db: Database,
    engine: str,
    *,
    start: datetime,
    end: datetime,
    coverage: float = DEFAULT_COVERAGE,
    granularity: int = DEFAULT_GRANULARITY,
    profile: EngineProfile | None = None,
) -> Recommendation:
    """The recommendation for an engine over [start, end)."""
    profile = profile or load_profile(db, engine)
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
    counts = rejected(
        cur,
        flt,
        [(profile.max_input_len, profile.max_seq_len), (rec.max_input_len, rec.max_seq_len)],
    )
    return rightsize(
        engine,
        profile,
        traffic,
        rec,
        (counts[0], counts[1]),
        coverage=coverage,
        granularity=granularity,
        notes=notes,
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

    return {
        "engine": r.engine,
        "status": r.status,
        "verdict": r.verdict,
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
        },
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
) -> SeasonalReport:
    """Plans (a) static, (b) hourly, (c) the best day/night split for the last whole weeks;
    with `day_types`, also separate weekday and weekend plans."""
    profile = load_profile(db, engine)
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(weeks=weeks)
    seconds = local_hour_seconds(start, end, tz)

    def demand_for(weekdays: tuple[int, ...]) -> tuple[HourlyLoad, HourDemand | None]:
        flt = Filter(start=start, end=end, engines=(engine,), weekdays=weekdays, tz=tz)
        load = hourly_load(
            db.cursor(), flt, tz, granularity, profile.spec().max_position_embeddings
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
        return SeasonalReport(engine, start, end, tz, weeks, 0, None, None, [], verdict)
    memory = memory_for(profile, profile.max_num_tokens)
    if not memory.fits:
        verdict = f"{engine}'s profile does not fit its GPUs; fix it on the Rightsizing page."
        return SeasonalReport(engine, start, end, tz, weeks, requests, demand, None, [], verdict)

    def plans_for(d: HourDemand, days: int) -> Seasonal | str:
        return plans(
            d,
            kv_capacity=memory.kv_capacity_tokens,
            gpus=profile.gpus,
            coverage=coverage,
            max_context=profile.spec().max_position_embeddings,
            headroom=headroom,
            rps_per_replica=profile.measured_rps_per_replica,
            cost_per_gpu_hour=profile.cost_per_gpu_hour,
            threshold=threshold,
            days=days,
            max_batch_size=profile.max_batch_size,
        )

    result = plans_for(demand, 7)
    if isinstance(result, str):
        verdict = f"No seasonal plan for {engine}: {result}."
        return SeasonalReport(engine, start, end, tz, weeks, requests, demand, None, [], verdict)
    split_days = None
    if day_types:
        parts = []
        for weekdays, days in ((WEEKDAYS, 5), (WEEKEND, 2)):
            part = demand_for(weekdays)[1]
            parts.append(plans_for(part, days) if part is not None else None)
        if all(isinstance(part, Seasonal) for part in parts):
            # all(isinstance(...)) does not narrow the items: both are Seasonal here.
            split_days = by_day_type(result, cast(Seasonal, parts[0]), cast(Seasonal, parts[1]))
    windows = result.split.configs if result.split else []
    cmds = [
        commands(
            profile,
            Bounds(w.max_input_len, w.max_seq_len, None, w.slots or None, profile.max_num_tokens),
        )
        | {"window": window_label(w.hours)}
        for w in windows
    ]
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
    )


def seasonal_dict(r: SeasonalReport) -> dict[str, Any]:
    """The seasonal report as JSON."""

    def plan(p):
        if p is None:
            return None
        return {
            "name": p.name,
            "gpu_hours_week": p.gpu_hours_week,
            "cost_week": p.cost_week,
            "replicas_per_hour": p.replicas,
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
    return {
        "engine": r.engine,
        "window": {"start": r.start.isoformat(), "end": r.end.isoformat(), "weeks": r.weeks},
        "tz": r.tz,
        "requests": r.requests,
        "verdict": r.verdict,
        "hours": None
        if d is None
        else [
            {
                "hour": h,
                "mean_rate": round(float(d.mean_rate[h]), 6),
                "peak_rate": round(float(d.peak_rate[h]), 6),
                "in_flight_peak": round(float(d.in_flight[h]), 3),
                "kv_tokens_peak": round(float(d.kv_tokens[h]), 1),
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
            "static": plan(r.result.static),
            "hourly": plan(r.result.hourly),
            "seasonal": plan(r.result.split),
            "savings_vs_static": round(r.result.savings_vs_static, 4),
            "savings_vs_hourly": round(r.result.savings_vs_hourly, 4),
            "threshold": r.result.threshold,
        },
        "commands": r.commands,
        "assumptions": (
            "replicas hold each hour's peak requests in flight (peak arrival rate x mean E2E) "
            "and KV demand with the headroom; a replica admits kv_capacity // max_seq_len "
            "requests, at most max_batch_size; decode throughput per replica is assumed not to "
            "bind unless the profile has measured_rps_per_replica"
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
    cur = db.cursor()
    bounds = (profile.max_input_len, profile.max_seq_len)
    weeks = engine_weeks(cur, engine, end)
    counts = beyond(cur, engine, end - WEEK, end, *bounds)
    return findings(engine, bounds, weeks, counts)


def drift_report(db: Database, end: datetime) -> dict[str, Any]:
    """Findings of every engine with a stored profile, by engine name, as JSON."""
    engines = []
    for name, stored in stored_profiles(db).items():
        rows = engine_drift(db, name, stored, end)
        engines.append(
            {
                "engine": name,
                "findings": [{k: v for k, v in asdict(f).items() if k != "engine"} for f in rows],
            }
        )
    return {"end": end.isoformat(), "engines": engines}


def engine_findings(db: Database, end: datetime) -> list[list[Finding]]:
    """Drift findings of every profiled engine over the week before end."""
    return [engine_drift(db, name, stored, end) for name, stored in stored_profiles(db).items()]
