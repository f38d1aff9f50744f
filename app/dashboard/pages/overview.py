"""Overview page, the morning landing page: the drift findings and one card per engine (its
status as the Rightsizing page and the email say it, requests/s, goodput against its SLO,
money now → best plan, a link to its Rightsizing page over the same window) above the fold;
then the window at a glance — headline KPIs with their sparklines, the fleet's requests/s and
p95 latencies, goodput and TTFT/ITL against the SLO lines over time, GPU-hours or money now vs
planned — every KPI against the window before, and the traffic per model."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta
from typing import cast
from urllib.parse import urlencode

import dash
import pandas as pd
from dash import ALL, Dash, Input, Output, dcc, html

from app.analytics import overview, windows
from app.analytics.filters import Filter
from app.analytics.rollups.missing import raw_only_note
from app.charts import overview as charts
from app.dashboard import edge, filterbar, ids
from app.dashboard.edge import CardsData, MoneyWeeks, Query
from app.dashboard.findings import drift_panel
from app.dashboard.pages import register_page
from app.dashboard.pages.rightsizing import WINDOWS as RIGHTSIZING_WINDOWS
from app.dashboard.pages.rightsizing import status_badge
from app.services import overview as glance_service
from app.services.economics import EngineMoney
from app.services.profiles import stored_profiles
from app.services.rightsizing import drift_note, engine_findings, fleet_statuses, window_to
from app.services.slo import HOW_TO_SET
from app.sizing.drift import Finding
from app.sizing.slo import Fleet, money
from app.sizing.status import Status, failed_status
from app.storage.database import Database

log = logging.getLogger("tokenshape.dashboard")
GRAPH_CONFIG: dcc.Graph.Config = {"displaylogo": False}
SPARK_CONFIG: dcc.Graph.Config = {"displayModeBar": False}


def _fmt(value: float | int | None, digits: int = 0) -> str:
    if value is None or value != value:  # None or NaN
        return "–"
    return f"{value:,.{digits}f}"


def _delta(now: float | None, before: float | None, lower_is_better: bool | None) -> html.Div:
    """'▲ 12% vs previous', coloured by whether the change is good (volumes stay neutral)."""
    if now is None or not before:
        return html.Div("no previous window" if before is None else "", className="kpi-delta")
    change = (now - before) / before
    good = None
    if lower_is_better is not None and abs(change) >= 0.005:
        good = (change < 0) == lower_is_better
    arrow = "▲" if change > 0 else "▼" if change < 0 else "="
    tone = "" if good is None else (" good" if good else " bad")
    return html.Div(f"{arrow} {abs(change):.0%} vs previous", className="kpi-delta" + tone)


def _kpi(
    label: str,
    value: str,
    delta: html.Div | None = None,
    spark: dcc.Graph | None = None,
    value_id: str | None = None,
) -> html.Div:
    shown = (
        html.Div(value, className="kpi-value", id=value_id)
        if value_id
        else html.Div(value, className="kpi-value")
    )
    parts: list = [shown, html.Div(label, className="kpi-label")]
    if delta is not None:
        parts.append(delta)
    if spark is not None:
        parts.append(spark)
    return html.Div(parts, className="kpi")


def _spark(graph_id: str, figure: dict) -> dcc.Graph:
    # A fixed height in the card: the figure's own is 44 px, and nothing should jump.
    return dcc.Graph(
        id=graph_id, figure=figure, config=SPARK_CONFIG, style={"height": "44px", "width": "170px"}
    )


def _previous(view: filterbar.View, now: datetime) -> Filter | None:
    """The window of the same length just before this one (none for 'all time')."""
    if view.start is None:
        return None
    end = view.end or now
    return replace(view.filter(), start=view.start - (end - view.start), end=view.start)


def _seconds(cur, view: filterbar.View, now: datetime) -> float | None:
    """The window's length in seconds; "all time" has none of its own: the stored span it
    covers."""
    first, last, _ = windows.span(cur, view.filter())
    begin = view.start or first
    finish = view.end or (now if view.start else last)
    return (finish - begin).total_seconds() if begin and finish else None


def _goodput_kpi(g: glance_service.Glance) -> html.Div:
    total, target = g.goodput_total(), g.goodput_target()
    if total is None:
        note = "no SLO set" if not len(g.goodput) else "no request judged"
        return _kpi("goodput (met the SLO)", "–", html.Div(note, className="kpi-delta"))
    met = target is None or total >= target - 1e-12
    words = f"target {target:.0%}: " + ("met" if met else "missed") if target is not None else ""
    delta = html.Div(words, className="kpi-delta" + (" good" if met else " bad"))
    spark = _spark(
        ids.OVERVIEW_SPARK_GOODPUT,
        charts.sparkline_figure(g.goodput["t"], g.goodput["goodput"], target=target, percent=True),
    )
    return _kpi("goodput (met the SLO)", f"{total:.1%}", delta, spark)


def _kpi_cards(
    cur,
    view: filterbar.View,
    now: datetime,
    g: glance_service.Glance,
    table_error: float = 0.0,
) -> html.Div:
    # Long windows read the hourly rollups (latency quantiles within ±0.99%, said below).
    k = overview.kpis(cur, view.filter(), exact=False)
    prev_filter = _previous(view, now)
    p = overview.kpis(cur, prev_filter, exact=False) if prev_filter else {}
    seconds = _seconds(cur, view, now)
    # kpis() always sets "requests" and "relative_error" to numbers.
    rate = cast(float, k["requests"]) / seconds if seconds else None
    prev_rate = (p.get("requests") or 0) / seconds if seconds and p else None

    def card(
        label: str,
        key: str,
        unit: str = "",
        lower_is_better: bool | None = None,  # None: a volume, neither good nor bad
        digits: int = 0,
        spark: dcc.Graph | None = None,
    ) -> html.Div:
        value = k[key]
        text = "–" if value is None else f"{value:,.{digits}f}{unit}"
        return _kpi(label, text, _delta(value, p.get(key), lower_is_better) if p else None, spark)

    fleet = g.fleet_p95
    headline = [
        _kpi(
            "requests/s",
            _fmt(rate, 3) if rate is not None else "–",
            _delta(rate, prev_rate, None) if p else None,
            _spark(
                ids.OVERVIEW_SPARK_RATE,
                charts.sparkline_figure(g.rates["bucket"], g.rates["requests_per_s"]),
            ),
        ),
        _goodput_kpi(g),
        card(
            "TTFT p95 (ms)",
            "ttft_ms_p95",
            lower_is_better=True,
            spark=_spark(
                ids.OVERVIEW_SPARK_TTFT,
                charts.sparkline_figure(fleet["bucket"], fleet["ttft_ms"]),
            ),
        ),
        card(
            "ITL p95 (ms)",
            "itl_ms_p95",
            lower_is_better=True,
            spark=_spark(
                ids.OVERVIEW_SPARK_ITL, charts.sparkline_figure(fleet["bucket"], fleet["itl_ms"])
            ),
        ),
        # Filled by the money callback: the plans take about a second per engine when cold.
        _kpi(
            "to save a month (best plans)",
            "…",
            html.Div("computing the plans…", className="kpi-delta", id=ids.OVERVIEW_SAVES_NOTE),
            value_id=ids.OVERVIEW_SAVES,
        ),
    ]
    cards = [
        card("requests", "requests"),
        card("input tokens", "input_tokens"),
        card("output tokens", "output_tokens"),
        _kpi(
            "error rate",
            "–" if k["error_rate"] is None else f"{k['error_rate']:.2%}",
            _delta(k["error_rate"], p.get("error_rate"), True) if p else None,
        ),
    ]
    for m, label in (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E")):
        for q in ("p50", "p95", "p99"):
            if m != "e2e_ms" and q == "p95":
                continue  # in the headline row, with its sparkline
            cards.append(card(f"{label} {q} (ms)", f"{m}_{q}", lower_is_better=True))
    return html.Div(
        # One note for the cards and the per-model table: the larger of their errors.
        [
            html.Div(headline, className="kpis"),
            html.Div(cards, className="kpis"),
            _accuracy(max(cast(float, k["relative_error"]), table_error)),
        ],
        id=ids.OVERVIEW_KPIS,
    )


def _accuracy(relative_error: float | None) -> html.P:
    """Whether the quantiles shown are exact or from the hourly rollups (DESIGN §6)."""
    text = (
        f"Latency and token quantiles from hourly rollups: each within ±{relative_error:.2%}; "
        "counts, tokens and error rates exact."
        if relative_error
        else "Exact quantiles (DuckDB quantile_cont over the window's rows)."
    )
    return html.P(text, className="muted")


# The table shows the busiest models; the rest are one "other" row (a page listing 12,000
# models weighed 11.7 MB and took 35 s to draw); a model filter shows any one of them.
MODEL_ROWS = 50


def _model_table(frame) -> html.Table:
    header = [
        "model",
        "requests",
        "ISL p50",
        "ISL p99",
        "OSL p50",
        "OSL p99",
        "TTFT p50 ms",
        "TTFT p99 ms",
        "not ok",
    ]
    rows = [
        html.Tr(
            [
                html.Td(r.model),
                html.Td(_fmt(r.requests)),
                html.Td(_fmt(r.isl_p50)),
                html.Td(_fmt(r.isl_p99)),
                html.Td(_fmt(r.osl_p50)),
                html.Td(_fmt(r.osl_p99)),
                html.Td(_fmt(r.ttft_p50_ms)),
                html.Td(_fmt(r.ttft_p99_ms)),
                html.Td(f"{r.error_share:.2%}"),
            ]
        )
        for r in frame.head(MODEL_ROWS).itertuples()
    ]
    rest = frame.iloc[MODEL_ROWS:]
    caption = []
    if len(rest):
        n = int(rest["requests"].sum())
        not_ok = float((rest["error_share"] * rest["requests"]).sum()) / n if n else 0.0
        rows.append(
            html.Tr(
                [
                    html.Td(f"other ({len(rest):,} models)"),
                    html.Td(_fmt(n)),
                    *[html.Td("—") for _ in range(6)],  # quantiles do not add up across models
                    html.Td(f"{not_ok:.2%}"),
                ],
                className="other-row",
            )
        )
        caption = [
            html.Caption(
                f"The {MODEL_ROWS} busiest of {len(frame):,} models; the other "
                f"{len(rest):,} are one row (filter by model to see one)."
            )
        ]
    return html.Table(
        [*caption, html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(rows)],
        id=ids.OVERVIEW_TABLE,
        className="grid",
    )


def _card(title: str, body: list) -> html.Div:
    return html.Div([html.H3(title), *body], className="card")


def _graph(graph_id: str, figure: dict) -> dcc.Graph:
    return dcc.Graph(id=graph_id, figure=figure, config=GRAPH_CONFIG)


def _latency_lines(lat: glance_service.Latency, measure: str) -> tuple[pd.DataFrame, bool]:
    """One line per engine at its SLO percentile with its target; the fleet's p95 and the
    fleet's target when the window names no engine. Also whether any target is drawn."""
    parts = []
    for e in lat.engines:
        target = getattr(e.slo, measure) if e.slo is not None else None
        parts.append(charts.latency_frame(e.engine, e.series, measure, target, e.percentile))
    if lat.fleet_p95 is not None:
        s = lat.fleet_slo
        target = getattr(s, measure) if s is not None else None
        parts.append(charts.latency_frame("all requests", lat.fleet_p95, measure, target, 95.0))
    if not parts:
        return pd.DataFrame(columns=list(charts.LATENCY_COLUMNS)), False
    lines = pd.concat(parts, ignore_index=True)
    return lines, bool(lines["target"].notna().any())


