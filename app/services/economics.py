"""GPUs and money: what each engine costs now, after a rebuild, scaled by the hour and with
seasonal windows, per month; its cost per million tokens against an API's price; fleet totals.

Every figure comes from the seasonal plans (app/services/rightsizing.seasonal: replicas per
hour, the larger of the memory and the latency need under the SLO) and the profile's cost per
GPU-hour (or the fleet's), so the Rightsizing and Seasonal pages, the Overview, the API and
the weekly email show the same money."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from app.analytics.filters import Filter
from app.analytics.stamp import data_stamp
from app.analytics.tokens import Tokens, token_totals
from app.services.cache import TtlCache
from app.services.profiles import load_profile, sizing_failure, stored_profiles
from app.services.rightsizing import SeasonalReport, seasonal
from app.sizing.profile import EngineProfile
from app.sizing.seasonal import HOURS_PER_MONTH, Plan, window_label
from app.sizing.slo import Fleet, api_prices, money
from app.storage.database import Database

# Plans are recomputed at most this often per engine (the hour's data barely moves them).
CACHE_SECONDS = 300.0
SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600
_cache: TtlCache[EngineMoney] = TtlCache(CACHE_SECONDS)


@dataclass(frozen=True)
class PlanMoney:
    """One plan's replicas, GPU-hours and cost per month."""

    name: str  # "now", "rebuilt", "hourly", "seasonal"
    label: str
    peak_replicas: int
    gpu_hours_month: float
    cost_month: float | None


@dataclass(frozen=True)
class EngineMoney:
    """An engine's plans in GPU-hours and money, the best of them, and its token costs."""

    engine: str
    currency: str
    cost_per_gpu_hour: float | None
    gpus_per_replica: int
    plans: list[PlanMoney]
    best: PlanMoney | None
    baseline: PlanMoney | None  # "now" when the profile says how many run, else "rebuilt"
    saves_month: float | None  # baseline − best, in money
    saves_gpu_hours_month: float
    tokens: Tokens | None
    input_per_mtok: float | None  # the baseline's cost per million input tokens
    output_per_mtok: float | None
    api_month: float | None  # the same tokens at the API's price
    api_prices: tuple[float | None, float | None]
    verdict: str
    slo: str | None
    notes: list[str] = field(default_factory=list)
    error: str | None = None

    @classmethod
    def unpriced(
        cls,
        engine: str,
        currency: str,
        message: str,
        *,
        cost_per_gpu_hour: float | None = None,
        gpus_per_replica: int = 1,
        api_prices: tuple[float | None, float | None] = (None, None),
        slo: str | None = None,
    ) -> EngineMoney:
        """An engine with no plans and no money: `error` (and the verdict) saying why."""
        return cls(
            engine,
            currency,
            cost_per_gpu_hour,
            gpus_per_replica,
            [],
            None,
            None,
            None,
            0.0,
            None,
            None,
            None,
            None,
            api_prices,
            message,
            slo,
            error=message,
        )


def failed_money(engine: str, message: str, fleet: Fleet) -> EngineMoney:
    """An engine's error row: no plans, no money, `error` saying why."""
    return EngineMoney.unpriced(engine, fleet.currency, message)


def _plan_money(name: str, label: str, p: Plan | None) -> PlanMoney | None:
    if p is None:
        return None
    return PlanMoney(name, label, max(p.replicas), p.gpu_hours_month, p.cost_month)


def engine_money(
    db: Database,
    engine: str,
    *,
    now: datetime,
    tz: str,
    fleet: Fleet = Fleet(),
    weeks: int = 4,
    report: SeasonalReport | None = None,
) -> EngineMoney:
    """The engine's plans in money over the last `weeks` whole weeks (cached a few minutes)."""
    profile = load_profile(db, engine)
    key = (
        str(db.path),
        engine,
        data_stamp(db.cursor(), engine),
        json.dumps(profile.model_dump(mode="json"), sort_keys=True),
        now.astimezone(UTC).replace(minute=0, second=0, microsecond=0),
        tz,
        fleet,
        weeks,
    )
    if report is not None:
        # A caller's own report (its headroom, coverage, threshold): priced, never cached, so
        # the defaults every page reads stay the defaults.
        return _money_of(db, engine, profile, report, fleet)
    hit = _cache.get(key)
    if hit is not None:
        return hit
    report = seasonal(db, engine, now=now, tz=tz, weeks=weeks, fleet=fleet)
    return _cache.put(key, _money_of(db, engine, profile, report, fleet))


