"""The weekly report's content: the fleet's money and a sentence per engine for a manager, then
per engine KPIs, bounds, gain, seasonal verdict, drift for its engineers.

Every number comes from the same code as the dashboard and the API (app/services/rightsizing,
app/services/economics and app/analytics), over the report's ISO week in TOKENSHAPE_REPORT_TZ;
every status is a word of app/sizing/status.py, and the subject counts what the body shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlencode

import numpy as np
from plotly.colors import sample_colorscale

from app.analytics import overview, shapes
from app.analytics.filters import Filter
from app.charts.heatmap import HEAT_SCALE
from app.charts.style import bin_labels
from app.jobs.schedule import week_bounds
from app.services import profiles
from app.services.economics import EngineMoney, FleetMoney, engine_money, fleet_total
from app.services.rightsizing import engine_drift, recommend, seasonal
from app.sizing.drift import Finding
from app.sizing.rightsize import Recommendation
from app.sizing.slo import Fleet, money
from app.sizing.status import (
    LABELS,
    Status,
    concurrency_gain,
    count_words,
    engine_status,
    failed_status,
)
from app.storage.database import Database

KPI_ROWS = (
    ("requests", "requests", "{:,.0f}"),
    ("input_tokens", "input tokens", "{:,.0f}"),
    ("output_tokens", "output tokens", "{:,.0f}"),
    ("error_rate", "error rate", "{:.2%}"),
    ("ttft_ms_p50", "TTFT p50 (ms)", "{:,.0f}"),
    ("ttft_ms_p95", "TTFT p95 (ms)", "{:,.0f}"),
    ("ttft_ms_p99", "TTFT p99 (ms)", "{:,.0f}"),
    ("itl_ms_p50", "ITL p50 (ms)", "{:,.1f}"),
    ("itl_ms_p95", "ITL p95 (ms)", "{:,.1f}"),
    ("itl_ms_p99", "ITL p99 (ms)", "{:,.1f}"),
    ("e2e_ms_p50", "E2E p50 (ms)", "{:,.0f}"),
    ("e2e_ms_p95", "E2E p95 (ms)", "{:,.0f}"),
    ("e2e_ms_p99", "E2E p99 (ms)", "{:,.0f}"),
)


@dataclass(frozen=True)
class Cell:
    """One heat map cell as the email draws it."""

    count: int
    background: str
    colour: str


@dataclass
class EngineSection:
    """Everything the email says about one engine."""

    name: str
    model: str
    gpus: str
    kpis: list[tuple[str, str, str]]  # label, value, week-over-week change
    recommendation: Recommendation | None
    rebuild: bool
    gain: float | None
    seasonal_verdict: str
    findings: list[Finding]
    heat_rows: list[tuple[str, list[Cell]]]
    heat_columns: list[str]
    links: dict[str, str]
    problem: str | None = None
    money: EngineMoney | None = None
    status: Status | None = None  # the one vocabulary of app/sizing/status.py
    plans: list[tuple[str, str, str, str]] = field(default_factory=list)  # name, peak, GPU-h, cost
    sentence: str = ""  # the engine in one plain sentence, for a manager


@dataclass
class Report:
    """The week's report: a fleet summary line, the subject, and a section per engine."""

    week: str
    start: datetime
    end: datetime
    tz: str
    summary: str
    subject: str
    engines: list[EngineSection] = field(default_factory=list)
    money_line: str = ""  # the fleet's cost per month now → with each engine's best plan
    fleet: FleetMoney | None = None


def _kpis(db: Database, engine: str, start: datetime, end: datetime) -> list[tuple[str, str, str]]:
    cur = db.cursor()
    now = overview.kpis(cur, Filter(start=start, end=end, engines=(engine,)))
    before = overview.kpis(
        cur, Filter(start=start - timedelta(days=7), end=start, engines=(engine,))
    )
    rows = []
    for key, label, fmt in KPI_ROWS:
        value, prev = now.get(key), before.get(key)
        text = "–" if value is None else fmt.format(value)
        change = "–" if value is None or not prev else f"{(value - prev) / prev:+.0%}"
        rows.append((label, text, change))
    return rows


