"""The weekly report's content: per engine KPIs, bounds, gain, seasonal verdict, drift.

Every number comes from the same code as the dashboard and the API (app/rightsizing.py and
app/analytics), over the report's ISO week in TOKENSHAPE_REPORT_TZ."""

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
from app.services.economics import EngineMoney, engine_money
from app.services.rightsizing import engine_drift, recommend, seasonal
from app.sizing.drift import Finding
from app.sizing.rightsize import Recommendation
from app.sizing.slo import Fleet, money
from app.sizing.status import Status, concurrency_gain, count_words, engine_status, failed_status
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
    total_now = total_best = 0.0
    money_now: float | None = 0.0
    money_best: float | None = 0.0
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
                    problem=profiles.sizing_failure(name, exc),
                    status=failed_status(profiles.sizing_failure(name, exc)),
                )
            )
            continue
        # The gain in the concurrency that matters (expected with a paged KV cache) and the
        # status, both from app/sizing/status.py as on every page.
        gain = concurrency_gain(rec)
        status = engine_status(rec)
        rebuild = status.key == "rebuild-suggested"
        if cash.baseline is not None and cash.best is not None:
            total_now += cash.baseline.gpu_hours_month
            total_best += cash.best.gpu_hours_month
            if money_now is not None and money_best is not None:
                if cash.baseline.cost_month is None or cash.best.cost_month is None:
                    money_now = money_best = None
                else:
                    money_now += cash.baseline.cost_month
                    money_best += cash.best.cost_month
        sections.append(
            EngineSection(
                name=name,
                model=model,
                gpus=gpus,
                kpis=kpis,
                recommendation=rec,
                rebuild=rebuild,
                gain=gain,
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
    n = len(sections)
    slo = " within the SLO" if any(s.money and s.money.slo for s in sections) else ""
    if money_now is not None and money_best is not None and money_now - money_best >= 1:
        headline = f"saves {money(money_now - money_best, fleet.currency)}/month{slo}"
    elif total_now - total_best >= 1:
        share = 1 - total_best / total_now if total_now else 0.0
        headline = f"saves {total_now - total_best:,.0f} GPU-hours/month ({share:.0%}){slo}"
    else:
        headline = "nothing to save"
    states = [s.status for s in sections if s.status is not None]
    parts = [f"{n} engine{'s' if n != 1 else ''}", count_words(states)]
    summary = f"{headline}: " + ", ".join(parts)
    critical = sum(f.severity == "critical" for s in sections for f in s.findings)
    alert = f", {critical} critical drift finding{'s' if critical != 1 else ''}" if critical else ""
    subject = f"tokenshape {week}: {summary}{alert}"
    return Report(week, start, end, tz, summary, subject, sections)


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
