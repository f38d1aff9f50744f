"""Seasonal page: does a separate day and night engine pay off for an engine's traffic?

The verdict; the plans (today's, one configuration for the peak, scaled by the hour, two
windows) in replicas per hour with what set each hour (memory or the SLO's latency targets),
GPU-hours and money per month; the latency the model predicts per hour against the SLO; the
hour-of-day × weekday matrix with the best split's windows on it; per window its heat map and
commands; and the documents that apply the plan (KEDA, Kubernetes, Triton)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import cast

from dash import dcc, html
from dash.development.base_component import Component

from app.analytics import shapes, traffic
from app.analytics.filters import Filter
from app.charts.heatmap import heatmap_figure
from app.charts.plans import PlanLine, latency_figure, replicas_figure
from app.charts.traffic import weekday_hour_figure
from app.dashboard import filterbar, ids
from app.dashboard.pages import graph, graph_card, money_panel, register_page
from app.services import profiles as profile_store
from app.services.deploy import DEFAULT_NAMESPACE, deploy_documents
from app.services.economics import engine_money
from app.services.profiles import NoProfile, load_profile
from app.services.rightsizing import SeasonalReport, seasonal
from app.sizing.seasonal import Plan, binding_words, window_label
from app.sizing.slo import Fleet
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


def _bindings(r: SeasonalReport) -> dict[str, str]:
    """What set each plan's replicas, in words, by the money's plan names."""
    assert r.result is not None
    res = r.result
    plans = {"now": res.now, "rebuilt": res.static, "hourly": res.hourly, "seasonal": res.split}
    out = {name: binding_words(p) for name, p in plans.items() if p is not None}
    if res.now is not None and not out.get("now"):
        out["now"] = "the replicas running today (the profile)"
    return out


def _lines(r: SeasonalReport) -> tuple[list[PlanLine], str]:
    """The plans' lines for the replicas chart, and the one whose hours get markers."""
    assert r.result is not None
    res = r.result
    labels = {
        "now": "now",
        "static": "(a) peak all day",
        "hourly": "(b) by the hour",
        "seasonal": "(c) two windows",
    }
    plans: list[tuple[str, Plan | None]] = [
        ("now", res.now),
        ("static", res.static),
        ("hourly", res.hourly),
        ("seasonal", res.split),
    ]
    lines = [PlanLine(n, p.replicas, p.binding, labels[n]) for n, p in plans if p is not None]
    return lines, "seasonal" if res.split is not None else "hourly"


def _latency(r: SeasonalReport) -> Component:
    """Predicted TTFT and ITL per hour against the targets, or why there is none."""
    lat, slo = r.latency, r.slo
    if slo is None:
        return html.P(
            "No SLO for this engine: replicas follow memory alone. Set latency targets in its "
            "profile on the Rightsizing page (SLO: TTFT / ITL target, percentile), or for the "
            "fleet with TOKENSHAPE_SLO_TTFT_MS and TOKENSHAPE_SLO_ITL_MS.",
            className="muted",
            id=ids.SEASONAL_LATENCY_NOTE,
        )
    if lat is None or lat.error or not any(n is not None for n in lat.needs):
        why = lat.error if lat is not None and lat.error else "no hour has traffic to model"
        return html.P(
            f"SLO {slo.words()}; no latency prediction: {why}. Replicas follow memory alone.",
            className="muted",
            id=ids.SEASONAL_LATENCY_NOTE,
        )
    ttft = [n.tail.ttft_ms if n is not None else None for n in lat.needs]
    itl = [n.tail.itl_ms if n is not None else None for n in lat.needs]
    ok = [n is None or n.feasible for n in lat.needs]
    notes = [
        f"SLO {slo.words()} ({'the engine' if slo.source == 'engine' else 'the fleet'}'s). "
        "Bars: the performance model's prediction at each hour's peak rate (with headroom) and "
        "ISL × OSL mix, on the replicas the targets need (the plan may run more for memory), "
        f"calibrated to the engine's own latencies (prefill ×{lat.corrections.prefill:.2f}, "
        f"decode ×{lat.corrections.decode:.2f})."
    ]
    if lat.infeasible:
        hours = ", ".join(f"{h:02d}:00" for h in lat.infeasible)
        first = lat.needs[lat.infeasible[0]]
        reason = first.reason if first is not None and first.reason else ""
        notes.append(f"No replica count meets the SLO at {hours} (red). {reason}")
    notes += lat.notes
    return html.Div(
        [
            graph(
                ids.SEASONAL_LATENCY,
                latency_figure(
                    ttft,
                    itl,
                    percentile=slo.percentile,
                    ttft_target=slo.ttft_ms,
                    itl_target=slo.itl_ms,
                    feasible=ok,
                ),
            ),
            html.Ul([html.Li(n) for n in notes], className="notes", id=ids.SEASONAL_LATENCY_NOTE),
        ]
    )


