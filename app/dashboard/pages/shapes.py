"""Shapes page: the ISL x OSL heat map, quantiles and the four shapes for the chosen window."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import dash
from dash import dcc, html

from app.analytics import shapes
from app.dashboard import filterbar, ids
from app.dashboard.figures import heatmap_figure
from app.dashboard.pages import safe
from app.storage.database import Database

SHAPE_LABELS = {
    "long_in_short_out": "long in / short out (RAG, extraction)",
    "long_in_long_out": "long in / long out (summarisation)",
    "short_in_long_out": "short in / long out (chat, generation)",
    "short_in_short_out": "short in / short out (classification)",
}


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def layout_for(db: Database, query: dict, now: datetime) -> html.Div:
    """The page for a URL query."""
    cur = db.cursor()
    view, flt, bar = filterbar.prepare(cur, query, now)
    hm = shapes.heatmap(cur, flt)
    if hm.total == 0:
        return html.Div([html.H2("Shapes"), bar, filterbar.empty_state(view, ids.SHAPES_EMPTY)])
    q = shapes.quantiles(cur, flt)
    four = shapes.four_shapes(cur, flt)
    quantile_rows = [
        html.Tr(
            [html.Td(label)]
            + [html.Td(_num(q[m][k])) for k in ("p50", "p90", "p99", "p99.9", "max")]
        )
        for m, label in (
            ("isl", "input tokens (ISL)"),
            ("osl", "output tokens (OSL)"),
            ("ttft_ms", "TTFT (ms)"),
            ("itl_ms", "ITL (ms)"),
            ("e2e_ms", "E2E (ms)"),
        )
    ]
    four_rows = [
        html.Tr([html.Td(SHAPE_LABELS[k]), html.Td(f"{v:,}"), html.Td(f"{v / hm.total:.1%}")])
        for k, v in four.items()
    ]
    return html.Div(
        [
            html.H2("Shapes"),
            bar,
            html.P(
                [html.Span(f"{hm.total:,}", id=ids.SHAPES_TOTAL), " requests in the window"],
                className="muted",
            ),
            html.Div(
                dcc.Graph(
                    id=ids.SHAPES_HEATMAP, figure=heatmap_figure(hm), config={"displaylogo": False}
                ),
                className="card",
            ),
            html.Div(
                [
                    html.Div(
                        [
                            html.H3("Quantiles"),
                            html.Table(
                                [
                                    html.Thead(
                                        html.Tr(
                                            [
                                                html.Th(h)
                                                for h in ("", "p50", "p90", "p99", "p99.9", "max")
                                            ]
                                        )
                                    ),
                                    html.Tbody(quantile_rows),
                                ],
                                className="grid",
                                id=ids.SHAPES_QUANTILES,
                            ),
                        ]
                    ),
                    html.Div(
                        [
                            html.H3("Four shapes (ISL ≥ 1k is long, OSL ≥ 256 is long)"),
                            html.Table(
                                [
                                    html.Thead(
                                        html.Tr(
                                            [html.Th(h) for h in ("shape", "requests", "share")]
                                        )
                                    ),
                                    html.Tbody(four_rows),
                                ],
                                className="grid",
                                id=ids.SHAPES_FOUR,
                            ),
                        ]
                    ),
                ],
                className="two-col",
            ),
        ]
    )


def register(db: Database, clock: Callable[[], datetime]) -> None:
    """Register the page at /shapes; its layout follows the URL's query."""
    dash.register_page(
        __name__,
        path="/shapes",
        name="Shapes",
        title="tokenshape · Shapes",
        order=1,
        layout=safe("Shapes", lambda **query: layout_for(db, query, clock())),
    )