def _money_of(
    db: Database, engine: str, profile: EngineProfile, r: SeasonalReport, fleet: Fleet
) -> EngineMoney:
    prices = api_prices(profile, fleet)
    slo = r.slo.words() if r.slo else None
    if r.result is None:
        return EngineMoney.unpriced(
            engine,
            r.currency,
            r.verdict,
            cost_per_gpu_hour=r.cost_per_gpu_hour,
            gpus_per_replica=r.gpus_per_replica,
            api_prices=prices,
            slo=slo,
        )
    res = r.result
    today = "today's replicas, all day"
    if res.now is not None and res.now.name == "today":
        today = "today's bounds, replicas for the peak all day"
    candidates = [
        _plan_money("now", today, res.now),
        _plan_money("rebuilt", "rebuilt, replicas for the peak all day", res.static),
        _plan_money("hourly", "rebuilt, replicas scaled by the hour", res.hourly),
        _plan_money("seasonal", "two windows, each with its own bounds", res.split),
    ]
    plans = [p for p in candidates if p is not None]
    baseline = plans[0]
    # The best plan is one that holds the traffic (memory and SLO): today's replicas may not.
    best = min((p for p in plans if p.name != "now"), key=lambda p: (p.gpu_hours_month, p.name))
    saves_hours = baseline.gpu_hours_month - best.gpu_hours_month
    saves = None
    if best.cost_month is not None and baseline.cost_month is not None:
        saves = baseline.cost_month - best.cost_month
    flt = Filter(start=r.start, end=r.end, engines=(engine,))
    tokens = token_totals(db.cursor(), flt)
    # The months the tokens cover: from the first request in the window (a database younger
    # than the window holds less than `weeks` of them) to its end.
    first = tokens.first or r.start
    months = max((r.end - max(r.start, first)).total_seconds(), 3600.0) / SECONDS_PER_MONTH
    in_m, out_m, api_m = None, None, None
    notes: list[str] = []
    # Cost per token at what holds the traffic: today's plan, or the best one when today's
    # replicas are too few for the SLO (today's cost would understate it).
    basis = best if best.gpu_hours_month > baseline.gpu_hours_month + 0.5 else baseline
    if basis.cost_month is not None and tokens.requests > 0:
        spent = basis.cost_month * months  # the window's cost on that plan
        timed = tokens.ttft_s + tokens.decode_s
        # GPU time split by what the requests measured: before the first token (prefill and
        # its queue) for input, after it (decode) for output.
        share_in = tokens.ttft_s / timed if timed > 0 else 0.5
        if tokens.input_tokens:
            in_m = spent * share_in / tokens.input_tokens * 1e6
        if tokens.output_tokens:
            out_m = spent * (1 - share_in) / tokens.output_tokens * 1e6
        notes.append(
            f"cost per million tokens: the cost of the plan '{basis.label}', split by the "
            f"measured time before the first token ({share_in:.0%}, input) and after it "
            "(output)"
        )
    if prices[0] is not None and prices[1] is not None and tokens.requests > 0:
        api_m = (tokens.input_tokens * prices[0] + tokens.output_tokens * prices[1]) / 1e6 / months
    short = _short_hours(res.now, res.hourly)
    verdict = _verdict(engine, baseline, best, saves, fleet.currency, short, slo is not None)
    infeasible = r.latency.infeasible if r.latency is not None else []
    if infeasible:
        # The plans above hold memory's need in those hours; the targets are out of reach.
        need = r.latency.needs[infeasible[0]] if r.latency is not None else None
        verdict += (
            f" No replica count meets the SLO at {_hours_words(infeasible)}"
            + (f": {need.reason}" if need is not None and need.reason else "")
            + "; those hours are planned for memory alone."
        )
    elif r.latency is not None and r.latency.error and slo is not None:
        verdict += f" Memory alone: {r.latency.error}."
    return EngineMoney(
        engine,
        r.currency,
        r.cost_per_gpu_hour,
        r.gpus_per_replica,
        plans,
        best,
        baseline,
        saves,
        saves_hours,
        tokens,
        in_m,
        out_m,
        api_m,
        prices,
        verdict,
        slo,
        notes,
    )


def _verdict(
    engine: str,
    baseline: PlanMoney,
    best: PlanMoney,
    saves: float | None,
    currency: str,
    short: tuple[list[int], int, int] | None = None,
    has_slo: bool = True,
) -> str:
    if short is not None:
        hours, have, need = short
        change = ""
        if saves is not None:
            change = (
                f", and saves {money(saves, currency)} a month"
                if saves >= 0
                else f", for {money(-saves, currency)} a month more"
            )
        misses = "misses its SLO at the peak" if has_slo else "is short of replicas at the peak"
        return (
            f"{engine} {misses}: today's {have} replica"
            f"{'s are' if have != 1 else ' is'} too few for {_hours_words(hours)} (it needs "
            f"{need}); {best.label} holds every hour{change}."
        )
    if best.gpu_hours_month > baseline.gpu_hours_month + 0.5:
        more = f"{money(-saves, currency)} a month, " if saves is not None else ""
        return (
            f"{engine} is short of replicas: holding its traffic within the SLO takes "
            f"{best.peak_replicas} at the peak ({best.label}), {more}"
            f"{best.gpu_hours_month - baseline.gpu_hours_month:,.0f} GPU-hours a month more "
            f"than {baseline.label}."
        )
    if best.name == baseline.name or baseline.gpu_hours_month - best.gpu_hours_month < 1:
        return f"{engine} is sized right: no plan uses fewer GPU-hours than {baseline.label}."
    share = 1 - best.gpu_hours_month / baseline.gpu_hours_month
    amount = f"{money(saves, currency)} a month, " if saves is not None else ""
    return (
        f"{engine}: {best.label} saves {amount}{share:.0%} of GPU-hours against "
        f"{baseline.label} ({baseline.gpu_hours_month:,.0f} → {best.gpu_hours_month:,.0f} "
        "GPU-hours a month)."
    )