def _copyable(title: str, text: str, box_id: str) -> html.Div:
    return html.Div(
        [
            html.Div(
                [
                    html.Span(title),
                    dcc.Clipboard(target_id=box_id, title="copy", className="copy"),
                ],
                className="cmd-head",
            ),
            html.Pre(
                text,
                id=box_id,
                className="code",
                style={"maxHeight": "420px", "overflow": "auto", "wordBreak": "normal"},
            ),
        ]
    )


def _deploy(db: Database, r: SeasonalReport, namespace: str, weeks: str, days: str) -> html.Div:
    """The documents that apply the plan, for a namespace the user names."""
    form = html.Form(
        [
            dcc.Input(type="hidden", name="engine", value=r.engine),
            dcc.Input(type="hidden", name="weeks", value=weeks),
            dcc.Input(type="hidden", name="days", value=days),
            html.Label(
                [
                    html.Span("Kubernetes namespace"),
                    dcc.Input(
                        type="text",
                        name="namespace",
                        value=namespace,
                        maxLength=63,
                        id=ids.SEASONAL_NAMESPACE,
                    ),
                ]
            ),
            html.Button("Apply", type="submit"),
        ],
        method="get",
        className="filterbar",
        id=ids.SEASONAL_DEPLOY_FORM,
    )
    parts: list[Component] = [html.H3("Apply the plan"), form]
    try:
        docs = deploy_documents(r, load_profile(db, r.engine), namespace=namespace)
    except ValueError as exc:  # a namespace that is not a DNS-1123 label
        parts.append(html.P(str(exc), className="field-error"))
        return html.Div(parts, className="card", id=ids.SEASONAL_DEPLOY)
    if "error" in docs:
        parts.append(html.P(str(docs["error"]), className="muted"))
        return html.Div(parts, className="card", id=ids.SEASONAL_DEPLOY)
    plan = "the two windows" if docs["plan"] == "seasonal" else "one engine scaled by the hour"
    parts.append(
        html.P(
            f"The replica schedule of {plan}: Deployments {', '.join(docs['deployments'])} in "
            f"namespace {docs['namespace']}, hours in {r.tz}.",
            className="muted",
        )
    )
    parts.append(
        html.Div(
            [
                _copyable(
                    "KEDA ScaledObject (cron triggers)", docs["keda_yaml"], ids.SEASONAL_KEDA
                ),
                _copyable(
                    "Kubernetes HPA + CronJobs (no KEDA)",
                    docs["kubernetes_yaml"],
                    ids.SEASONAL_KUBERNETES,
                ),
            ],
            className="two-col",
        )
    )
    triton = [
        _copyable(
            f"Triton tensorrt_llm config.pbtxt parameters, {w['deployment']} ({w['hours']})",
            w["triton_config_pbtxt"],
            f"seasonal-triton-{i}",
        )
        for i, w in enumerate(docs["windows"])
        if w.get("triton_config_pbtxt")
    ]
    if triton:
        parts.append(html.Div(triton, className="two-col"))
    parts.append(html.Ul([html.Li(n) for n in docs["notes"]], className="notes"))
    return html.Div(parts, className="card", id=ids.SEASONAL_DEPLOY)


