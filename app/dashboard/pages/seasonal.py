"""Seasonal page: does a separate day and night engine pay off for an engine's traffic?

The verdict; the plans (today's, one configuration for the peak, scaled by the hour, two
windows) in replicas per hour with what set each hour (memory or the SLO's latency targets),
GPU-hours and money per month; the latency the model predicts per hour against the SLO; the
hour-of-day × weekday matrix with the best split's windows on it; per window its heat map and
commands; and the documents that apply the plan (KEDA, Kubernetes, Triton)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import cast
from urllib.parse import urlencode

from dash import dcc, html
from dash.development.base_component import Component

from app.analytics import shapes, traffic
from app.analytics.filters import Filter
from app.charts.plans import PlanLine, coinciding_words, latency_figure, replicas_figure
from app.charts.seasonal import window_heatmaps, windows_matrix_figure
from app.dashboard import filterbar, ids
from app.dashboard.pages import graph, graph_card, money_panel, register_page
from app.services import profiles as profile_store
from app.services.deploy import DEFAULT_NAMESPACE, deploy_documents
from app.services.economics import engine_money
from app.services.profiles import NoProfile, load_profile
from app.services.rightsizing import SeasonalReport, is_paged, seasonal
from app.sizing.profile import EngineProfile
from app.sizing.recommend import DEFAULT_COVERAGE, DEFAULT_HEADROOM, memory_for
from app.sizing.seasonal import (
    MIN_WINDOW_HOURS,
    WEEKS_PER_MONTH,
    HourDemand,
    Plan,
    WindowConfig,
    binding_words,
    need_for,
    share_words,
    window_config,
    window_label,
)
from app.sizing.slo import Fleet, money
from app.storage.database import Database

WEEKS = {"1": "last week", "2": "last 2 weeks", "4": "last 4 weeks", "8": "last 8 weeks"}
DAYS = {"together": "every day alike", "split": "weekdays and weekends apart"}
# "Busy hours": those with at least this share of the busiest hour's peak requests/s.
BUSY_SHARE = 0.5


@dataclass(frozen=True)
class Sizing:
    """What the service sized the plans with, rebuilt from the profile as it does (the report
    holds the plans, not these): to say in numbers why a plan has the replicas it has."""

    kv_capacity: int
    max_batch_size: int | None
    paged: bool
    max_context: int
    rps_per_replica: float | None
    gpus: int
    latency: list[int]
    headroom: float = DEFAULT_HEADROOM
    coverage: float = DEFAULT_COVERAGE

    def config(self, d: HourDemand, hours: tuple[int, ...]) -> WindowConfig:
        """A window's bounds from its own traffic, as plan (c) builds them."""
        return window_config(
            d,
            hours,
            self.kv_capacity,
            self.coverage,
            self.max_context,
            self.max_batch_size,
            self.paged,
        )

    def memory(self, d: HourDemand, h: int, config: WindowConfig) -> float:
        """Hour h's memory need in replicas before rounding up (requests in flight or KV)."""
        if config.slots <= 0:
            return math.inf
        held = float(d.in_flight[h]) * (1 + self.headroom) / config.slots
        kv = float(d.kv_tokens[h]) * (1 + self.headroom) / self.kv_capacity
        return max(held, kv) if self.kv_capacity else held

    def throughput(self, d: HourDemand, h: int) -> float:
        """Hour h's need by the measured requests/s per replica (0 without one)."""
        return float(d.peak_rate[h]) / self.rps_per_replica if self.rps_per_replica else 0.0

    def replicas(self, d: HourDemand, configs: list[WindowConfig]) -> list[int]:
        """Each hour's replicas with the configuration given for it, as the plans count."""
        return [
            need_for(
                d, h, c, self.kv_capacity, self.headroom, self.rps_per_replica, self.latency[h]
            )[0]
            for h, c in enumerate(configs)
        ]

    def gpu_hours_week(self, d: HourDemand, inside: tuple[int, ...]) -> float | None:
        """GPU-hours a week of the split `inside` and the rest (None when one cannot hold)."""
        outside = tuple(h for h in range(24) if h not in inside)
        one, two = self.config(d, inside), self.config(d, outside)
        per_hour = self.replicas(d, [one if h in inside else two for h in range(24)])
        return None if min(per_hour) == 0 else float(sum(per_hour) * self.gpus * 7)


