"""Overview page: what is stored, per model, at a glance."""

from __future__ import annotations

import dash
from dash import html

from app.analytics import overview
from app.dashboard import ids
from app.dashboard.pages import safe
from app.storage.database import Database


def _fmt(value: float | int | None, digits: int = 0) -> str:
    if value is None or value != value:  # None or NaN
        return "–"
    return f"{value:,.{digits}f}"


def _kpi(label: str, value: str) -> html.Div:
    return html.Div(
        [html.Div(value, className="kpi-value"), html.Div(label, className="kpi-label")],
        className="kpi",
    )


def layout_for(db: Database) -> html.Div:
    """The page for the database's current contents."""
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
            ],
            id=ids.OVERVIEW_EMPTY,
            className="empty",
        )
    frame = overview.per_model(cur)
    kpis = html.Div(
        [
            _kpi("requests", _fmt(info["requests"])),
            _kpi("input tokens", _fmt(info["input_tokens"])),
            _kpi("output tokens", _fmt(info["output_tokens"])),
            _kpi("models", _fmt(len(frame))),
            _kpi("gateways", _fmt(info["gateways"])),
        ],
        id=ids.OVERVIEW_KPIS,
        className="kpis",
    )
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
    table = html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in header])), html.Tbody(rows)],
        id=ids.OVERVIEW_TABLE,
        className="grid",
    )
    span = html.P(
        f"Traffic from {info['first']:%Y-%m-%d %H:%M} to {info['last']:%Y-%m-%d %H:%M} UTC.",
        className="muted",
    )
    parts = [html.H2("Overview"), span, kpis, html.H3("Per model"), table]
    if info["azure_rows"]:
        parts.append(
            html.P(
                "Includes the Azure LLM inference trace 2023 (CC-BY 4.0): Patel et al., "
                "“Splitwise: Efficient generative LLM inference using phase splitting”, "
                "ISCA 2024.",
                id=ids.ATTRIBUTION,
                className="muted",
            )
        )
    return html.Div(parts)


def register(db: Database) -> None:
    """Register the page at / with a layout read fresh on every visit."""
    dash.register_page(
        __name__,
        path="/",
        order=0,
        name="Overview",
        title="tokenshape · Overview",
        layout=safe("Overview", lambda **_query: layout_for(db)),
    )