def _latency_note(lat: glance_service.Latency, any_target: bool) -> str:
    who = (
        "One line per engine (the busiest first) at its SLO's percentile, its target dashed in "
        "the same colour (click a legend entry to hide an engine)"
        if lat.engines
        else "All requests (none names an engine) at p95, the fleet's target dashed"
    )
    note = f"{who}; per {lat.bucket} bucket."
    if lat.relative_error:
        note += f" From hourly rollups: each quantile within ±{lat.relative_error:.2%}."
    if not any_target:
        note += " " + HOW_TO_SET
    return note


def latency_outputs(
    db: Database, query: dict, now: datetime, tz: str, fleet: Fleet
) -> tuple[dict, dict, str]:
    """The TTFT and ITL charts against the SLO lines for a URL query, and their note."""
    view = filterbar.parse_query(query, now, tz)  # drawn in the zone the page shows
    lat = glance_service.latency(db, view.filter(), fleet, tz=view.tz)
    ttft, ttft_target = _latency_lines(lat, "ttft_ms")
    itl, itl_target = _latency_lines(lat, "itl_ms")
    return (
        charts.latency_slo_figure(ttft, "TTFT"),
        charts.latency_slo_figure(itl, "ITL"),
        _latency_note(lat, ttft_target or itl_target),
    )


