"""Compare page: a benchmark run beside the same engine's production traffic — both request
shapes on one colour scale with the verdict on how far apart they are, goodput of each against
the engine's SLO, the performance model's prediction for the production load next to both
measurements, and TTFT and ITL per ISL × OSL cell side by side.

The layout is a function of the URL query: engine, benchmark (the gateway the run was imported
under), the production window (window, or start and end) and the benchmark's (bench_start,
bench_end; default: all its rows)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import pandas as pd
from dash import dcc, html

from app.charts.compare import ratio_figure, shape_pair_figure
from app.dashboard import filterbar, ids
from app.dashboard.pages import graph, register_page
from app.services import compare as service
from app.services import slo
from app.sizing.slo import Fleet
from app.storage.database import Database

WINDOWS = {w: filterbar.WINDOW_LABELS[w] for w in ("24h", "7d", "30d", "all", "custom")}
BINS = {"log2": "octaves (log2)", "log2half": "half-octaves"}
# A gateway whose name says it ran a benchmark is offered first when the URL names none.
BENCH_HINTS = ("aiperf", "genai-perf", "bench", "replay", "loadtest")
TABLE_ROWS = 20  # cells in each per-cell table
IMPORT = (
    "tokenshape import profile_export.jsonl --format aiperf --gateway aiperf-replay\n"
    "tokenshape import profile_export.json --format genai-perf --gateway genai-perf"
)


def _ms(value: float | None) -> str:
    return slo.ms(value)


def _x(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"×{value:.2f}"


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def _when(t: datetime | None) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%d %H:%M") if t else "open"


def guess_benchmark(gateways: list[str]) -> str | None:
    """The first gateway whose name says it holds a benchmark run (aiperf-replay, …)."""
    return next((g for g in gateways if any(h in g.lower() for h in BENCH_HINTS)), None)


def _time_input(name: str, label: str, value: datetime | None, example: str) -> html.Label:
    text = value.strftime("%Y-%m-%dT%H:%M") if value else ""
    return html.Label(
        [
            html.Span(label),
            dcc.Input(
                type="text",
                placeholder=example,
                name=name,
                id=f"compare-{name}",
                value=text,
                style={"width": "150px"},  # room for a whole ISO time
            ),
        ]
    )


def _form(
    engines: list[str],
    gateways: list[str],
    engine: str,
    benchmark: str,
    view: filterbar.View,
    bench: tuple[datetime | None, datetime | None],
    bins: str,
) -> html.Form:
    def options(values: list[str], chosen: str, blank: str) -> dict[str, str]:
        found = {"": blank, **{v: v for v in values}}
        if chosen and chosen not in found:
            found[chosen] = chosen
        return found

    custom = view.window == "custom"
    return html.Form(
        [
            filterbar.choice("engine", "engine", options(engines, engine, "pick one"), engine),
            filterbar.choice(
                "benchmark",
                "benchmark gateway",
                options(gateways, benchmark, "pick one"),
                benchmark,
            ),
            filterbar.choice("window", "production window", WINDOWS, view.window),
            _time_input(
                "start", "production from (UTC)", view.start if custom else None, "2026-11-16T00:00"
            ),
            _time_input("end", "production to", view.end if custom else None, "2026-11-23T00:00"),
            _time_input("bench_start", "benchmark from", bench[0], "all its rows"),
            _time_input("bench_end", "benchmark to", bench[1], "all its rows"),
            filterbar.choice("bins", "bins", BINS, bins),
            html.Button("Apply", type="submit", id=ids.FILTER_APPLY),
            *[html.P(problem, className="field-error") for problem in view.problems],
        ],
        method="get",
        className="filterbar",
        id=ids.COMPARE_FORM,
    )


def _empty(text: str, component_id: str = ids.COMPARE_EMPTY) -> html.Div:
    return html.Div(
        [
            html.H3("Pick an engine and the gateway its benchmark was imported under"),
            html.P(text),
            html.P("Import an AIPerf or GenAI-Perf run under a gateway of its own:"),
            html.Pre(IMPORT, className="code"),
        ],
        id=component_id,
        className="empty",
    )


def _table(head: list[str], rows: list[list[Any]], table_id: str) -> html.Table:
    return html.Table(
        [
            html.Thead(html.Tr([html.Th(h) for h in head])),
            html.Tbody([html.Tr([html.Td(v) for v in row]) for row in rows]),
        ],
        className="grid",
        id=table_id,
    )


def _kpi(label: str, value: str, note: str, good: bool | None = None) -> html.Div:
    tone = "" if good is None else (" good" if good else " bad")
    return html.Div(
        [
            html.Div(label, className="kpi-label"),
            html.Div(value, className="kpi-value"),
            html.Div(note, className="kpi-delta" + tone),
        ],
        className="kpi",
    )


def goodput_card(c: service.Comparison) -> html.Div:
    """Goodput of both sides against the engine's SLO, or how to set one."""
    if c.slo is None:
        body: list[Any] = [html.P(slo.HOW_TO_SET, className="muted")]
    else:
        cards = []
        for side in (c.production, c.benchmark):
            g = side.goodput or {}
            judged = (g.get("good") or 0) + (g.get("missed") or 0)
            met = g.get("met")
            note = (
                f"{'met' if met else 'missed'} the {_pct(g.get('target'))} target, "
                f"{judged:,.0f} judged"
                if met is not None
                else "no request measured every targeted value"
            )
            cards.append(_kpi(side.name, _pct(g.get("goodput")), note, met))
        body = [
            html.Div(cards, className="kpis"),
            html.P(
                f"Both sides judged against {c.engine}'s SLO: {c.slo.words()} "
                f"({'its profile' if c.slo.source == 'engine' else 'the fleet default'}). "
                "A request is good when every targeted value was measured and within it.",
                className="muted",
            ),
        ]
    return html.Div([html.H3("Goodput"), *body], className="card", id=ids.COMPARE_GOODPUT)


