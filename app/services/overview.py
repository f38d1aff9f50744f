"""The Overview's series and money: requests/s, goodput and TTFT/ITL at each engine's SLO
percentile over a window, each engine's GPU-hours or money now against its best plan, and the
engine cards (status, requests/s, goodput, money per engine).

Joins the traffic rates (`app/analytics/traffic.py`), the goodput ledger (`app/services/slo.py`),
the latency quantiles (`app/analytics/overview_series.py`), the recommendations
(`app/services/rightsizing.py`) and the plans in money (`app/services/economics.py`) for the
Overview page."""

from __future__ import annotations

import threading
from dataclasses import dataclass, replace
from datetime import datetime

import pandas as pd

from app.analytics import goodput, overview_series, traffic, windows
from app.analytics.filters import Filter
from app.services import economics, slo
from app.services.profiles import NoProfile, sizing_failure, stored_profiles
from app.services.rightsizing import recommend
from app.sizing.recommend import DEFAULT_COVERAGE
from app.sizing.slo import DEFAULT_PERCENTILE, Fleet, Slo
from app.sizing.status import Status, engine_status, failed_status
from app.storage.database import Database

# At most this many engine cards; the rest are counted and left to the Rightsizing page.
CARDS_LIMIT = 12
# Money is planned over the last whole weeks, as on the Rightsizing and Seasonal pages.
MONEY_WEEKS = 4
# The plans run the performance model (seconds per engine when cold) and the Overview asks
# for them from two callbacks at once (the cards and the money chart): one at a time, so the
# second reads what the first cached instead of computing it again on the same cores.
PLANS_LOCK = threading.Lock()
NO_PROFILE = (
    "no profile yet: say what it runs on, on its Rightsizing page, to see its status and plans"
)

MONEY_COLUMNS = (
    "engine",
    "now",
    "best",
    "now_label",
    "best_label",
    "now_replicas",
    "best_replicas",
    "verdict",
)


@dataclass(frozen=True)
class EngineLatency:
    """One engine's TTFT and ITL at its SLO percentile per bucket, and its targets."""

    engine: str
    slo: Slo | None
    percentile: float
    series: pd.DataFrame  # bucket, requests, ttft_ms, itl_ms


@dataclass(frozen=True)
class Glance:
    """What the Overview's KPIs and first charts draw over one window."""

    bucket: str
    rates: pd.DataFrame  # bucket, requests, requests_per_s (weighted by 1/sample_rate)
    goodput: pd.DataFrame  # slo.goodput_series: t, requests, good, not_measured, missed, …
    fleet_p95: pd.DataFrame  # bucket, requests, ttft_ms, itl_ms, e2e_ms: p95 of every request

    def goodput_total(self) -> float | None:
        """Goodput over the whole window (good / judged), None when nothing was judged."""
        if not len(self.goodput):
            return None
        judged = float((self.goodput["good"] + self.goodput["missed"]).sum())
        return float(self.goodput["good"].sum()) / judged if judged > 0 else None

    def goodput_target(self) -> float | None:
        """The window's target share, weighted by the requests judged."""
        if not len(self.goodput):
            return None
        judged = self.goodput["good"] + self.goodput["missed"]
        total = float(judged.sum())
        if total <= 0:
            return None
        return float((self.goodput["target"].fillna(0) * judged).sum()) / total


def bucket_of(db: Database, flt: Filter) -> str:
    """The trend bucket of the filter's window (as every trend page picks it)."""
    start, end, _ = windows.span(db.cursor(), flt)
    return windows.bucket_for(start, end)


def glance(
    db: Database, flt: Filter, fleet: Fleet, *, tz: str = "UTC", bucket: str | None = None
) -> Glance:
    """The window's requests/s, goodput and fleet-wide TTFT/ITL/E2E p95 per bucket."""
    cur = db.cursor()
    bucket = bucket or bucket_of(db, flt)
    rates = traffic.rates(cur, flt, bucket, tz)
    good = slo.goodput_series(db, flt, fleet, tz=tz, bucket=bucket)
    fleet_p95 = overview_series.quantile_over_time(
        cur,
        flt,
        bucket,
        tz,
        DEFAULT_PERCENTILE / 100,
        measures=overview_series.FLEET_MEASURES,
    )
    return Glance(bucket, rates, good, fleet_p95)