LATENCY_WAIT = "Computing each engine's TTFT and ITL at its SLO percentile…"
_NO_LINES = pd.DataFrame(columns=list(charts.LATENCY_COLUMNS))


def _charts(
    g: glance_service.Glance, query: dict, raw_note: str | None = None, tz: str = "UTC"
) -> html.Div:
    target = g.goodput_target()
    if len(g.goodput):
        not_measured = float(g.goodput["not_measured"].sum())
        goodput = [
            _graph(ids.OVERVIEW_GOODPUT, charts.goodput_figure(g.goodput, target)),
            html.P(
                f"Share of requests per {g.bucket} bucket ({tz}) that met every target of their "
                f"engine (the fleet's for the rest); dashed: the target. {not_measured:,.0f} "
                "not measured (a targeted value missing) are left out. Exact, from raw rows.",
                className="muted",
            ),
            *(
                [html.P(raw_note, className="muted", id=ids.OVERVIEW_GOODPUT_RAW_ONLY)]
                if raw_note
                else []
            ),
        ]
    else:
        goodput = [html.P(HOW_TO_SET, className="muted", id=ids.OVERVIEW_GOODPUT_NONE)]
    return html.Div(
        [
            _card(
                "Requests/s",
                [
                    _graph(ids.OVERVIEW_RATE, charts.rate_figure(g.rates)),
                    html.P(
                        f"Mean requests per second in each {g.bucket} bucket ({tz}; a sampled "
                        "row counts 1/sample_rate requests).",
                        className="muted",
                    ),
                ],
            ),
            _card(
                "Fleet p95 latency: TTFT, ITL and total",
                [
                    _graph(ids.OVERVIEW_FLEET_LATENCY, charts.fleet_latency_figure(g.fleet_p95)),
                    html.P(
                        f"Every request of the window pooled, per {g.bucket} bucket ({tz}): time "
                        "to first token, inter-token latency and the whole request (E2E), on one "
                        "log axis. Each engine against its own SLO: the two charts below."
                        + (
                            f" From hourly rollups: each quantile within ±{rel:.2%}."
                            if (rel := g.fleet_p95.attrs.get("relative_error"))
                            else ""
                        ),
                        className="muted",
                    ),
                ],
            ),
            _card("Goodput", goodput),
            # One query per engine: drawn by the latency callback after the page.
            _card(
                "TTFT against the SLO",
                [
                    dcc.Store(id=ids.OVERVIEW_LATENCY_QUERY, data=dict(query)),
                    _graph(ids.OVERVIEW_TTFT, charts.latency_slo_figure(_NO_LINES, "TTFT")),
                ],
            ),
            _card(
                "ITL against the SLO",
                [
                    _graph(ids.OVERVIEW_ITL, charts.latency_slo_figure(_NO_LINES, "ITL")),
                    html.P(LATENCY_WAIT, className="muted", id=ids.OVERVIEW_LATENCY_NOTE),
                ],
            ),
            _money_card(),
        ],
        className="two-col",
        id=ids.OVERVIEW_CHARTS,
    )