def sizing_for(profile: EngineProfile, r: SeasonalReport) -> Sizing | None:
    """The plans' inputs, or None when the profile does not fit its GPUs (no plans then)."""
    memory = memory_for(profile, profile.max_num_tokens)
    if not memory.fits:
        return None
    kv, batch = memory.kv_capacity_tokens, profile.max_batch_size
    # When the service builds the whole day from its recommendation, it sizes with that build.
    whole = getattr(r, "whole_day", None)
    if whole is not None and whole.status == "ok" and whole.memory_after is not None:
        kv, batch = whole.memory_after.kv_capacity_tokens, whole.recommended.max_batch_size
    lat = r.latency.replicas if r.latency is not None else [0] * 24
    return Sizing(
        kv,
        batch,
        is_paged(profile),
        profile.spec().max_position_embeddings,
        profile.measured_rps_per_replica,
        profile.gpus,
        list(lat),
    )


def hour_runs(hours: list[int] | tuple[int, ...]) -> str:
    """'10:00–12:00, 16:00–18:00' for the hours 10, 11, 16, 17 (a run may wrap past midnight)."""
    hs = sorted(set(hours))
    if len(hs) >= 24:
        return "all day"
    runs: list[list[int]] = []
    for h in hs:
        if runs and h == runs[-1][-1] + 1:
            runs[-1].append(h)
        else:
            runs.append([h])
    if len(runs) > 1 and runs[0][0] == 0 and runs[-1][-1] == 23:
        runs[0] = runs.pop() + runs[0]
    return ", ".join(f"{r[0]:02d}:00–{(r[-1] + 1) % 24:02d}:00" for r in runs)