@dataclass(frozen=True)
class Latency:
    """TTFT and ITL against the SLO lines: per engine, or the fleet's when none is named."""

    bucket: str
    engines: list[EngineLatency]  # the busiest first
    fleet_p95: pd.DataFrame | None  # only when the window names no engine
    fleet_slo: Slo | None  # the fleet's default targets (settings), if any
    relative_error: float  # of the quantiles (0: exact)


def latency(
    db: Database, flt: Filter, fleet: Fleet, *, tz: str = "UTC", bucket: str | None = None
) -> Latency:
    """Each engine's TTFT and ITL per bucket at its own SLO percentile (p95 without one)."""
    cur = db.cursor()
    bucket = bucket or bucket_of(db, flt)
    led = slo.ledger(db, fleet)
    engines, errors = [], [0.0]
    names = overview_series.engines_in(cur, flt)
    targets = {name: led.slo_of(name) for name in names}
    percentiles = {
        name: (t.percentile if t is not None else DEFAULT_PERCENTILE) for name, t in targets.items()
    }
    # One scan of the rollups for every engine when the window is read from them.
    together = overview_series.quantile_by_engine(
        cur, flt, {n: p / 100 for n, p in percentiles.items()}, bucket, tz
    )
    for name in names:
        if together is not None:
            series = together[name]
        else:
            series = overview_series.quantile_over_time(
                cur, overview_series.for_engine(flt, name), bucket, tz, percentiles[name] / 100
            )
        errors.append(float(series.attrs.get("relative_error", 0.0)))
        engines.append(EngineLatency(name, targets[name], percentiles[name], series))
    fleet_p95 = None
    if not engines:
        fleet_p95 = overview_series.quantile_over_time(
            cur, flt, bucket, tz, DEFAULT_PERCENTILE / 100
        )
        errors.append(float(fleet_p95.attrs.get("relative_error", 0.0)))
    return Latency(bucket, engines, fleet_p95, led.default, max(errors))


@dataclass(frozen=True)
class Money:
    """Per engine now against its best plan, in money when every engine is priced, else in
    GPU-hours a month; the fleet's headline and why an engine is left out."""

    frame: pd.DataFrame  # MONEY_COLUMNS
    unit: str  # "$/month" or "GPU-hours/month"
    currency: str | None  # None: GPU-hours
    headline: str
    saves: float | None  # in money, or GPU-hours when not priced
    left_out: list[str]  # "engine: why"


def money(db: Database, *, now: datetime, tz: str, fleet: Fleet, weeks: int = 4) -> Money:
    """The fleet's plans as a frame for the now-vs-planned chart (cached by economics)."""
    m = economics.fleet_money(db, now=now, tz=tz, fleet=fleet, weeks=weeks)
    priced = m.now_month is not None and m.best_month is not None
    rows, left_out = [], []
    for e in m.engines:
        if e.baseline is None or e.best is None:
            left_out.append(f"{e.engine}: {e.error or e.verdict}")
            continue
        if priced:
            now_v, best_v = e.baseline.cost_month, e.best.cost_month
        else:
            now_v, best_v = e.baseline.gpu_hours_month, e.best.gpu_hours_month
        rows.append(
            (
                e.engine,
                float(now_v or 0.0),
                float(best_v or 0.0),
                e.baseline.label,
                e.best.label,
                e.baseline.peak_replicas,
                e.best.peak_replicas,
                e.verdict,
            )
        )
    frame = pd.DataFrame(rows, columns=list(MONEY_COLUMNS))
    if priced:
        saves = m.saves_month
        unit = f"{m.currency}/month" if len(m.currency) == 1 else f"{m.currency} per month"
    else:
        saves = m.gpu_hours_now_month - m.gpu_hours_best_month if m.engines else None
        unit = "GPU-hours/month"
    return Money(frame, unit, m.currency if priced else None, m.headline(), saves, left_out)


# -- the engine cards ------------------------------------------------------------------------


@dataclass(frozen=True)
class EngineCard:
    """What an engine's card draws at once: its requests/s over the window and its goodput
    against its SLO (the status and money follow from `card_plans`)."""

    engine: str
    profiled: bool
    rates: pd.DataFrame  # bucket, requests, requests_per_s (weighted by 1/sample_rate)
    requests: float  # in the window, weighted
    goodput: float | None  # good / (good + missed); None when nothing was judged
    target: float | None  # the share its SLO asks for (0.95 for p95)
    slo: Slo | None  # its targets: its profile's, else the fleet's, else none


