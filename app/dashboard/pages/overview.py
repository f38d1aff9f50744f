"""Overview page: the window's KPIs against the window before, and the traffic per model."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import cast

from dash import html

from app.analytics import overview
from app.analytics.filters import Filter
from app.dashboard import filterbar, ids
from app.dashboard.findings import drift_panel
from app.dashboard.pages import register_page
from app.services.rightsizing import engine_findings
from app.storage.database import Database


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


def _kpi(label: str, value: str, delta: html.Div | None = None) -> html.Div:
    parts = [html.Div(value, className="kpi-value"), html.Div(label, className="kpi-label")]
    if delta is not None:
        parts.append(delta)
    return html.Div(parts, className="kpi")


def _previous(view: filterbar.View, now: datetime) -> Filter | None:
    """The window of the same length just before this one (none for 'all time')."""
    if view.start is None:
        return None
    end = view.end or now
    return replace(view.filter(), start=view.start - (end - view.start), end=view.start)


def _kpi_cards(cur, view: filterbar.View, now: datetime, table_error: float = 0.0) -> html.Div:
    # Long windows read the hourly rollups (latency quantiles within ±0.99%, said below).
    k = overview.kpis(cur, view.filter(), exact=False)
    prev_filter = _previous(view, now)
    p = overview.kpis(cur, prev_filter, exact=False) if prev_filter else {}
    seconds = ((view.end or now) - view.start).total_seconds() if view.start else None
    # kpis() always sets "requests" and "relative_error" to numbers.
    rate = cast(float, k["requests"]) / seconds if seconds else None
    prev_rate = (p.get("requests") or 0) / seconds if seconds and p else None

    def card(
        label: str, key: str, unit: str = "", lower_is_better: bool = False, digits: int = 0
    ) -> html.Div:
        value = k[key]
        text = "–" if value is None else f"{value:,.{digits}f}{unit}"
        return _kpi(label, text, _delta(value, p.get(key), lower_is_better) if p else None)

    cards = [
        card("requests", "requests"),
        _kpi(
            "requests/s",
            _fmt(rate, 3) if rate is not None else "–",
            _delta(rate, prev_rate, False) if p else None,
        ),
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
            cards.append(card(f"{label} {q} (ms)", f"{m}_{q}", lower_is_better=True))
    return html.Div(
        # One note for the cards and the per-model table: the larger of their errors.
        [
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
        for r in frame.itertuples()
    ]
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(rows)],
        id=ids.OVERVIEW_TABLE,
        className="grid",
    )


def layout_for(db: Database, query: dict, now: datetime) -> html.Div:
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
    view, flt, bar = filterbar.prepare(db, query, now)
    frame = overview.per_model(cur, flt, exact=False)
    parts = [html.H2("Overview"), bar]
    if frame.empty:
        parts.append(filterbar.empty_state(view, ids.OVERVIEW_WINDOW_EMPTY))
    else:
        parts += [
            _kpi_cards(cur, view, now, frame.attrs["relative_error"]),
            html.H3("Per model"),
            _model_table(frame),
        ]
    found = [f for engine in engine_findings(db, now) for f in engine]
    if found:
        parts.append(drift_panel(found, title="Drift of the last 7 days"))
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
    return html.Div(parts)


def register(db: Database, clock: Callable[[], datetime]) -> None:
    """Register the page at /; its layout follows the URL's query."""
    register_page(__name__, "/", "Overview", 0, lambda **query: layout_for(db, query, clock()))