def _n(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def _count(values: list[int]) -> str:
    """'1 replica', '2–3 replicas' for the distinct counts given (sorted)."""
    return f"{'–'.join(map(str, values))} replica{'' if values == [1] else 's'}"


def _reproduces(r: SeasonalReport, sz: Sizing) -> bool:
    """Whether the rebuilt inputs give the report's own replicas (else say no numbers)."""
    res, d = r.result, r.demand
    if res is None or d is None or len(res.hourly.configs) != 1:
        return False
    if sz.replicas(d, [res.hourly.configs[0]] * 24) != res.hourly.replicas:
        return False
    if res.split is not None:
        one, two = res.split.configs
        by_hour = [one if h in one.hours else two for h in range(24)]
        return sz.replicas(d, by_hour) == res.split.replicas
    return True


def why_one_engine(r: SeasonalReport, sz: Sizing) -> list[str]:
    """What holds each hour's replicas when a split does not pay, in numbers: the hours at the
    minimum of one replica (and what they really need), those the latency targets hold (which
    no bounds change), those the KV cache holds (with the all-day bounds and a window's)."""
    res, d = r.result, r.demand
    if res is None or d is None or not _reproduces(r, sz):
        return []
    hourly, everything = res.hourly, res.hourly.configs[0]
    reps = hourly.replicas
    window = (
        [None] * 24
        if res.split is None
        else [next(c for c in res.split.configs if h in c.hours) for h in range(24)]
    )
    mem = [sz.memory(d, h, everything) for h in range(24)]
    if max(reps) <= 1:
        busiest = max(range(24), key=lambda h: mem[h])
        return [
            f"The busiest hour ({busiest:02d}:00) needs {mem[busiest]:.2f} of a replica's KV "
            "cache (its peak requests in flight with 20% headroom); an engine keeps at least "
            "one replica up, so every plan runs one replica every hour and a split has "
            "nothing to save."
        ]
    floor = [h for h in range(24) if reps[h] <= 1]
    by_latency = [h for h in range(24) if reps[h] > 1 and sz.latency[h] >= reps[h]]
    by_rate = [
        h
        for h in range(24)
        if reps[h] > 1 and h not in by_latency and math.ceil(sz.throughput(d, h)) >= reps[h]
    ]
    by_memory = [h for h in range(24) if reps[h] > 1 and h not in by_latency + by_rate]
    items = []
    if floor:
        items.append(
            f"{len(floor)} h ({hour_runs(floor)}) need at most "
            f"{max(mem[h] for h in floor):.2f} of a replica's KV cache: they run the minimum "
            "of one replica whatever the bounds."
        )
    if by_latency:
        lo, hi = min(reps[h] for h in by_latency), max(reps[h] for h in by_latency)
        count = f"{lo}" if lo == hi else f"{lo}–{hi}"
        text = (
            f"{len(by_latency)} h ({hour_runs(by_latency)}) are held at {count} replicas by the "
            "latency targets, which shorter bounds do not lower"
        )
        most = max(mem[h] for h in by_latency)
        if math.ceil(most) > 1:  # memory asks for more than one replica there as well
            text += f" (the KV cache needs up to {most:.2f} replicas there too)"
        items.append(text + ".")
    if by_rate:
        items.append(
            f"{len(by_rate)} h ({hour_runs(by_rate)}) are held by the measured requests/s per "
            "replica, which bounds do not change."
        )
    if by_memory:
        h = max(by_memory, key=lambda h: mem[h])
        text = (
            f"{len(by_memory)} h ({hour_runs(by_memory)}) are held by the KV cache: "
            f"{h:02d}:00 needs {mem[h]:.2f} replicas with the all-day bounds "
            f"({everything.slots:,} requests a replica)"
        )
        cfg = window[h]
        if cfg is not None:
            text += (
                f" and {sz.memory(d, h, cfg):.2f} with its window's "
                f"({window_label(cfg.hours)}, max_seq_len {cfg.max_seq_len:,}, "
                f"{cfg.slots:,} requests a replica)"
            )
            if cfg.slots == everything.slots and sz.max_batch_size == cfg.slots:
                text += f", max_batch_size {cfg.slots:,} capping a replica whatever the bounds"
        items.append(text + f"; rounded up, {reps[h]}.")
    if res.split is not None:
        one, two = res.split.configs
        # The verdict's own rounding: a saving under the threshold never reads as equal to it.
        saved, bar = share_words(res.savings_vs_hourly, res.threshold)
        items.append(
            f"So the best split ({window_label(one.hours)} and {window_label(two.hours)}) "
            f"saves {saved} of plan (b)'s GPU-hours "
            f"({hourly.gpu_hours_week:,.0f} → {res.split.gpu_hours_week:,.0f} a week), under "
            f"the {bar} a second engine must save."
        )
    else:
        items.append(
            f"No split into two windows of at least {MIN_WINDOW_HOURS} h holds the traffic."
        )
    return items


def busy_hours(d: HourDemand) -> tuple[int, ...]:
    """The run of hours around the busiest one (peak requests/s) with at least half its rate,
    wrapping past midnight; empty when no hour has traffic."""
    rate = [float(x) for x in d.peak_rate]
    top = max(rate, default=0.0)
    if top <= 0:
        return ()
    h0 = rate.index(top)
    run = [h0]
    for step in (1, -1):
        h = (h0 + step) % 24
        while rate[h] >= BUSY_SHARE * top and h not in run and len(run) < 24:
            run.append(h)
            h = (h + step) % 24
    return tuple(sorted(run))


def _starts(hours: tuple[int, ...]) -> list[int]:
    return [h for h in hours if (h - 1) % 24 not in hours]


def why_this_split(r: SeasonalReport, sz: Sizing) -> list[str]:
    """Why the advised split is the best, from the plans' own sizing: its GPU-hours against
    every other split's (the next best) and against a split at the busy hours' edges, and
    what each window's bounds let one replica hold."""
    res, d = r.result, r.demand
    if res is None or d is None or res.split is None or not _reproduces(r, sz):
        return []
    best = res.split
    one, two = best.configs
    long_, short = (one, two) if one.max_seq_len >= two.max_seq_len else (two, one)
    tried: list[tuple[tuple[int, ...], float]] = []
    for a in range(24):  # the splits plan (c) tries: [a, b) and the rest
        for b in range(a + MIN_WINDOW_HOURS, min(24, 24 - MIN_WINDOW_HOURS + a + 1)):
            hours = sz.gpu_hours_week(d, tuple(range(a, b)))
            if hours is not None:
                tried.append((tuple(range(a, b)), hours))
    if not tried or min(h for _, h in tried) != best.gpu_hours_week:
        return []

    def more(hours: float) -> str:
        extra = hours - best.gpu_hours_week
        cost = r.cost_per_gpu_hour
        priced = ""
        if cost is not None:
            priced = f", {money(extra * cost * WEEKS_PER_MONTH, r.currency)} a month more"
        return f"{hours:,.0f} GPU-hours a week ({extra:+,.0f}{priced})"

    items = [
        f"Each window's bounds come from its own traffic: {window_label(short.hours)} keeps "
        f"max_seq_len {short.max_seq_len:,}, so a replica holds {short.slots:,} requests, "
        f"where {window_label(long_.hours)} needs {long_.max_seq_len:,} ({long_.slots:,} "
        "a replica)."
    ]
    fewer = [h for h in range(24) if best.replicas[h] < res.hourly.replicas[h]]
    if fewer:
        was = sorted({res.hourly.replicas[h] for h in fewer})
        now = sorted({best.replicas[h] for h in fewer})
        items[0] = items[0].removesuffix(".") + (
            f"; so {hour_runs(fewer)} runs {_count(now)} where plan (b) runs {_count(was)}."
        )
    ties = [w for w, h in tried if h == best.gpu_hours_week]
    text = f"Of the {len(tried)} splits into two windows of at least {MIN_WINDOW_HOURS} h, "
    if len(ties) == 1:
        text += f"this one alone needs the fewest GPU-hours, {best.gpu_hours_week:,.0f} a week"
    else:
        text += (
            f"{len(ties)} need the fewest GPU-hours, {best.gpu_hours_week:,.0f} a week; of "
            "those this one's windows differ most (max_seq_len ratio, weighted by the shorter "
            "window's length)"
        )
    worse = sorted({h for _, h in tried if h > best.gpu_hours_week})
    if worse:
        window = next(w for w, h in tried if h == worse[0])
        text += f"; the next best ({window_label(window)} and the rest) needs {more(worse[0])}"
    items.append(text + ".")
    busy = busy_hours(d)
    if MIN_WINDOW_HOURS <= len(busy) <= 24 - MIN_WINDOW_HOURS:
        named = f"{window_label(busy)}, the hours with at least half the busiest hour's requests/s"
        if set(busy) in (set(one.hours), set(two.hours)):
            items.append(f"Its windows follow the busy hours ({named}).")
        else:
            edge = sz.gpu_hours_week(d, busy)
            cuts = [
                h
                for h in _starts(one.hours) + _starts(two.hours)
                if h in busy and (h - 1) % 24 in busy
            ]
            lead = (
                f"Its boundary at {', '.join(f'{h:02d}:00' for h in sorted(cuts))} falls inside "
                f"the busy hours ({named}); "
                if cuts
                else f"The busy hours are {named}; "
            )
            if edge is None:
                items.append(lead + "a split at their edges cannot hold the traffic.")
            elif edge == best.gpu_hours_week:
                items.append(
                    lead + f"a split at their edges needs as few GPU-hours ({edge:,.0f} a "
                    "week), but its windows differ less in shape."
                )
            else:
                items.append(lead + f"a split at their edges needs {more(edge)}.")
    return items


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


def _why(r: SeasonalReport, sizing: Sizing | None) -> tuple[str, list[str]]:
    """The verdict's reason in the plan's own numbers: a heading and its items."""
    if r.result is None or sizing is None:
        return "", []
    if r.verdict.startswith("Run two engines"):
        return "Why this split", why_this_split(r, sizing)
    items = why_one_engine(r, sizing)
    if not items:  # the numbers could not be rebuilt: say at least what sets the replicas
        what = binding_words(r.result.hourly).removeprefix("replicas set by ")
        peak = max(r.result.hourly.replicas)
        items = [
            f"What sets the replicas, scaled by the hour: {what or 'the peak hour'}; the "
            f"busiest hour needs {_n(peak, 'replica')}."
        ]
    return "Why one engine", items


def _banner(r: SeasonalReport, sizing: Sizing | None, said: str | None) -> html.Div:
    """The page's one verdict: the seasonal answer, why (in the plan's numbers), the money
    against today, the day types' answer and what the raw rows cannot count."""
    parts: list[Component] = [html.Div(r.verdict, id=ids.SEASONAL_VERDICT)]
    heading, items = _why(r, sizing)
    if items:
        parts.append(
            html.Div(
                [
                    html.Strong(f"{heading}:"),
                    html.Ul([html.Li(i) for i in items], style={"margin": "2px 0 0"}),
                ],
                className="muted",
                id=ids.SEASONAL_BINDING,
                style={"fontSize": "14px", "marginTop": "6px"},
            )
        )
    if said:
        parts.append(html.Div(said, id=ids.SEASONAL_MONEY_VERDICT, style={"marginTop": "6px"}))
    if r.day_types:
        parts.append(
            html.Div(r.day_types.verdict, id=ids.SEASONAL_DAYS, style={"marginTop": "6px"})
        )
    if r.raw_only_note and r.raw_only_note not in r.verdict:  # said once
        parts.append(
            html.Div(
                r.raw_only_note,
                className="muted",
                id=ids.SEASONAL_RAW_ONLY,
                style={"fontSize": "14px", "marginTop": "6px"},
            )
        )
    status = "ok" if r.result is not None else "no-data"
    return html.Div(parts, className=f"verdict {status}", id=ids.SEASONAL_BANNER)


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
                # It scrolls: keyboard users reach it to scroll it (WCAG 2.1.1).
                tabIndex="0",
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
    if r.result is None:
        parts.append(_banner(r, None, None))
        return html.Div(parts)
    sizing = sizing_for(load_profile(db, engine), r)
    res = r.result
    flt = Filter(start=r.start, end=r.end, engines=(engine,))
    windows = [(window_label(c.hours), c.hours) for c in (res.split.configs if res.split else [])]
    matrix = traffic.hour_weekday(db.cursor(), flt, tz)
    lines, marked = _lines(r)
    money_view = engine_money(db, engine, now=now, tz=tz, fleet=fleet, weeks=int(weeks), report=r)
    namespace = query.get("namespace") or DEFAULT_NAMESPACE
    panel = money_panel.view(money_view, tz, int(weeks), _bindings(r), table_id=ids.SEASONAL_PLANS)
    # The money verdict joins the page's one banner (the same decision, said once).
    said = None
    if panel and "verdict" in str(getattr(panel[0], "className", "")).split():
        said, panel = money_view.verdict, panel[1:]
    together = coinciding_words(lines)
    parts += [
        html.Div(
            [
                _banner(r, sizing, said),
                html.H3("Plans in GPU-hours and money, per month"),
                *panel,
            ],
            className="card",
            id=ids.SEASONAL_MONEY,
        ),
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
                    *(
                        [html.P(together, className="muted", id=ids.SEASONAL_COINCIDE)]
                        if together
                        else []
                    ),
                ),
                html.Div(
                    [html.H3("Predicted latency per hour against the SLO"), _latency(r)],
                    className="card",
                ),
            ],
            className="two-col",
        ),
        graph_card(
            "Requests by hour and weekday, with the best split's windows",
            ids.SEASONAL_MATRIX,
            windows_matrix_figure(matrix, tz, windows),
        ),
    ]
    whole = getattr(r, "whole_day", None)
    if whole is not None and whole.status == "ok" and whole.commands:
        framework = next(iter(whole.commands))
        link = "/rightsizing?" + urlencode(
            {"engine": engine, "start": r.start.isoformat(), "end": r.end.isoformat()}
        )
        parts.append(
            html.Div(
                [
                    html.H3("Whole-day build (the Rightsizing page's for this window)"),
                    html.Pre(whole.commands[framework], className="code"),
                    html.P(
                        [
                            "The one build of plans (a) and (b); ",
                            dcc.Link("its recommendation", href=link),
                            " gives the same settings and commands.",
                        ],
                        className="muted",
                    ),
                ],
                className="card",
                id=ids.SEASONAL_WHOLE_DAY,
            )
        )
    if res.split and r.verdict.startswith("Run two engines"):
        maps = []
        for config in res.split.configs:
            window_flt = Filter(
                start=r.start, end=r.end, engines=(engine,), hours=config.hours, tz=tz
            )
            maps.append(shapes.heatmap(db.cursor(), window_flt))
        figures, top = window_heatmaps(maps)
        cards = []
        for config, block, figure in zip(res.split.configs, r.commands, figures, strict=True):
            framework = next(k for k in block if k not in ("window", "build"))
            cards.append(
                html.Div(
                    [
                        html.H3(
                            f"{block.get('build', window_label(config.hours))}: max_input_len "
                            f"{config.max_input_len:,}, max_seq_len {config.max_seq_len:,}"
                        ),
                        dcc.Graph(figure=figure, config={"displaylogo": False}),
                        html.Pre(block[framework], className="code"),
                    ],
                    className="card",
                )
            )
        parts.append(
            html.P(
                "Both windows' heat maps on the same bins and one colour scale: each cell is its "
                f"share of the window's requests, 0 to {top:.1f}% (the busiest cell of either), "
                "so a cell and a colour mean the same in both; the margins share their scale "
                "too.",
                className="muted",
                id=ids.SEASONAL_HEAT_NOTE,
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