def latency_card(c: service.Comparison) -> html.Div:
    """TTFT and ITL percentiles and means of both sides, with benchmark ÷ production."""
    rows = []
    for m, name in (("ttft", "TTFT"), ("itl", "ITL")):
        for q in (*service.QUANTILES, "mean"):
            prod, bench = _overall(c.production, m, q), _overall(c.benchmark, m, q)
            ratio = bench / prod if prod and bench is not None else None
            label = (
                f"{name} {q}"
                if q != "mean"
                else f"{name} mean" + (" per output token" if m == "itl" else "")
            )
            rows.append([label, _ms(prod), _ms(bench), _x(ratio)])
    p, b = c.production, c.benchmark
    rows.append(
        [
            "requests in flight",
            _num(p.in_flight),
            _num(b.in_flight),
            "",
        ]
    )
    return html.Div(
        [
            html.H3("Latency, all cells"),
            _table(
                ["", "production", "benchmark", "benchmark ÷ production"], rows, ids.COMPARE_LATENCY
            ),
            html.P(
                f"Requests in flight: production, {p.in_flight_words}; the benchmark, "
                f"{b.in_flight_words}. A benchmark run at another load is not expected to match.",
                className="muted",
            ),
        ],
        className="card",
    )


def _num(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.2f}" if value < 10 else f"{value:,.1f}"


def _overall(side: service.Side, measure: str, q: str) -> float | None:
    if q == "mean":
        return side.stats.ttft_mean if measure == "ttft" else side.stats.itl_mean
    value = side.quantiles[f"{measure}_ms"][q]
    return None if value is None else float(value)


def model_card(c: service.Comparison) -> html.Div:
    """The model's prediction for the production load next to both measurements."""
    if c.prediction is None:
        body: list[Any] = [
            html.P(f"No prediction: {c.prediction_why_not}", className="muted"),
        ]
    else:
        raw, cal = c.prediction["model"], c.prediction["calibrated"]
        rows = [
            [
                "TTFT, mean",
                _ms(raw["ttft_ms"]),
                _ms(cal["ttft_ms"]),
                _ms(c.production.stats.ttft_mean),
                _ms(c.benchmark.stats.ttft_mean),
            ],
            [
                "ITL, mean per output token",
                _ms(raw["itl_ms"]),
                _ms(cal["itl_ms"]),
                _ms(c.production.stats.itl_mean),
                _ms(c.benchmark.stats.itl_mean),
            ],
        ]
        body = [
            _table(
                ["", "model", "calibrated", "production measured", "benchmark measured"],
                rows,
                ids.COMPARE_MODEL,
            ),
            html.P(
                f"One replica at {raw['concurrency']:.1f} requests in flight "
                f"({c.prediction['concurrency_from']}), over {c.prediction['mix']}; calibrated "
                f"to production's own latencies. Source: {raw['source']}. Its stated error: "
                f"{raw['error']}.",
                className="muted",
            ),
        ]
    return html.Div(
        [html.H3("The performance model at the production load"), *body], className="card"
    )