MONEY_WAIT = (
    "Computing each engine's plans with the performance model (a few seconds per engine the "
    "first time, then cached for 5 minutes)…"
)
_NO_MONEY = pd.DataFrame(columns=list(glance_service.MONEY_COLUMNS))


def _money_card() -> html.Div:
    return html.Div(
        [
            html.H3("GPU-hours and money: now vs the best plan"),
            # Drawn by the money callback after the page: the plans run the performance model.
            dcc.Store(id=ids.OVERVIEW_MONEY_QUERY, data={"weeks": 4}),
            _graph(ids.OVERVIEW_MONEY, charts.money_figure(_NO_MONEY, "GPU-hours/month")),
            html.P(MONEY_WAIT, className="muted", id=ids.OVERVIEW_MONEY_NOTE),
        ],
        className="card",
    )


def money_outputs(
    db: Database, now: datetime, tz: str, fleet: Fleet, weeks: int = 4
) -> tuple[dict, str | list, str, str]:
    """The money chart, its note, and the headline KPI's value and note."""
    with glance_service.PLANS_LOCK:  # the cards' callback asks for the same plans
        m = glance_service.money(db, now=now, tz=tz, fleet=fleet, weeks=weeks)
        statuses = fleet_statuses(db, now=now, tz=tz, fleet=fleet)
    if m.frame.empty and not m.left_out:
        return (
            charts.money_figure(m.frame, m.unit),
            "No engine profile yet: add one on the Rightsizing page to see its plans in "
            "GPU-hours and, with a cost per GPU-hour, in money.",
            "–",
            "no engine profile",
        )
    figure = charts.money_figure(m.frame, m.unit, m.currency)
    words = (
        f"Per engine: today's GPU-hours{' and cost' if m.currency else ''} a month against the "
        f"plan with the fewest GPU-hours that holds the traffic within its SLO, from the last "
        f"{weeks} whole weeks (whatever the window above). "
        + (
            ""
            if m.currency
            else "In GPU-hours: set cost_per_gpu_hour on every engine (or "
            "TOKENSHAPE_COST_PER_GPU_HOUR) to see money. "
        )
    )
    # Each engine's status in the one vocabulary (as the Rightsizing fleet table and the email
    # say it), with the money verdict of its plans.
    verdicts = dict(zip(m.frame["engine"], m.frame["verdict"], strict=True))
    items = []
    for name, state in statuses:
        items.append(
            html.Li(
                [
                    html.Strong(name),
                    ": ",
                    status_badge(state),
                    f" — {state.reason}. ",
                    verdicts.get(name, ""),
                ],
                className="overview-status",
            )
        )
    note: list = [
        words,
        "Status over the last 7 days (as on the Rightsizing page):",
        html.Ul(items),
    ]
    if m.left_out:
        note.append("Left out: " + "; ".join(m.left_out))
    if m.saves is None:
        value = "–"
    elif m.currency:
        value = money(max(m.saves, 0.0), m.currency)
    else:
        value = f"{max(m.saves, 0.0):,.0f} GPU-h"
    before = m.frame["now"].sum()
    after = m.frame["best"].sum()
    if m.currency:
        kpi_note = f"{money(before, m.currency)} → {money(after, m.currency)} a month"
    else:
        kpi_note = f"{before:,.0f} → {after:,.0f} GPU-hours a month"
    return figure, note, value, kpi_note


