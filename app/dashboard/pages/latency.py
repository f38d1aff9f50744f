"""Latency page: percentile trends (whole, or split by model, engine, tenant or gateway),
queueing time, requests in flight, TTFT vs ISL split by load and fitted per model, latency vs
requests in flight, ITL by token position, time to completion."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime

import pandas as pd
from dash import Dash, Input, Output, dcc, html

from app.analytics import latency, load, rollups, split, windows
from app.analytics.bins import LOG2_EDGES
from app.analytics.rollups.missing import raw_only_note
from app.charts import latency as charts
from app.charts import load as load_charts
from app.charts.slo import goodput_time_figure
from app.dashboard import filterbar, ids
from app.dashboard.edge import Query
from app.dashboard.pages import register_page
from app.services import slo
from app.sizing.slo import Fleet
from app.storage.database import Database

GRAPH_CONFIG: dcc.Graph.Config = {"displaylogo": False}


def _card(title: str, graph_id: str, figure, note: str = "", note_id: str = "") -> html.Div:
    parts = [html.H3(title), dcc.Graph(id=graph_id, figure=figure, config=GRAPH_CONFIG)]
    if note or note_id:
        if note_id:
            parts.append(html.P(note, className="muted", id=note_id))
        else:
            parts.append(html.P(note, className="muted"))
    return html.Div(parts, className="card")


def _position_note(positions) -> str:
    if not len(positions):
        return "No request in this window reports per-token times (token_gaps_ms)."
    note = "From requests that report per-token times (token_gaps_ms)."
    if error := positions.attrs.get("relative_error"):
        note += f" Medians and p90s from hourly rollups: each within ±{error:.2%}."
    return note


def _slope_note(ttft) -> str:  # type: ignore[no-untyped-def]
    # Pooled over every model on purpose only as a picture of load; the fit is per model
    # (prefill costs differ by model: a pooled slope mixes them).
    if not len(ttft):
        return "No TTFT values in this window."
    note = "Grey: median TTFT per input-length bin over every model; the fit per model is below."
    if error := ttft.attrs.get("relative_error"):
        note += f" The grey median from hourly rollups: within ±{error:.2%}."
    return note


SPLIT_OPTIONS = {"": "none", **{d: d for d in split.SPLITS}}


def split_bar(query: dict) -> tuple[str | None, list, list]:
    """The URL's `split`: the dimension (None: unsplit), the filter bar's select for it, and
    the page's words when the value was not one of the choices (like the bar's own)."""
    by, problem = split.parse(query.get("split"))
    select = filterbar.choice("split", "split by", SPLIT_OPTIONS, by or "")
    words = [html.P(problem, className="field-error", id=ids.SPLIT_PROBLEM)] if problem else []
    return by, [select], words


def split_words(found: split.Breakdown, what: str, bucket: str, tz: str) -> str:
    """How a split was drawn and read: the values shown, the rest, the source."""
    by = found.by or ""
    named = [n for n, _ in found.series if n != split.OTHER]
    rest = any(n == split.OTHER for n, _ in found.series)
    note = (
        f"Split by {by}: {what} per {bucket} bucket ({tz}) for the {len(named)} busiest "
        f"{by}s by requests"
        + (f" and {split.OTHER} for every other {by} and rows without one" if rest else "")
        + "; the hover says how many requests each point stands for."
    )
    if not found.raw:
        return note + f" From hourly rollups: percentiles within ±{found.relative_error:.2%}."
    if by == "tenant":
        note += (
            " Split by tenant reads raw rows (tenants are kept only in the full-grain hourly "
            "rollups)"
        )
    else:
        note += " Read from raw rows"
    if found.sampled:
        return note + "; counts and percentiles estimated from sampled rows (1/sample_rate)."
    return note + ": exact."


def _reported(field: str, reported: int, total: int) -> str:
    share = reported / total if total else 0.0
    return (
        f"{reported:,} of {total:,} requests ({share:.1%}) report {field}; the rest are left "
        "out. From raw rows (no rollup keeps it)."
    )


def queue_card(db: Database, flt, bucket: str, tz: str, by: str | None) -> html.Div:
    """Queueing time (queue_ms) over time, or the words saying no request reports it."""
    cur = db.cursor()
    reported, total = split.reporting(cur, flt, "queue_ms")
    if reported == 0:
        return html.Div(
            [
                html.H3("Queueing time"),
                html.P(
                    f"None of the window's {total:,} requests reports queue_ms (the wait before "
                    "the engine started the request): nothing to chart. Gateways that measure "
                    "it send it as queue_ms.",
                    className="muted",
                    id=ids.LATENCY_QUEUE_NOTE,
                ),
            ],
            className="card",
        )
    found = latency.queue_over_time(cur, flt, bucket, tz, by)
    what = "p95 (p50 in the hover)" if by else "p50 and p95"
    note = f"{what.capitalize()} of queue_ms per {bucket} bucket. " + _reported(
        "queue_ms", reported, total
    )
    if found.sampled:
        note += " Estimated from sampled rows (1/sample_rate)."
    return _card(
        "Queueing time" + (f" by {by}" if by else ""),
        ids.LATENCY_QUEUE,
        charts.queue_figure(found.series),
        note,
        ids.LATENCY_QUEUE_NOTE,
    )


def fit_card(db: Database, flt) -> html.Div:
    """TTFT against input length fitted per model (top models by requests), one line each."""
    fits, error = latency.ttft_fits(db.cursor(), flt)
    if not fits:
        return html.Div(
            [
                html.H3("TTFT vs input length, per model"),
                html.P(
                    "No TTFT values in this window.",
                    className="muted",
                    id=ids.LATENCY_TTFT_FIT_NOTE,
                ),
            ],
            className="card",
        )
    slopes = "; ".join(
        f"{f.model}: {f.slope * 1000:,.0f} ms more time to first token per 1,000 input tokens"
        if f.slope is not None
        else f"{f.model}: too few input lengths to fit"
        for f in fits
    )
    note = (
        f"Least-squares fit per model (the {len(fits)} busiest), never pooled: {slopes}. "
        "Dots: median TTFT per input-length bin at its mean ISL."
    )
    if error:
        note += f" Medians from hourly rollups: within ±{error:.2%}; fits exact."
    return _card(
        "TTFT vs input length, per model",
        ids.LATENCY_TTFT_FIT,
        charts.ttft_fit_figure(fits),
        note,
        ids.LATENCY_TTFT_FIT_NOTE,
    )


LOAD_NOTE = (
    "In flight: requests between their start and start + E2E on the same engine, all of the "
    "engine's traffic whatever the filter; exact, from raw rows."
)


def _inflight_note(series, bucket: str) -> str:
    if not len(series):
        return "No request in this window reports an E2E time, so nothing is known in flight."
    return f"Time-weighted mean (solid) and most (dotted) per {bucket} bucket. {LOAD_NOTE}"


def _vs_inflight_note(levels) -> str:
    if not len(levels):
        return "No request in this window reports an E2E time."
    return (
        "p50 (solid) and p90 (dashed) of the requests that arrived with that many in flight on "
        "their engine (itself included; levels 1, 2, 3–4, 5–8 …, each at its mean count). Read "
        "TTFT under a stated load: queueing and batching grow with it."
    )


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def goodput_cards(db: Database, flt, tz: str, bucket: str, fleet: Fleet) -> list[html.Div]:
    """Goodput over time against its target, and goodput per tenant; how to set a target
    when none is set."""
    rep = slo.report(db, flt, fleet, tz=tz, bucket=bucket, attribute=False)
    if rep is None:
        return [
            html.Div(
                [html.H3("Goodput"), html.P(slo.HOW_TO_SET)],
                className="card",
                id=ids.LATENCY_SLO_NONE,
            )
        ]
    t = rep.totals
    own = [f"{n}: {s.words()}" for n, s in sorted(rep.ledger.engines.items())]
    rest = [f"others: {rep.ledger.default.words()}"] if rep.ledger.default else []
    targets = "; ".join(own + rest)
    note = (
        f"Share of requests per {bucket} bucket that met every target of their engine "
        f"({targets}); dashed: the target. {_pct(t['goodput'])} over the window, "
        f"{t['not_measured']:,.0f} not measured (a targeted value missing, left out). "
        "Exact, from raw rows." + (" Counts estimated from sampled rows." if rep.sampled else "")
    )
    head = ("tenant", "requests", "goodput", "target", "met", "not measured")
    rows = [
        html.Tr(
            [
                html.Td(r.tenant if isinstance(r.tenant, str) else "(none)"),
                html.Td(f"{r.requests:,.0f}"),
                html.Td(_pct(None if pd.isna(r.goodput) else r.goodput)),
                html.Td(_pct(None if pd.isna(r.target) else r.target)),
                html.Td("–" if pd.isna(r.goodput) else ("yes" if r.goodput >= r.target else "no")),
                html.Td(f"{r.not_measured:,.0f}"),
            ]
        )
        for r in rep.tenants.itertuples(index=False)
        if r.requests > 0
    ]
    return [
        _card(
            "Goodput (SLO ledger)",
            ids.LATENCY_GOODPUT,
            goodput_time_figure(rep.over_time, t["target"]),
            note,
            ids.LATENCY_GOODPUT_NOTE,
        ),
        html.Div(
            [
                html.H3("Goodput per tenant"),
                html.Table(
                    [html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)],
                    className="grid",
                    id=ids.LATENCY_GOODPUT_TENANTS,
                ),
            ],
            className="card",
        ),
    ]


def layout_for(
    db: Database, query: dict, now: datetime, tz: str, fleet: Fleet = Fleet()
) -> html.Div:
    """The page for a URL query."""
    cur = db.cursor()
    by, extra, split_problem = split_bar(query)
    view, flt, bar = filterbar.prepare(db, query, now, extra, tz=tz)
    tz = view.tz  # the zone the page shows its times in (the URL's, else the server's)
    start, end, count = windows.span(cur, flt)
    if count == 0:
        return html.Div(
            [
                html.H2("Latency"),
                bar,
                *split_problem,
                filterbar.empty_state(view, ids.LATENCY_EMPTY),
            ]
        )
    bucket = windows.bucket_for(start, end)
    seconds = windows.BUCKETS[bucket]
    if by is None:
        trend = latency.trend(cur, flt, bucket, tz)
        figures = [charts.trend_figure(trend, m, label) for m, label in TRENDS]
        caption = f"Percentiles per {bucket} bucket ({tz})" + (
            f", from hourly rollups: each within ±{error:.2%}."
            if (error := trend.attrs.get("relative_error"))
            else "."
        )
        read_raw = False
    else:
        found = latency.trend_by(cur, flt, bucket, tz, by)
        figures = [charts.trend_split_figure(found.series, m, label) for m, label in TRENDS]
        caption = split_words(found, "p90", bucket, tz)
        read_raw = found.raw
    ttft, _ = latency.ttft_vs_isl(cur, flt)
    positions = latency.itl_by_position(cur, flt)
    e2e = latency.e2e_distribution(cur, flt)
    slope_note = _slope_note(ttft)
    # Buckets under an hour, zones with half-hour offsets and a split by tenant read the
    # trends raw.
    source = None if read_raw else rollups.coverage(cur, flt, seconds, tz)
    raw_views = "goodput, queueing, requests in flight and time to completion read"
    gone = raw_only_note(cur, flt, now, reader=raw_views if source else f"the trends, {raw_views}")
    return html.Div(
        [
            html.H2("Latency"),
            bar,
            *split_problem,
            # The load views sweep every raw row of the window (a second or more on millions):
            # they are drawn by a callback after the page, from the same query.
            dcc.Store(id=ids.LATENCY_LOAD_QUERY, data=dict(query)),
            html.P(caption, className="muted", id=ids.LATENCY_SPLIT_NOTE),
            html.P(source or "", id=ids.LATENCY_SOURCE, className="muted"),
            *([html.P(gone, className="muted", id=ids.LATENCY_RAW_ONLY)] if gone else []),
            html.Div(goodput_cards(db, flt, tz, bucket, fleet), className="two-col"),
            html.Div(
                [
                    _card("Time to first token", ids.LATENCY_TTFT_TREND, figures[0]),
                    _card("Inter-token latency", ids.LATENCY_ITL_TREND, figures[1]),
                    _card("End to end", ids.LATENCY_E2E_TREND, figures[2]),
                    queue_card(db, flt, bucket, tz, by),
                    _card(
                        "TTFT vs input length, by load",
                        ids.LATENCY_TTFT_ISL,
                        charts.ttft_isl_figure(ttft),
                        slope_note,
                        ids.LATENCY_TTFT_ISL_NOTE,
                    ),
                    fit_card(db, flt),
                    _card(
                        "Requests in flight",
                        ids.LATENCY_INFLIGHT,
                        load_charts.inflight_figure(_NO_SERIES, height=460),
                        COUNTING,
                        ids.LATENCY_INFLIGHT_NOTE,
                    ),
                    _card(
                        "Latency vs requests in flight",
                        ids.LATENCY_VS_INFLIGHT,
                        load_charts.latency_inflight_figure(_NO_LEVELS),
                        COUNTING,
                        ids.LATENCY_VS_INFLIGHT_NOTE,
                    ),
                    _card(
                        "ITL vs output token position",
                        ids.LATENCY_ITL_POSITION,
                        charts.itl_position_figure(positions),
                        _position_note(positions),
                    ),
                    _card("Time to completion", ids.LATENCY_E2E_DIST, charts.e2e_figure(e2e)),
                ],
                className="two-col",
            ),
        ]
    )


TRENDS = (("ttft_ms", "TTFT"), ("itl_ms", "ITL"), ("e2e_ms", "E2E"))
COUNTING = "Counting the requests in flight…"
# What the two load graphs show until the callback has swept the window.
_NO_SERIES = pd.DataFrame(columns=["engine", "bucket", "inflight_mean", "inflight_max"])
_NO_LEVELS = pd.DataFrame(columns=load.LEVEL_COLUMNS)


def load_figures(db: Database, query: dict, now: datetime, tz: str) -> tuple:
    """The three load views for a URL query: TTFT vs ISL by load, in flight over time,
    latency vs in flight, each with its note (one sweep of the window's raw rows)."""
    cur = db.cursor()
    view = filterbar.parse_query(query, now)
    flt = view.filter()
    ttft, _ = latency.ttft_vs_isl(cur, flt)
    views = load.load_views(cur, flt, tz, isl_edges=LOG2_EDGES)
    series, levels, by_load = views.series, views.levels, views.split
    slope_note = _slope_note(ttft)
    if len(by_load):
        slope_note += (
            " Coloured: median (p90 dotted) by load at arrival, each engine's thirds of its "
            "in-flight counts."
        )
    return (
        load_charts.ttft_isl_load_figure(by_load, ttft)
        if len(by_load)
        else charts.ttft_isl_figure(ttft),
        slope_note,
        load_charts.inflight_figure(series, height=460),
        _inflight_note(series, views.bucket),
        load_charts.latency_inflight_figure(levels),
        _vs_inflight_note(levels),
    )


def register(
    app: Dash, db: Database, clock: Callable[[], datetime], tz: str, fleet: Fleet = Fleet()
) -> None:
    """Register the page at /latency and the callback that draws its load views; `fleet`
    holds the settings' default SLO for the goodput chart."""
    register_page(
        __name__,
        "/latency",
        "Latency",
        2,
        lambda **query: layout_for(db, query, clock(), tz, fleet),
    )

    @app.callback(
        Output(ids.LATENCY_TTFT_ISL, "figure"),
        Output(ids.LATENCY_TTFT_ISL_NOTE, "children"),
        Output(ids.LATENCY_INFLIGHT, "figure"),
        Output(ids.LATENCY_INFLIGHT_NOTE, "children"),
        Output(ids.LATENCY_VS_INFLIGHT, "figure"),
        Output(ids.LATENCY_VS_INFLIGHT_NOTE, "children"),
        Input(ids.LATENCY_LOAD_QUERY, "data"),
    )
    async def _load(query: Query | None):  # type: ignore[no-untyped-def]
        # The query is the client's: parsed and validated exactly as the page's URL is.
        clean = {k: v for k, v in (query or {}).items() if isinstance(v, str)}
        return await asyncio.to_thread(load_figures, db, clean, clock(), tz)