@dataclass(frozen=True)
class Cards:
    """The engine cards of a window, in the order asked, and the trend bucket they use."""

    bucket: str
    cards: list[EngineCard]


def card_engines(db: Database, flt: Filter, limit: int = CARDS_LIMIT) -> tuple[list[str], int]:
    """The engines a card is due to, at most `limit` — those in the window's traffic, the
    busiest first, then those with a profile and no traffic in it, by name (only the view's
    engine when it names one) — and how many more there are."""
    seen = overview_series.engines_in(db.cursor(), flt, limit=10_000)
    quiet = sorted(set(stored_profiles(db)) - set(seen))
    if flt.engines:
        quiet = [name for name in quiet if name in flt.engines]
    names = [*seen, *quiet]
    return names[:limit], max(len(names) - limit, 0)


def engine_cards(
    db: Database,
    flt: Filter,
    names: list[str],
    fleet: Fleet,
    *,
    tz: str = "UTC",
    bucket: str | None = None,
) -> Cards:
    """The cards of `names`: each engine's requests/s per bucket and goodput over the window."""
    cur = db.cursor()
    bucket = bucket or bucket_of(db, flt)
    led = slo.ledger(db, fleet)
    judged = None
    if led.any() and names:
        # One scan for every engine's goodput (the ledger's rule: app/analytics/goodput.py).
        narrowed = flt if flt.engines else replace(flt, engines=tuple(names))
        judged = goodput.by_dimension(cur, narrowed, led.targets(), "engine")
    by_engine = {} if judged is None else {r.engine: r for r in judged.itertuples()}
    profiled = set(stored_profiles(db))
    cards = []
    for name in names:
        rates = traffic.rates(cur, replace(flt, engines=(name,)), bucket, tz)
        row = by_engine.get(name)
        good = None
        if row is not None and row.good + row.missed > 0:
            good = float(row.goodput)
        target = None if row is None or pd.isna(row.target) else float(row.target)
        s = led.slo_of(name)
        if target is None and s is not None:
            target = s.percentile / 100
        requests = float(rates["requests"].sum()) if len(rates) else 0.0
        cards.append(EngineCard(name, name in profiled, rates, requests, good, target, s))
    return Cards(bucket, cards)


@dataclass(frozen=True)
class CardPlan:
    """An engine's status (as the Rightsizing page and the email say it) and its money."""

    engine: str
    status: Status
    money: economics.EngineMoney | None  # None: no profile, so no plans


def engine_status_over(
    db: Database,
    engine: str,
    *,
    start: datetime,
    end: datetime,
    tz: str,
    fleet: Fleet,
    coverage: float = DEFAULT_COVERAGE,
) -> Status:
    """The engine's status over [start, end) exactly as the Rightsizing fleet table gets it:
    `recommend` then `engine_status`; a stored profile that fails says why."""
    try:
        r = recommend(db, engine, start=start, end=end, coverage=coverage, tz=tz, fleet=fleet)
        return engine_status(r)
    except NoProfile as exc:  # a stored profile that is no longer valid
        return failed_status(str(exc))
    except Exception as exc:  # one engine's failure must not blank the others' cards
        return failed_status(sizing_failure(engine, exc))


def card_plans(
    db: Database,
    engines: list[str],
    *,
    start: datetime,
    end: datetime,
    now: datetime,
    tz: str,
    fleet: Fleet,
) -> list[CardPlan]:
    """Each engine's status over [start, end) (the window its Rightsizing link opens) and its
    money now against its best plan over the last MONEY_WEEKS weeks (as the fleet table)."""
    profiled = stored_profiles(db)
    with PLANS_LOCK:
        statuses = {
            name: engine_status_over(db, name, start=start, end=end, tz=tz, fleet=fleet)
            if name in profiled
            else failed_status(NO_PROFILE)
            for name in engines
        }
        money_of: dict[str, economics.EngineMoney] = {}
        if any(name in profiled for name in engines):
            m = economics.fleet_money(db, now=now, tz=tz, fleet=fleet, weeks=MONEY_WEEKS)
            money_of = {e.engine: e for e in m.engines}
    return [CardPlan(name, statuses[name], money_of.get(name)) for name in engines]