# -- above the fold: the drift findings and one card per engine --------------------------------

# The drift block stays short so the engine cards' first row is on screen at 1366×768: the
# most severe findings, then how many more there are.
DRIFT_SHOWN = 3
SEVERITY = {"critical": 0, "warning": 1}
CARDS_WAIT = "computing its status…"


def rightsizing_query(view: filterbar.View, now: datetime, first: datetime | None) -> dict:
    """The Rightsizing page's query for this view: its window when the page has the same one
    (24h, 7d, 30d), else the view's bounds as start and end (the last hour, all time, custom)."""
    if view.window in RIGHTSIZING_WINDOWS:
        return {"window": view.window}
    end = view.end or now.replace(second=0, microsecond=0)
    if view.window == "1h":
        start: datetime = end - timedelta(hours=1)
    else:
        start = view.start or first or end - timedelta(days=7)
    if start >= end:  # an open-ended window that starts after the last request
        start = end - timedelta(hours=1)
    return {"start": start.isoformat(), "end": end.isoformat()}


def rightsizing_window(query: dict, now: datetime) -> tuple[datetime, datetime]:
    """The window the Rightsizing page sizes over for `rightsizing_query`'s answer, read as that
    page reads its URL (a preset up to the minute; exact start and end otherwise), so a card's
    status is the one its link shows."""
    window = query.get("window")
    if isinstance(window, str) and window in RIGHTSIZING_WINDOWS:
        return window_to(now, RIGHTSIZING_WINDOWS[window])
    given = filterbar.parse_query(
        {"window": "custom", "start": query.get("start"), "end": query.get("end")}, now
    )
    if given.start and given.end:
        return given.start, given.end
    return window_to(now)  # the page's default: the last 7 days


def _rightsizing_href(query: dict, engine: str | None = None) -> str:
    return "/rightsizing?" + urlencode({**({"engine": engine} if engine else {}), **query})


def _drift(db: Database, now: datetime) -> list:
    """The drift of the last 7 days, the most severe first and at most DRIFT_SHOWN of them
    (the rest counted, with where to read them); nothing without a profile."""
    per_engine = engine_findings(db, now)
    if not per_engine:
        return []
    found: list[Finding] = [f for engine in per_engine for f in engine]
    acted = sorted((f for f in found if f.severity in SEVERITY), key=lambda f: SEVERITY[f.severity])
    rest = [f for f in found if f.severity not in SEVERITY]
    # drift_panel shows the critical and warning findings it is given and counts the others.
    parts: list = [drift_panel([*acted[:DRIFT_SHOWN], *rest], title="Drift of the last 7 days")]
    if len(acted) > DRIFT_SHOWN:
        more = len(acted) - DRIFT_SHOWN
        parts.append(
            html.P(
                [
                    f"and {more} more finding{'s' if more != 1 else ''}: see each engine's ",
                    dcc.Link("Rightsizing page", href="/rightsizing"),
                    " or GET /api/drift.",
                ],
                className="muted overview-drift-more",
                id=ids.OVERVIEW_DRIFT_MORE,
            )
        )
    if drift := drift_note(db, None, now, now):
        parts.append(html.P(f"Drift: {drift}", className="muted", id=ids.OVERVIEW_DRIFT_RAW_ONLY))
    return parts


def _goodput_line(card: glance_service.EngineCard) -> list:
    """'goodput 97.1% (target 95%: met)', coloured by whether the SLO holds."""
    if card.goodput is None:
        return [
            html.Span("goodput ", className="muted"),
            "no SLO set" if card.slo is None else "none judged",
        ]
    met = card.target is None or card.goodput >= card.target - 1e-12
    verdict = (
        "" if card.target is None else f" (target {card.target:.0%}: {'met' if met else 'missed'})"
    )
    return [
        html.Span("goodput ", className="muted"),
        html.Strong(f"{card.goodput:.1%}"),
        html.Span(verdict, className="ov-good" if met else "ov-bad"),
    ]


