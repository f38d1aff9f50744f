"""Shapes page: the ISL x OSL heat map, quantiles and the four shapes for the chosen window.

The heat map comes with the page; the quantile and four-shape tables (exact quantiles over
a short window's rows are the slow part; long windows read hourly rollups) follow in a
callback, so the map is drawn without waiting."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import numpy as np
from dash import Dash, Input, Output, dcc, html

from app.analytics import goodput, rollups, shapes
from app.charts.heatmap import Bounds, heatmap_figure
from app.charts.slo import goodput_heatmap_figure
from app.dashboard import edge, filterbar, ids
from app.dashboard.edge import ShapesView
from app.dashboard.pages import register_page, safe
from app.services import profiles, slo
from app.sizing.slo import Fleet
from app.storage.database import Database

SHAPE_LABELS = {
    "long_in_short_out": "long in / short out (RAG, extraction)",
    "long_in_long_out": "long in / long out (summarisation)",
    "short_in_long_out": "short in / long out (chat, generation)",
    "short_in_short_out": "short in / short out (classification)",
}
SCALES = {"count": "requests", "pct": "% of requests"}
BINS = {"log2": "octaves (log2)", "log2half": "half-octaves"}
LAYERS = {"requests": "requests", "goodput": "goodput (SLO ledger)"}
MISS_LIST = 10  # the ranked list of request shapes that miss
MEASURE_LABELS = (
    ("isl", "input tokens (ISL)"),
    ("osl", "output tokens (OSL)"),
    ("ttft_ms", "TTFT (ms)"),
    ("itl_ms", "ITL (ms)"),
    ("e2e_ms", "E2E (ms)"),
)


def _num(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def _pick(query: dict, name: str, options: dict[str, str]) -> str:
    value = query.get(name)
    return value if value in options else next(iter(options))


def _bounds(db: Database, engine: str | None) -> Bounds | None:
    """The selected engine's current bounds, when exactly one engine with a profile is chosen."""
    if not engine:
        return None
    profile = profiles.stored_profile(db, engine)
    if not profile:
        return None
    max_in, max_seq = profile.get("max_input_len"), profile.get("max_seq_len")
    if not (max_in or max_seq):
        return None
    return Bounds(engine, int(max_in) if max_in else None, int(max_seq) if max_seq else None)


def _table(head: tuple[str, ...], rows: list[html.Tr], table_id: str) -> html.Table:
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)],
        className="grid",
        id=table_id,
    )


def tables_for(db: Database, query: dict, now: datetime) -> list[html.Div]:
    """The quantile table and the four-shape breakdown for the same view as the heat map."""
    cur = db.cursor()
    flt = filterbar.parse_query(query, now).filter()
    q = shapes.quantiles(cur, flt)
    four = shapes.four_shapes(cur, flt)
    total = sum(four.values()) or 1
    quantile_rows = [
        html.Tr(
            [html.Td(label)]
            + [html.Td(_num(q[m][k])) for k in ("p50", "p90", "p99", "p99.9", "max")]
        )
        for m, label in MEASURE_LABELS
    ]
    four_rows = [
        html.Tr([html.Td(SHAPE_LABELS[k]), html.Td(f"{v:,}"), html.Td(f"{v / total:.1%}")])
        for k, v in four.items()
    ]
    return [
        html.Div(
            [
                html.H3("Quantiles"),
                _table(
                    ("", "p50", "p90", "p99", "p99.9", "max"), quantile_rows, ids.SHAPES_QUANTILES
                ),
                html.P(
                    f"Quantiles from hourly rollups: each within ±{q.relative_error:.2%} "
                    "(maxima exact). Add exact=true to /api/quantiles for exact values."
                    if q.relative_error
                    else "Exact quantiles (DuckDB quantile_cont over the window's rows).",
                    className="muted",
                    id=ids.SHAPES_QUANTILES_NOTE,
                ),
            ]
        ),
        html.Div(
            [
                html.H3("Four shapes (ISL ≥ 1k is long, OSL ≥ 256 is long)"),
                _table(("shape", "requests", "share"), four_rows, ids.SHAPES_FOUR),
            ]
        ),
    ]


def slo_layer(db: Database, flt, bins: str, fleet: Fleet) -> list:
    """The SLO ledger over the heat map: cells coloured by goodput, and the shapes that miss;
    how to set a target when none is set."""
    rep = slo.report(db, flt, fleet, bins=bins)
    if rep is None:
        return [
            html.Div(
                [html.H3("No latency target is set"), html.P(slo.HOW_TO_SET)],
                id=ids.SHAPES_SLO_NONE,
                className="empty",
            )
        ]
    judged, values = goodput.grid(rep.cells, rep.edges)
    _, unmeasured = goodput.grid(rep.cells, rep.edges, "not_measured")
    target = rep.totals["target"] or _any_target(rep)
    figure = goodput_heatmap_figure(
        rep.edges, judged, values, target, rep.cell_cause(), np.nan_to_num(unmeasured)
    )
    t = rep.totals
    summary = (
        f"{_pct(t['goodput'])} of {t['good'] + t['missed']:,.0f} judged requests met their "
        f"engine's SLO (target {_pct(t['target'])}); {t['not_measured']:,.0f} not measured "
        f"(a targeted value missing), {t['no_slo']:,.0f} without an SLO. Exact, from raw rows."
        + (" Counts estimated from sampled rows." if rep.sampled else "")
        + (f" {rep.raw_only_note}" if rep.raw_only_note else "")
    )
    items = [html.Li(m.words()) for m in rep.misses[:MISS_LIST]]
    return [
        html.P(summary, className="muted", id=ids.SHAPES_SLO_SUMMARY),
        html.Div(
            dcc.Graph(id=ids.SHAPES_SLO_HEATMAP, figure=figure, config={"displaylogo": False}),
            className="card heatmap-card",
        ),
        html.Div(
            [
                html.H3("Request shapes that miss"),
                html.Ol(items, id=ids.SHAPES_SLO_MISSES)
                if items
                else html.P("Every shape meets its SLO.", id=ids.SHAPES_SLO_MISSES),
            ],
            className="card",
        ),
    ]