def _heat(db: Database, engine: str, start: datetime, end: datetime):
    """The ISL × OSL heat map as rows of coloured cells (OSL rows from long to short)."""
    hm = shapes.heatmap(db.cursor(), Filter(start=start, end=end, engines=(engine,)))
    counts = hm.counts.T  # OSL rows, ISL columns
    used_x, used_y = np.flatnonzero(counts.sum(axis=0)), np.flatnonzero(counts.sum(axis=1))
    if not len(used_x):
        return [], []
    x_hi, y_hi = int(used_x.max()) + 1, int(used_y.max()) + 1
    # The dashboard's scale: Cividis, linear from the smallest to the largest non-empty cell.
    lo, hi = int(counts[counts > 0].min()), int(counts.max())
    shares = (counts[:y_hi, :x_hi] - lo) / (hi - lo) if hi > lo else np.ones((y_hi, x_hi))
    # One call for every cell: plotly parses the scale on each call (2 s a report, per cell).
    colours = sample_colorscale(HEAT_SCALE, np.clip(shares, 0.0, 1.0).ravel().tolist())
    osl_labels = bin_labels(hm.osl_edges)
    rows = []
    for j in reversed(range(y_hi)):
        cells = []
        for i in range(x_hi):
            n = int(counts[j, i])
            if n == 0:
                cells.append(Cell(0, "#ffffff", "#ffffff"))
                continue
            share = float(shares[j, i])
            colour = colours[j * x_hi + i]
            cells.append(Cell(n, colour, "#ffffff" if share < 0.55 else "#111111"))
        rows.append((osl_labels[j], cells))
    return rows, bin_labels(hm.isl_edges)[:x_hi]


def _plan_rows(m: EngineMoney) -> list[tuple[str, str, str, str]]:
    return [
        (
            p.label,
            f"{p.peak_replicas}",
            f"{p.gpu_hours_month:,.0f}",
            money(p.cost_month, m.currency) if p.cost_month is not None else "–",
        )
        for p in m.plans
    ]


PLAN_WORDS = {  # a plan of app/services/economics in a manager's words
    "now": "today's setup",
    "rebuilt": "rebuilding it and running the replicas its busiest hour needs",
    "hourly": "rebuilding it and scaling its replicas with the hour",
    "seasonal": "running separate day and night engines",
}


def headline(f: FleetMoney) -> str:
    """'saves $42,150/month', 'needs $800/month more', GPU-hours without prices, or
    'nothing to save': the fleet total's headline (FleetMoney.headline), also when the best
    plans cost more than today's (engines short of replicas)."""
    if f.saves_month is not None and f.saves_month <= -1:
        return f"needs {money(-f.saves_month, f.currency)}/month more"
    if f.saves_month is None:
        saved = f.gpu_hours_now_month - f.gpu_hours_best_month
        if saved >= 1:
            share = saved / f.gpu_hours_now_month if f.gpu_hours_now_month else 0.0
            return f"saves {saved:,.0f} GPU-hours/month ({share:.0%})"
        if saved <= -1:
            return f"needs {-saved:,.0f} GPU-hours/month more"
    return f.headline()


def money_line(f: FleetMoney, left_out: list[str]) -> str:
    """The fleet's cost per month now and with each engine's best plan, in one line."""
    if f.now_month is not None and f.best_month is not None:
        line = (
            f"Fleet: {money(f.now_month, f.currency)} a month now → "
            f"{money(f.best_month, f.currency)} with each engine's best plan ({headline(f)})."
        )
    elif f.gpu_hours_now_month:
        line = (
            f"Fleet: {f.gpu_hours_now_month:,.0f} GPU-hours a month now → "
            f"{f.gpu_hours_best_month:,.0f} with each engine's best plan ({headline(f)}); set a "
            "cost per GPU-hour on every engine, or TOKENSHAPE_COST_PER_GPU_HOUR, for money."
        )
    else:
        line = "Fleet: no engine could be priced this week."
    if left_out:
        line += f" Left out (no plan): {', '.join(left_out)}."
    return line