def _rate_line(card: glance_service.EngineCard, seconds: float | None, bucket: str) -> list:
    """The requests/s sparkline over the window and the window's mean rate."""
    rate = card.requests / seconds if seconds else None
    values = card.rates["requests_per_s"] if len(card.rates) else []
    src = charts.sparkline_svg(values)
    peak = max((float(v) for v in values), default=0.0)
    if not src or not card.requests:
        return [html.Div("no requests in the window", className="ov-spark muted")]
    alt = f"requests/s per {bucket} bucket, peak {peak:,.3g}"
    return [html.Img(src=src, alt=alt, className="ov-spark"), html.Span(rate_words(rate))]


def rate_words(rate: float | None) -> str:
    """'14.9 req/s', '1,234 req/s'; a quiet engine per hour ('1.44 req/h') rather than 0.000."""
    if rate is None or rate != rate:
        return "–"
    if rate >= 100:
        return f"{rate:,.0f} req/s"
    if rate >= 0.01 or rate == 0:
        return f"{rate:.3g} req/s"
    return f"{rate * 3600:.3g} req/h"


def _slot(kind: str, k: int, children, className: str) -> html.Div:  # type: ignore[no-untyped-def]
    return html.Div(children, id={"type": kind, "index": k}, className=className)


def _engine_card(k: int, engine: str, link: dict) -> html.Div:
    """An engine's card as the page paints it: its name and link at once; its requests/s and
    goodput from the quick callback, its status and money from the plans callback."""
    return html.Div(
        [
            html.Div(
                [
                    dcc.Link(
                        engine,
                        href=_rightsizing_href(link, engine),
                        className="ov-card-name",
                        title=f"{engine} on the Rightsizing page, over this window",
                        id={"type": ids.OVERVIEW_CARD_LINK, "index": k},
                    ),
                    html.Span(
                        "…",
                        className="ov-card-status",
                        id={"type": ids.OVERVIEW_CARD_STATUS, "index": k},
                    ),
                ],
                className="ov-card-head",
            ),
            _slot(ids.OVERVIEW_CARD_REASON, k, CARDS_WAIT, "ov-card-reason muted"),
            _slot(ids.OVERVIEW_CARD_RATE, k, html.Div(className="ov-spark"), "ov-card-rate"),
            _slot(
                ids.OVERVIEW_CARD_GOODPUT, k, html.Span("goodput …", className="muted"), "ov-fact"
            ),
            html.Div(
                [
                    html.Span("…", id={"type": ids.OVERVIEW_CARD_MONEY, "index": k}),
                    html.Span(" a month (now → best)", className="muted"),
                ],
                className="ov-fact",
                title="now: today's plan; best: the plan with the fewest GPU-hours that holds "
                f"the traffic within the SLO, from the last {glance_service.MONEY_WEEKS} whole "
                "weeks (as on the Rightsizing page)",
            ),
        ],
        className="ov-card",
        id={"type": ids.OVERVIEW_CARD, "index": k},
    )


def _engine_cards(
    db: Database, view: filterbar.View, flt, now: datetime, first: datetime | None, query: dict
) -> html.Div:
    """One card per engine (at most CARDS_LIMIT), and how many more there are; the cards'
    numbers come from two callbacks (the traffic at once, the plans when the performance
    model has run), so the page paints as fast as without them."""
    names, more = glance_service.card_engines(db, flt)
    if not names:
        return html.Div(
            html.P(
                "No engine yet: requests that name an engine (or an engine profile on the "
                "Rightsizing page) get a card here.",
                className="muted",
            ),
            id=ids.OVERVIEW_CARDS,
        )
    link = rightsizing_query(view, now, first)
    clean = {k: v for k, v in query.items() if isinstance(v, str)}
    parts: list = [
        html.Div(
            [_engine_card(k, name, link) for k, name in enumerate(names)], className="ov-cards"
        ),
        dcc.Store(
            id=ids.OVERVIEW_CARDS_QUERY,
            data={"query": clean, "rightsizing": link, "engines": names},
        ),
    ]
    if more:
        parts.append(
            html.P(
                dcc.Link(f"and {more} more — see Rightsizing", href=_rightsizing_href(link)),
                id=ids.OVERVIEW_CARDS_MORE,
            )
        )
    return html.Div(parts, id=ids.OVERVIEW_CARDS)


def _card_slots(data: CardsData | None) -> CardsData:
    """The cards' store, once it names one engine per card the page asks to fill (a request
    naming more or fewer is refused: the answer must fill every card, and only those)."""
    data = data or {"query": {}, "engines": []}
    cards = len(dash.ctx.outputs_list[0]) if dash.ctx.outputs_list else 0
    if len(data["engines"]) != cards:
        raise edge.refuse(
            422,
            f"input {ids.OVERVIEW_CARDS_QUERY}.data names {len(data['engines'])} engines for "
            f"{cards} cards: reload the page",
        )
    return data


def _asked(data: dict) -> list[str]:
    """The store's engines, in card order; names this database does not know are kept (their
    slots must be answered) but never sized."""
    return [n for n in data.get("engines") or [] if isinstance(n, str)]