def _cell_rows(cells: pd.DataFrame, measure: str, limit: int) -> tuple[list[list[str]], int]:
    """Per cell: requests of both sides and each quantile as 'production → benchmark ×ratio';
    the cells with a ratio first. Returns the rows and how many cells were left out."""
    has = cells[f"ratio_{measure}_p50"].notna()
    ordered = pd.concat([cells[has], cells[~has]])
    rows = []
    for r in ordered.head(limit).itertuples(index=False):
        row = [
            r.shape,
            f"{r.production_requests:,} / {r.benchmark_requests:,}",
        ]
        for q in service.QUANTILES:
            p = getattr(r, f"production_{measure}_{q}")
            b = getattr(r, f"benchmark_{measure}_{q}")
            ratio = getattr(r, f"ratio_{measure}_{q}")
            text = f"{_ms(p)} → {_ms(b)}"
            if ratio == ratio:  # not NaN: both sides measured enough
                text += f" {_x(ratio)}"
            row.append(text)
        rows.append(row)
    return rows, max(len(ordered) - limit, 0)


def cells_card(c: service.Comparison, measure: str, table_id: str) -> html.Div:
    """One latency per ISL × OSL cell, production → benchmark with the ratio."""
    name = measure.upper()
    rows, left = _cell_rows(c.cells, measure, TABLE_ROWS)
    note = (
        f"production → benchmark; ×: benchmark ÷ production where both sides have "
        f"{c.min_samples} or more requests measuring {name} in the cell."
        + (f" {left} more cells in /api/compare." if left else "")
    )
    return html.Div(
        [
            html.H3(f"{name} per cell"),
            _table(["cell", "requests (prod / bench)", "p50", "p90", "p99"], rows, table_id),
            html.P(note, className="muted"),
        ],
        className="card",
    )


def ratios_card(c: service.Comparison) -> html.Div:
    """The per-cell ratios as bars, with their production-weighted headlines."""
    words = [html.Li(h.words(c.min_samples)) for h in c.headlines()]
    compared = c.cells.filter(like="ratio_").notna().any(axis=1).any()
    return html.Div(
        [
            html.H3("Benchmark ÷ production, per cell"),
            html.Ul(words, className="notes"),
            graph(ids.COMPARE_RATIOS, ratio_figure(c.cells)) if compared else html.Div(),
        ],
        className="card",
    )


def export_href(
    engine: str,
    start: datetime | None,
    end: datetime | None,
    gateways: tuple[str, ...] = (),
) -> str:
    """The export API's Mooncake trace of the engine's peak hour in a window, for a replay: its
    ok requests (a failed one carries no token counts to replay) through production's
    gateways (never a benchmark's rows that name the engine)."""
    params: list[tuple[str, str]] = [("format", "mooncake"), ("engine", engine), ("peak", "1")]
    params += [("status", "ok"), *(("gateway", g) for g in gateways)]
    if start is not None:
        params.append(("start", start.isoformat()))
    if end is not None:
        params.append(("end", end.isoformat()))
    return "/api/export?" + urlencode(params)