def ledger_for(db: Database, view: ShapesView, fleet: Fleet) -> list:
    """The SLO layer for the view the page was built with (its query and `now`)."""
    query = {k: v for k, v in view["query"].items() if isinstance(v, str)}
    flt = filterbar.parse_query(query, _when(view)).filter()
    return slo_layer(db, flt, _pick(query, "bins", BINS), fleet)


def _any_target(rep: slo.Report) -> float:
    """The target share when no request was judged: the fleet's, else the first engine's."""
    first = rep.ledger.default or next(iter(rep.ledger.engines.values()))
    return first.quantile


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def layout_for(db: Database, query: dict, now: datetime, fleet: Fleet = Fleet()) -> html.Div:
    """The page for a URL query."""
    cur = db.cursor()
    scale, bins = _pick(query, "scale", SCALES), _pick(query, "bins", BINS)
    layer = _pick(query, "layer", LAYERS)
    extra = [
        filterbar.choice("layer", "colour by", LAYERS, layer),
        filterbar.choice("scale", "show", SCALES, scale),
        filterbar.choice("bins", "bins", BINS, bins),
    ]
    view, flt, bar = filterbar.prepare(db, query, now, extra)
    hm = shapes.heatmap(cur, flt, bins=bins)
    if hm.total == 0:
        return html.Div([html.H2("Shapes"), bar, filterbar.empty_state(view, ids.SHAPES_EMPTY)])
    if layer == "goodput":
        return html.Div(
            [
                html.H2("Shapes"),
                bar,
                html.P(
                    [html.Span(f"{hm.total:,}", id=ids.SHAPES_TOTAL), " requests in the window."],
                    className="muted",
                ),
                # Judging every request and asking the performance model for the causes takes
                # a moment (the model's first answer per engine most of all): drawn by a
                # callback after the page, from the same view.
                dcc.Store(id=ids.SHAPES_VIEW, data={"query": query, "now": now.isoformat()}),
                dcc.Loading(html.Div(id=ids.SHAPES_SLO_LAYER), type="dot", color="#6c7a96"),
                dcc.Loading(
                    html.Div(id=ids.SHAPES_TABLES, className="tables"),
                    type="dot",
                    color="#6c7a96",
                ),
            ]
        )
    bounds = _bounds(db, view.choices.get("engine"))
    figure = heatmap_figure(hm, percent=scale == "pct", bounds=[bounds] if bounds else [])
    note = (
        f"Lines: engine {bounds.label}'s current bounds; requests right of the dashed line or "
        "above the curve do not fit it."
        if bounds
        else "Pick one engine with a profile to see its current bounds over the map."
    )
    return html.Div(
        [
            html.H2("Shapes"),
            bar,
            html.P(
                [
                    html.Span(f"{hm.total:,}", id=ids.SHAPES_TOTAL),
                    " requests in the window. ",
                    note,
                ],
                className="muted",
            ),
            html.P(
                (rollups.coverage(cur, flt) if bins != "linear" else None) or "",
                id=ids.SHAPES_SOURCE,
                className="muted",
            ),
            html.Div(
                dcc.Graph(id=ids.SHAPES_HEATMAP, figure=figure, config={"displaylogo": False}),
                className="card heatmap-card",
            ),
            # The view travels to the tables' callback with the same `now`, so both halves of
            # the page describe exactly the same window.
            dcc.Store(id=ids.SHAPES_VIEW, data={"query": query, "now": now.isoformat()}),
            dcc.Loading(
                html.Div(id=ids.SHAPES_TABLES, className="tables"),
                type="dot",
                color="#6c7a96",
            ),
        ]
    )


def register(
    app: Dash, db: Database, clock: Callable[[], datetime], fleet: Fleet = Fleet()
) -> None:
    """Register the page at /shapes (its layout follows the URL's query) and its callback;
    `fleet` holds the settings' default SLO for the goodput layer."""
    register_page(
        __name__, "/shapes", "Shapes", 1, lambda **query: layout_for(db, query, clock(), fleet)
    )

    tables = safe(
        "Shapes tables",
        lambda view: html.Div(tables_for(db, view["query"], _when(view)), className="two-col"),
    )

    @app.callback(Output(ids.SHAPES_TABLES, "children"), Input(ids.SHAPES_VIEW, "data"))
    async def _tables(view: ShapesView | None) -> list[html.Div] | html.Div:
        return await tables(view=view) if view and _when(view) else []

    layer = safe("Shapes SLO ledger", lambda view: html.Div(ledger_for(db, view, fleet)))

    @app.callback(Output(ids.SHAPES_SLO_LAYER, "children"), Input(ids.SHAPES_VIEW, "data"))
    async def _layer(view: ShapesView | None) -> html.Div | list:
        return await layer(view=view) if view and _when(view) else []


def _when(view: ShapesView) -> datetime:
    """The time the page was built at, from its store; the request's own, so checked."""
    try:
        return datetime.fromisoformat(view["now"])
    except ValueError:
        raise edge.refuse(
            422, f"input {ids.SHAPES_VIEW}.data: 'now' is not an ISO time; reload the page"
        ) from None