def _short_hours(now: Plan | None, needed: Plan) -> tuple[list[int], int, int] | None:
    """The local hours today's replicas cannot hold (the hourly plan needs more), today's
    count and the most needed; None when today's replicas hold every hour or are unknown."""
    if now is None or now.name != "now":
        return None
    hours = [h for h in range(24) if now.replicas[h] < needed.replicas[h]]
    if not hours:
        return None
    return hours, max(now.replicas), max(needed.replicas[h] for h in hours)


def _hours_words(hours: list[int]) -> str:
    """'12:00–16:00' for consecutive hours (several runs joined by commas)."""
    runs: list[list[int]] = []
    for h in sorted(hours):
        if runs and runs[-1][-1] == h - 1:
            runs[-1].append(h)
        else:
            runs.append([h])
    return ", ".join(window_label(tuple(r)) for r in runs)


@dataclass(frozen=True)
class FleetMoney:
    """Every profiled engine's money and the fleet's totals."""

    engines: list[EngineMoney]
    currency: str
    now_month: float | None
    best_month: float | None
    saves_month: float | None
    gpu_hours_now_month: float
    gpu_hours_best_month: float

    def headline(self) -> str:
        """'saves $4,210/month within the SLO' or the GPU-hours when no cost is set."""
        if self.saves_month is not None and self.saves_month >= 1:
            return f"saves {money(self.saves_month, self.currency)}/month"
        saved = self.gpu_hours_now_month - self.gpu_hours_best_month
        if saved >= 1:
            return f"saves {saved:,.0f} GPU-hours/month"
        return "nothing to save"


def fleet_money(
    db: Database, *, now: datetime, tz: str, fleet: Fleet = Fleet(), weeks: int = 4
) -> FleetMoney:
    """Money for every engine with a stored profile; an engine that cannot be sized (a bad
    profile, a failure of the model on it) is an error row, left out of the totals."""
    engines = []
    for name in stored_profiles(db):
        try:
            engines.append(engine_money(db, name, now=now, tz=tz, fleet=fleet, weeks=weeks))
        except Exception as exc:  # one engine must never sink the fleet's money
            engines.append(failed_money(name, sizing_failure(name, exc), fleet))
    return fleet_total(engines, fleet.currency)


def fleet_total(engines: list[EngineMoney], currency: str) -> FleetMoney:
    """The fleet's totals over the engines' money: an engine without plans is left out; money
    only when every plan has a price, GPU-hours always (the Rightsizing page's and the email's
    one sum)."""
    costs_now = [e.baseline.cost_month for e in engines if e.baseline]
    costs_best = [e.best.cost_month for e in engines if e.best]
    priced = all(c is not None for c in costs_now + costs_best) and bool(costs_now)
    now_m = sum(c for c in costs_now if c is not None) if priced else None
    best_m = sum(c for c in costs_best if c is not None) if priced else None
    return FleetMoney(
        engines,
        currency,
        now_m,
        best_m,
        None if now_m is None or best_m is None else now_m - best_m,
        sum(e.baseline.gpu_hours_month for e in engines if e.baseline),
        sum(e.best.gpu_hours_month for e in engines if e.best),
    )


def money_dict(m: EngineMoney) -> dict[str, Any]:
    """The engine's money as JSON."""

    def plan(p: PlanMoney | None) -> dict[str, Any] | None:
        if p is None:
            return None
        return {
            "name": p.name,
            "label": p.label,
            "peak_replicas": p.peak_replicas,
            "gpu_hours_month": round(p.gpu_hours_month, 1),
            "cost_month": None if p.cost_month is None else round(p.cost_month, 2),
        }

    t = m.tokens
    tokens = None
    if t is not None:
        tokens = {
            "requests": round(t.requests),
            "input": round(t.input_tokens),
            "output": round(t.output_tokens),
        }

    def r4(x: float | None) -> float | None:
        return None if x is None else round(x, 4)

    return {
        "engine": m.engine,
        "currency": m.currency,
        "cost_per_gpu_hour": m.cost_per_gpu_hour,
        "gpus_per_replica": m.gpus_per_replica,
        "slo": m.slo,
        "plans": [plan(p) for p in m.plans],
        "baseline": plan(m.baseline),
        "best": plan(m.best),
        "saves_month": None if m.saves_month is None else round(m.saves_month, 2),
        "saves_gpu_hours_month": round(m.saves_gpu_hours_month, 1),
        "tokens_in_window": tokens,
        "cost_per_million_input_tokens": r4(m.input_per_mtok),
        "cost_per_million_output_tokens": r4(m.output_per_mtok),
        "api_price_per_million": {"input": m.api_prices[0], "output": m.api_prices[1]},
        "api_cost_month": None if m.api_month is None else round(m.api_month, 2),
        "verdict": m.verdict,
        "notes": m.notes,
        "error": m.error,
    }