def _known(db: Database) -> set[str]:
    return set(stored_profiles(db)) | set(filterbar.choices(db).get("engine", []))


def traffic_outputs(
    db: Database, data: dict, now: datetime, tz: str, fleet: Fleet
) -> tuple[list, list]:
    """Each card's requests/s line and goodput line for the cards' store (the page's query and
    the engines in card order)."""
    names = _asked(data)
    query = {k: v for k, v in (data.get("query") or {}).items() if isinstance(v, str)}
    # The query is the client's: parsed and validated exactly as the page's URL is.
    view = filterbar.parse_query(query, now, tz)
    flt = view.filter()
    known = _known(db)
    asked = [n for n in names if n in known]
    cards = glance_service.engine_cards(db, flt, asked, fleet, tz=view.tz)
    by_name = {c.engine: c for c in cards.cards}
    seconds = _seconds(db.cursor(), view, now)
    rates: list = []
    goods: list = []
    for name in names:
        card = by_name.get(name)
        if card is None:
            rates.append(html.Div("not an engine of this database", className="ov-spark muted"))
            goods.append("–")
            continue
        rates.append(_rate_line(card, seconds, cards.bucket))
        goods.append(_goodput_line(card))
    return rates, goods


def _money_words(m: EngineMoney | None) -> tuple[str, str]:
    """A card's money as the Rightsizing fleet table writes it, and what the title says."""
    if m is None:
        return "–", "no profile: no plans"
    if m.baseline is None or m.best is None:
        return "–", m.error or m.verdict
    if m.baseline.cost_month is not None and m.best.cost_month is not None:
        return (
            f"{money(m.baseline.cost_month, m.currency)} → {money(m.best.cost_month, m.currency)}",
            f"best: {m.best.label}",
        )
    return (
        f"{m.baseline.gpu_hours_month:,.0f} → {m.best.gpu_hours_month:,.0f} GPU-h",
        f"best: {m.best.label}",
    )


def cards_outputs(
    db: Database, data: dict, now: datetime, tz: str, fleet: Fleet
) -> tuple[list, list, list, list]:
    """Each card's status badge, reason, money and border colour for the cards' store (the
    engines in card order and the Rightsizing window their links open)."""
    names = _asked(data)
    query = {k: v for k, v in (data.get("rightsizing") or {}).items() if isinstance(v, str)}
    start, end = rightsizing_window(query, now)
    # The names are the client's: only engines this database knows are sized.
    known = _known(db)
    asked = [n for n in names if n in known]
    plans = {
        p.engine: p
        for p in glance_service.card_plans(
            db, asked, start=start, end=end, now=now, tz=tz, fleet=fleet
        )
    }
    badges, reasons, moneys, styles = [], [], [], []
    for name in names:
        plan = plans.get(name)
        state: Status = (
            plan.status
            if plan
            else failed_status(f"{name[:60]!r} is not an engine of this database")
        )
        text, title = _money_words(plan.money if plan else None)
        badges.append(status_badge(state))
        reasons.append(html.Span(state.reason, title=state.reason))
        moneys.append(html.Span(text, title=title))
        styles.append({"borderLeftColor": state.colour})
    return badges, reasons, moneys, styles


def layout_for(
    db: Database, query: dict, now: datetime, tz: str = "UTC", fleet: Fleet = Fleet()
) -> html.Div:
    """The page for a URL query."""
    cur = db.cursor()
    info = overview.span(cur)
    if info["requests"] == 0:
        return html.Div(
            [
                html.H2("No traffic yet"),
                html.P(
                    "Ship a first record: see the README's “Ship a first log line”, or run "
                    "`tokenshape demo` for synthetic traffic."
                ),
                html.Pre(filterbar.CURL, className="code"),
            ],
            id=ids.OVERVIEW_EMPTY,
            className="empty",
        )
    view, flt, bar = filterbar.prepare(db, query, now, tz=tz)
    tz = view.tz  # the zone the page shows its times in (the URL's, else the server's)
    frame = overview.per_model(cur, flt, exact=False)
    # Above the fold at 1366×768: what to act on this morning, then every engine's card.
    parts = [
        html.H2("Overview"),
        bar,
        html.Div(
            [*_drift(db, now), _engine_cards(db, view, flt, now, info["first"], query)],
            className="overview-today",
            id=ids.OVERVIEW_TODAY,
        ),
    ]
    if frame.empty:
        parts.append(filterbar.empty_state(view, ids.OVERVIEW_WINDOW_EMPTY))
    else:
        g = glance_service.glance(db, flt, fleet, tz=tz)
        parts += [
            _kpi_cards(cur, view, now, g, frame.attrs["relative_error"]),
            _charts(g, query, raw_only_note(cur, flt, now, reader="goodput reads"), tz),
            html.H3("Per model"),
            _model_table(frame),
        ]
    parts.append(
        html.P(
            f"Stored: {info['requests']:,} requests from {info['first']:%Y-%m-%d %H:%M} to "
            f"{info['last']:%Y-%m-%d %H:%M} UTC, from {info['gateways']} gateways.",
            className="muted",
        )
    )
    if info["azure_rows"]:
        parts.append(
            html.P(
                "Includes the Azure LLM inference trace 2023 (CC-BY 4.0): Patel et al., "
                "“Splitwise: Efficient generative LLM inference using phase splitting”, ISCA 2024.",
                id=ids.ATTRIBUTION,
                className="muted",
            )
        )
    return html.Div(parts, className="overview-page")