def layout_for(
    db: Database,
    query: dict,
    now: datetime,
    tz: str,
    threshold: float,
    fleet: Fleet = Fleet(),
) -> html.Div:
    """The page for a URL query; `fleet` holds the settings' default SLO and cost."""
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
            fleet=fleet,
        )
    except NoProfile as exc:
        parts.append(html.Div(str(exc), className="empty", id=ids.SEASONAL_VERDICT))
        return html.Div(parts)
    status = "ok" if r.result and r.result.split and "two engines" in r.verdict else "no-data"
    parts.append(html.Div(r.verdict, className=f"verdict {status}", id=ids.SEASONAL_VERDICT))
    if r.raw_only_note:  # the plans read raw rows only
        parts.append(
            html.Div(r.raw_only_note, className="verdict no-data", id=ids.SEASONAL_RAW_ONLY)
        )
    if r.result is not None and r.verdict.startswith("Run one engine"):
        # Say what holds the count: one engine is advised, but on what grounds.
        what = binding_words(r.result.hourly).removeprefix("replicas set by ")
        peak = max(r.result.hourly.replicas)
        parts.append(
            html.P(
                f"What sets the replicas, scaled by the hour: {what or 'the peak hour'}; the "
                f"busiest hour needs {peak} replica{'s' if peak != 1 else ''}.",
                className="muted",
                id=ids.SEASONAL_BINDING,
            )
        )
    if r.day_types:
        parts.append(html.Div(r.day_types.verdict, className="verdict", id=ids.SEASONAL_DAYS))
    if r.result is None:
        return html.Div(parts)
    res = r.result
    flt = Filter(start=r.start, end=r.end, engines=(engine,))
    windows = [(window_label(c.hours), c.hours) for c in (res.split.configs if res.split else [])]
    matrix = traffic.hour_weekday(db.cursor(), flt, tz)
    lines, marked = _lines(r)
    money = engine_money(db, engine, now=now, tz=tz, fleet=fleet, weeks=int(weeks), report=r)
    namespace = query.get("namespace") or DEFAULT_NAMESPACE
    parts += [
        html.P(
            f"{r.requests:,} requests from {r.start:%Y-%m-%d} to {r.end:%Y-%m-%d %H:%M} UTC; "
            f"hours in {tz}. Each hour's replicas are the larger of the memory need (its peak "
            "in flight and KV cache with 20% headroom) and the latency need (the fewest "
            "replicas whose predicted TTFT and ITL at its peak rate meet the SLO); decode "
            "throughput binds only with a measured requests/s in the profile.",
            className="muted",
        ),
        html.Div(
            [
                graph_card(
                    f"Replicas per hour; the hours of {marked_label(marked)} marked with what "
                    "set them",
                    ids.SEASONAL_REPLICAS,
                    replicas_figure(lines, marked),
                ),
                html.Div(
                    [html.H3("Predicted latency per hour against the SLO"), _latency(r)],
                    className="card",
                ),
            ],
            className="two-col",
        ),
        html.Div(
            [
                html.H3("Plans in GPU-hours and money, per month"),
                *money_panel.view(money, tz, int(weeks), _bindings(r), table_id=ids.SEASONAL_PLANS),
            ],
            className="card",
            id=ids.SEASONAL_MONEY,
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
    parts.append(_deploy(db, r, cast(str, namespace)[:63], weeks, days))
    return html.Div(parts)


def marked_label(name: str) -> str:
    """The plan whose hours the replicas chart marks, in the chart's title."""
    return "(c) two windows" if name == "seasonal" else "(b) by the hour"


def register(
    db: Database,
    clock: Callable[[], datetime],
    tz: str,
    threshold: float,
    fleet: Fleet = Fleet(),
) -> None:
    """Register the page at /seasonal; `fleet` holds the settings' default SLO and cost."""
    register_page(
        __name__,
        "/seasonal",
        "Seasonal",
        5,
        lambda **query: layout_for(db, query, clock(), tz, threshold, fleet),
    )