def _plainest(m: EngineMoney) -> str:
    """The simplest plan as cheap as the best one (the best breaks ties by name, so hourly
    scaling that never scales would be named over a plain rebuild)."""
    assert m.best is not None
    order = list(PLAN_WORDS)
    ties = [
        p.name
        for p in m.plans
        if p.name != "now" and abs(p.gpu_hours_month - m.best.gpu_hours_month) < 0.5
    ]
    return min(
        ties, key=lambda n: order.index(n) if n in order else len(order), default=m.best.name
    )


def _money_clause(m: EngineMoney | None, fits: bool) -> str:
    """What the engine's money says in a manager's words ('' without plans)."""
    if m is None or m.baseline is None or m.best is None:
        return ""
    base, best, cur = m.baseline, m.best, m.currency
    priced = base.cost_month is not None and best.cost_month is not None
    plan = _plainest(m)
    how = PLAN_WORDS.get(plan, best.label)
    if fits and plan == "rebuilt":  # the build is right: the saving is the spare replicas
        how = "running only the replicas its busiest hour needs"
    if priced and m.saves_month is not None:
        now, after = money(base.cost_month, cur), money(best.cost_month, cur)
        if m.saves_month >= 1:
            return f"{how} would cut its cost from {now} to {after} a month"
        if m.saves_month <= -1:
            return (
                f"holding every hour takes {how}, {after} a month instead of {now} "
                f"({money(-m.saves_month, cur)} more)"
            )
        return f"it costs {now} a month and no plan costs less"
    saved = base.gpu_hours_month - best.gpu_hours_month
    if saved >= 1:
        return (
            f"{how} would cut its GPU-hours from {base.gpu_hours_month:,.0f} to "
            f"{best.gpu_hours_month:,.0f} a month"
        )
    if saved <= -1:
        return f"holding every hour takes {how}, {-saved:,.0f} GPU-hours a month more"
    return "no plan uses fewer GPU-hours"


def sentence(e: EngineSection) -> str:
    """The engine in one plain sentence for a manager: its status word (the one vocabulary)
    and what it means in replicas and money; the engineers' tables say the rest."""
    status = e.status
    if status is None:
        return ""
    head = f"{e.name} ({status.label})"
    if status.key == "cannot-be-sized":
        return f"{head}: it could not be sized this week; its engineers should check its profile."
    if status.key == "no-data":
        return f"{head}: it served no requests this week, so there is nothing to decide."
    if status.key == "does-not-fit":
        return f"{head}: the model does not fit on its GPUs as configured; it needs a bigger build."
    r = e.recommendation
    x = r.replicas if r is not None else None
    spare = x is not None and x.running is not None and x.running > x.after
    what = ""
    if status.key == "misses-slo" and x is not None:
        if not x.feasible:
            what = "no number of replicas meets its latency targets at the busiest hour"
        else:
            what = (
                f"it runs {x.running} replica{'s' if x.running != 1 else ''} and its busiest "
                f"hour needs {x.after}"
            )
    elif status.key == "rebuild-suggested":
        what = "a rebuild to the bounds below is worth a restart"
        if e.gain is not None and e.gain >= 1.1:
            what += f" (each replica then holds {e.gain:.1f}× the requests at once)"
    elif status.key == "fits":
        what = "today's build holds its traffic"
        if spare and x is not None:
            what += f", with replicas to spare ({x.running} run, its busiest hour needs {x.after})"
    clause = _money_clause(e.money, status.key == "fits")
    parts = [p for p in (what, clause) if p]
    return f"{head}: {'; '.join(parts)}." if parts else f"{head}."


def count_shown(statuses: list[Status]) -> str:
    """'2 rebuild suggested, 1 fit, 1 short of replicas': the statuses as the body shows them
    (an override such as 'short of replicas' counted under its own word), in LABELS' order."""
    parts = []
    for key in LABELS:
        same = [s for s in statuses if s.key == key]
        # The status's own word first, then any override of it.
        for label in sorted(dict.fromkeys(s.label for s in same), key=lambda w: w != LABELS[key]):
            group = [s for s in same if s.label == label]
            parts.append(count_words(group) if label == LABELS[key] else f"{len(group)} {label}")
    return ", ".join(parts) or "no engine"