def register(
    app: Dash, db: Database, clock: Callable[[], datetime], tz: str, fleet: Fleet = Fleet()
) -> None:
    """Register the page at / (its layout follows the URL's query) and the callbacks that fill
    the engine cards' status and money, the TTFT/ITL lines and the money chart after it;
    `fleet` holds the settings' default SLO and cost."""
    register_page(
        __name__, "/", "Overview", 0, lambda **query: layout_for(db, query, clock(), tz, fleet)
    )

    @app.callback(
        Output(ids.OVERVIEW_TTFT, "figure"),
        Output(ids.OVERVIEW_ITL, "figure"),
        Output(ids.OVERVIEW_LATENCY_NOTE, "children"),
        Input(ids.OVERVIEW_LATENCY_QUERY, "data"),
    )
    async def _latency(query: Query | None):  # type: ignore[no-untyped-def]
        # The query is the client's: parsed and validated exactly as the page's URL is.
        clean = {k: v for k, v in (query or {}).items() if isinstance(v, str)}
        return await asyncio.to_thread(latency_outputs, db, clean, clock(), tz, fleet)

    @app.callback(
        Output({"type": ids.OVERVIEW_CARD_RATE, "index": ALL}, "children"),
        Output({"type": ids.OVERVIEW_CARD_GOODPUT, "index": ALL}, "children"),
        Input(ids.OVERVIEW_CARDS_QUERY, "data"),
    )
    async def _cards_traffic(data: CardsData | None):  # type: ignore[no-untyped-def]
        data = _card_slots(data)
        try:
            return await asyncio.to_thread(traffic_outputs, db, dict(data), clock(), tz, fleet)
        except Exception as exc:  # say so in every card rather than leave it waiting
            log.exception("overview: the engine cards' traffic failed")
            n = len(data["engines"])
            return [f"the traffic could not be read: {exc}"] * n, ["–"] * n

    @app.callback(
        Output({"type": ids.OVERVIEW_CARD_STATUS, "index": ALL}, "children"),
        Output({"type": ids.OVERVIEW_CARD_REASON, "index": ALL}, "children"),
        Output({"type": ids.OVERVIEW_CARD_MONEY, "index": ALL}, "children"),
        Output({"type": ids.OVERVIEW_CARD, "index": ALL}, "style"),
        Input(ids.OVERVIEW_CARDS_QUERY, "data"),
    )
    async def _cards(data: CardsData | None):  # type: ignore[no-untyped-def]
        data = _card_slots(data)
        try:
            return await asyncio.to_thread(cards_outputs, db, dict(data), clock(), tz, fleet)
        except Exception as exc:  # a broken plan must not leave the cards waiting forever
            log.exception("overview: the engine cards failed")
            n = len(data["engines"])
            state = failed_status(f"the status could not be computed: {exc}")
            return [status_badge(state)] * n, [state.reason] * n, ["–"] * n, [{}] * n

    @app.callback(
        Output(ids.OVERVIEW_MONEY, "figure"),
        Output(ids.OVERVIEW_MONEY_NOTE, "children"),
        Output(ids.OVERVIEW_SAVES, "children"),
        Output(ids.OVERVIEW_SAVES_NOTE, "children"),
        Input(ids.OVERVIEW_MONEY_QUERY, "data"),
    )
    async def _money(data: MoneyWeeks | None):  # type: ignore[no-untyped-def]
        # Only the number of weeks comes from the client, and only as a small whole number.
        weeks = data["weeks"] if data and 1 <= data["weeks"] <= 8 else 4
        try:
            return await asyncio.to_thread(money_outputs, db, clock(), tz, fleet, weeks)
        except Exception as exc:  # a broken plan must not leave the card waiting forever
            log.exception("overview: the money chart failed")
            return (
                charts.money_figure(_NO_MONEY, "GPU-hours/month"),
                f"The plans could not be computed: {exc}",
                "–",
                "plans unavailable",
            )