def comparison_parts(c: service.Comparison, guessed: bool) -> list:
    """Everything under the form for a comparison that could be made."""
    p, b = c.production, c.benchmark
    sides = (
        f"Production: {p.match_words} ({p.heatmap.total:,} requests). Benchmark: "
        f"{b.match_words}, {_when(b.start)} to {_when(b.end)} UTC ({b.heatmap.total:,} requests)."
    )
    if guessed:
        sides += f" Gateway {b.gateways[0]} was picked by its name; choose another above."
    return [
        html.Div(
            c.shape_words,
            className="verdict" if c.matches else "verdict does-not-fit",
            id=ids.COMPARE_SHAPE,
        ),
        html.P(sides, className="muted", id=ids.COMPARE_SIDES),
        html.Div(
            [
                html.H3("Request shapes on the same bins"),
                graph(ids.COMPARE_HEATMAPS, shape_pair_figure(p.heatmap, b.heatmap)),
                html.P(
                    "One colour scale for both maps: a colour is the same share of each side's "
                    "requests. Hover a cell for the other side's share there.",
                    className="muted",
                ),
            ],
            className="card",
        ),
        html.Div([goodput_card(c), latency_card(c)], className="two-col"),
        model_card(c),
        ratios_card(c),
        # One above the other: each row holds three quantiles of both sides.
        cells_card(c, "ttft", ids.COMPARE_TTFT_CELLS),
        cells_card(c, "itl", ids.COMPARE_ITL_CELLS),
        html.Ul([html.Li(n) for n in c.notes], className="notes", id=ids.COMPARE_NOTES),
        html.P(
            [
                html.A(
                    "Export production's peak hour of this window for a replay",
                    href=export_href(c.engine, p.start, p.end, p.gateways),
                    id=ids.COMPARE_EXPORT,
                ),
                " (a Mooncake trace AIPerf replays; import the run back under its own gateway).",
            ],
            className="muted",
        ),
    ]


def layout_for(db: Database, query: dict, now: datetime, fleet: Fleet = Fleet()) -> html.Div:
    """The page for a URL query."""
    values = filterbar.choices(db)
    engines, gateways = values.get("engine", []), values.get("gateway", [])
    engine = str(query.get("engine") or "")
    benchmark = str(query.get("benchmark") or "")
    guessed = False
    if not benchmark and (found := guess_benchmark(gateways)):
        benchmark, guessed = found, True
    window_query = dict(query)
    if not query.get("window") and (query.get("start") or query.get("end")):
        window_query["window"] = "custom"  # a link with bounds means exactly those
    view = filterbar.parse_query(window_query, now)
    if view.window not in WINDOWS:  # the bar's 1h: a benchmark needs more production
        view = filterbar.parse_query({"window": "7d"}, now)
    bench = (
        filterbar.parse_time(query.get("bench_start")),
        filterbar.parse_time(query.get("bench_end")),
    )
    broken = [
        f"“{label}”: {str(query.get(key))[:40]!r} is not a time; use e.g. 2026-11-24T06:00 "
        "(UTC). All the benchmark's rows on that side are compared."
        for key, label, value in (
            ("bench_start", "benchmark from", bench[0]),
            ("bench_end", "benchmark to", bench[1]),
        )
        if query.get(key) and value is None
    ]
    if broken:
        view = replace(view, problems=(*view.problems, *broken))
    bins = str(query.get("bins")) if query.get("bins") in BINS else "log2"
    parts: list = [
        html.H2("Benchmark vs production"),
        _form(engines, gateways, engine, benchmark, view, bench, bins),
    ]
    if not engine or not benchmark:
        missing = "an engine" if not engine else "the benchmark's gateway"
        parts.append(_empty(f"Choose {missing} above to compare them."))
        return html.Div(parts)
    try:
        found_c = service.compare(
            db,
            engine,
            benchmark,
            now=now,
            fleet=fleet,
            start=view.start,
            end=view.end,
            bench_start=bench[0],
            bench_end=bench[1],
            bins=bins,
            open_start=view.window == "all",
        )
    except service.CompareError as exc:
        parts.append(
            html.Div(
                [html.H3("Nothing to compare yet"), html.P(f"{exc.param}: {exc}")],
                className="empty",
                id=ids.COMPARE_PROBLEM,
            )
        )
        return html.Div(parts)
    parts += comparison_parts(found_c, guessed)
    return html.Div(parts)


def register(db: Database, clock: Callable[[], datetime], fleet: Fleet = Fleet()) -> None:
    """Register the page at /compare (its layout follows the URL's query); `fleet` holds the
    settings' default SLO."""
    register_page(
        __name__,
        "/compare",
        "Compare",
        7,
        lambda **query: layout_for(db, query, clock(), fleet),
    )