def build_report(
    db: Database,
    week: str,
    *,
    tz: str,
    public_url: str,
    threshold: float,
    fleet: Fleet = Fleet(),
) -> Report:
    """The report for an ISO week; raises ValueError for a malformed week."""
    start, end = week_bounds(week, tz)
    sections: list[EngineSection] = []
    for name, stored in profiles.stored_profiles(db).items():
        base = public_url.rstrip("/")
        window = {"window": "custom", "start": start.isoformat(), "end": end.isoformat()}
        links = {
            "rightsizing": f"{base}/rightsizing?"
            + urlencode({"engine": name, "start": start.isoformat(), "end": end.isoformat()}),
            "shapes": f"{base}/shapes?" + urlencode({"engine": name, **window}),
            "seasonal": f"{base}/seasonal?" + urlencode({"engine": name, "weeks": "1"}),
        }
        model, gpus = profiles.stored_build(stored)
        try:
            rec = recommend(db, name, start=start, end=end, tz=tz, fleet=fleet)
            season = seasonal(db, name, now=end, tz=tz, weeks=1, threshold=threshold, fleet=fleet)
            cash = engine_money(db, name, now=end, tz=tz, fleet=fleet, weeks=1, report=season)
            heat_rows, heat_columns = _heat(db, name, start, end)
            kpis = _kpis(db, name, start, end)
            drift = engine_drift(db, name, stored, end)
        except Exception as exc:  # one engine's error row; the others are still reported
            problem = profiles.sizing_failure(name, exc)
            sections.append(
                EngineSection(
                    name,
                    model,
                    gpus,
                    [],
                    None,
                    False,
                    None,
                    "",
                    [],
                    [],
                    [],
                    links,
                    problem=problem,
                    status=failed_status(problem),
                )
            )
            continue
        # The gain in the concurrency that matters (expected with a paged KV cache) and the
        # status, both from app/sizing/status.py as on every page.
        status = engine_status(rec)
        sections.append(
            EngineSection(
                name=name,
                model=model,
                gpus=gpus,
                kpis=kpis,
                recommendation=rec,
                rebuild=status.key == "rebuild-suggested",
                gain=concurrency_gain(rec),
                seasonal_verdict=season.verdict,
                findings=drift,
                heat_rows=heat_rows,
                heat_columns=heat_columns,
                links=links,
                money=cash,
                plans=_plan_rows(cash),
                status=status,
            )
        )
    for s in sections:
        s.sentence = sentence(s)
    monies = [s.money for s in sections if s.money is not None]
    totals = fleet_total(monies, fleet.currency)
    left_out = [s.name for s in sections if s.money is None or s.money.baseline is None]
    n = len(sections)
    slo = " within the SLO" if any(m.slo for m in monies) else ""
    said = headline(totals)
    states = [s.status for s in sections if s.status is not None]
    summary = f"{said}{slo if said != 'nothing to save' else ''}: " + ", ".join(
        [f"{n} engine{'s' if n != 1 else ''}", count_shown(states)]
    )
    critical = sum(f.severity == "critical" for s in sections for f in s.findings)
    if critical:
        summary += f", {critical} critical drift finding{'s' if critical != 1 else ''}"
    subject = f"tokenshape {week}: {summary}"
    return Report(
        week,
        start,
        end,
        tz,
        summary,
        subject,
        sections,
        money_line=money_line(totals, left_out),
        fleet=totals,
    )


def report_for(db: Database, settings, week: str) -> Report:
    """The report for a week with the server's settings (time zone, public URL, threshold)."""
    return build_report(
        db,
        week,
        tz=settings.report_tz,
        public_url=settings.public_url,
        threshold=settings.seasonal_threshold,
        fleet=Fleet.of(settings),
    )
