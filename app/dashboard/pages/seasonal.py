"""Seasonal page: does a separate day and night engine pay off for an engine's traffic?

The hour-of-day × weekday matrix with the best split's windows on it, replicas per hour for the
three plans, the verdict, and per window its heat map and commands."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import cast

from dash import dcc, html

from app.analytics import shapes, traffic
from app.analytics.filters import Filter
from app.charts.heatmap import heatmap_figure
from app.charts.traffic import replicas_figure, weekday_hour_figure
from app.dashboard import filterbar, ids
from app.dashboard.pages import graph, graph_card, register_page
from app.services import profiles as profile_store
from app.services.profiles import NoProfile
from app.services.rightsizing import SeasonalReport, seasonal
from app.sizing.seasonal import Plan, window_label
from app.storage.database import Database

WEEKS = {"1": "last week", "2": "last 2 weeks", "4": "last 4 weeks", "8": "last 8 weeks"}
DAYS = {"together": "every day alike", "split": "weekdays and weekends apart"}


def _form(engines: list[str], engine: str | None, weeks: str, days: str) -> html.Form:
    return html.Form(
        [
            filterbar.choice("engine", "engine", {e: e for e in engines}, engine or ""),
            filterbar.choice("weeks", "window", WEEKS, weeks),
            filterbar.choice("days", "days", DAYS, days),
            html.Button("Apply", type="submit", id=ids.FILTER_APPLY),
        ],
        method="get",
        className="filterbar",
        id=ids.SEASONAL_FORM,
    )


def _plans_table(r: SeasonalReport) -> html.Table:
    assert r.result is not None
    res = r.result

    def row(label: str, plan: Plan | None, saving: str) -> html.Tr:
        if plan is None:
            return html.Tr([html.Td(label), html.Td("–", colSpan=3)])
        cost = f"{plan.cost_week:,.0f}" if plan.cost_week is not None else "–"
        return html.Tr(
            [html.Td(label), html.Td(f"{plan.gpu_hours_week:,.0f}"), html.Td(cost), html.Td(saving)]
        )

    body = [
        row("(a) one configuration, sized for the peak hour", res.static, "–"),
        row("(b) one configuration, replicas per hour", res.hourly, "–"),
        row(
            "(c) two windows, each with its own bounds and replicas per hour",
            res.split,
            f"{res.savings_vs_static:.0%} vs (a), {res.savings_vs_hourly:.0%} vs (b)",
        ),
    ]
    head = html.Tr([html.Th(h) for h in ("plan", "GPU-hours / week", "cost / week", "saves")])
    return html.Table([html.Thead(head), html.Tbody(body)], className="grid", id=ids.SEASONAL_PLANS)


def layout_for(db: Database, query: dict, now: datetime, tz: str, threshold: float) -> html.Div:
    """The page for a URL query."""
    profiles = sorted(profile_store.stored_profiles(db))
    engine = query.get("engine") or (profiles[0] if profiles else None)
    # Each a key of its table: a str.
    weeks = cast(str, query.get("weeks")) if query.get("weeks") in WEEKS else "4"
    days = cast(str, query.get("days")) if query.get("days") in DAYS else "together"
    parts: list = [html.H2("Seasonal engines"), _form(profiles, engine, weeks, days)]
    if engine is None:
        parts.append(
            html.Div(
                "No engine profiles yet: create one on the Rightsizing page.",
                className="empty",
                id=ids.SEASONAL_VERDICT,
            )
        )
        return html.Div(parts)
    try:
        r = seasonal(
            db,
            engine,
            now=now,
            tz=tz,
            weeks=int(weeks),
            threshold=threshold,
            day_types=days == "split",
        )
    except NoProfile as exc:
        parts.append(html.Div(str(exc), className="empty", id=ids.SEASONAL_VERDICT))
        return html.Div(parts)
    status = "ok" if r.result and r.result.split and "two engines" in r.verdict else "no-data"
    parts.append(html.Div(r.verdict, className=f"verdict {status}", id=ids.SEASONAL_VERDICT))
    if r.day_types:
        parts.append(html.Div(r.day_types.verdict, className="verdict", id=ids.SEASONAL_DAYS))
    if r.result is None:
        return html.Div(parts)
    res = r.result
    flt = Filter(start=r.start, end=r.end, engines=(engine,))
    windows = [(window_label(c.hours), c.hours) for c in (res.split.configs if res.split else [])]
    matrix = traffic.hour_weekday(db.cursor(), flt, tz)
    series = [("static", res.static.replicas), ("hourly", res.hourly.replicas)]
    if res.split:
        series.append(("seasonal", res.split.replicas))
    parts += [
        html.P(
            f"{r.requests:,} requests from {r.start:%Y-%m-%d} to {r.end:%Y-%m-%d %H:%M} UTC; "
            f"hours in {tz}. Replicas hold each hour's peak with 20% headroom; decode "
            "throughput per replica is assumed not to bind unless the profile has a measured "
            "requests/s.",
            className="muted",
        ),
        html.Div(
            [
                html.Div([html.H3("Plans"), _plans_table(r)]),
                html.Div(
                    [
                        html.H3("Replicas per hour"),
                        graph(ids.SEASONAL_REPLICAS, replicas_figure(series)),
                    ]
                ),
            ],
            className="two-col",
        ),
        graph_card(
            "Requests by hour and weekday, with the best split's windows",
            ids.SEASONAL_MATRIX,
            weekday_hour_figure(matrix, tz, windows),
        ),
    ]
    if res.split:
        cards = []
        for config, block in zip(res.split.configs, r.commands, strict=True):
            window_flt = Filter(
                start=r.start, end=r.end, engines=(engine,), hours=config.hours, tz=tz
            )
            hm = shapes.heatmap(db.cursor(), window_flt)
            framework = next(k for k in block if k != "window")
            cards.append(
                html.Div(
                    [
                        html.H3(
                            f"{window_label(config.hours)}: max_input_len "
                            f"{config.max_input_len:,}, max_seq_len {config.max_seq_len:,}"
                        ),
                        dcc.Graph(figure=heatmap_figure(hm), config={"displaylogo": False}),
                        html.Pre(block[framework], className="code"),
                    ],
                    className="card",
                )
            )
        parts.append(html.Div(cards, className="two-col", id=ids.SEASONAL_WINDOWS))
    return html.Div(parts)


def register(db: Database, clock: Callable[[], datetime], tz: str, threshold: float) -> None:
    """Register the page at /seasonal."""
    register_page(
        __name__,
        "/seasonal",
        "Seasonal",
        5,
        lambda **query: layout_for(db, query, clock(), tz, threshold),
    )
