"""Replica plans per local hour: each plan's replicas with what set them, and the latency the
performance model predicts per hour against the SLO's targets."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.charts.style import layout

PLAN_COLOURS = {
    "now": "#6c7a96",
    "static": "#a05a7b",
    "hourly": "#e0b23e",
    "seasonal": "#2a9d8f",
}
# What set an hour's replicas: a colour and a marker each, the same on every plan.
BINDING_STYLE = {
    "memory": ("#4c6a92", "circle", "the KV cache (memory)"),
    "latency": ("#d1495b", "diamond", "the latency targets"),
    "throughput": ("#b7791f", "square", "the measured requests/s"),
    "minimum": ("#9aa5b8", "x", "the minimum of one replica"),
    "today": ("#6c7a96", "line-ew", "the replicas running today"),
}
HOURS = [f"{h:02d}:00" for h in range(24)]
# Each plan's line: dash and width as well as hue, so that plans on the same steps stay apart
# (colour-blind readers included). Drawn widest first: a narrower line runs inside a wider one.
PLAN_LINES = {
    "hourly": {"width": 9, "dash": "solid"},
    "static": {"width": 5, "dash": "dash"},
    "seasonal": {"width": 2.5, "dash": "solid"},
    "now": {"width": 2.5, "dash": "dot"},
}
DRAW_ORDER = ("hourly", "static", "seasonal", "now")


@dataclass(frozen=True)
class PlanLine:
    """One plan's replicas per local hour and, per hour, what set them."""

    name: str  # "now", "static", "hourly" or "seasonal"
    replicas: list[int]
    binding: list[str] = field(default_factory=list)
    label: str = ""


def replicas_figure(plans: Sequence[PlanLine], marked: str | None = None) -> go.Figure:
    """Replicas per hour of each plan as steps; the `marked` plan's hours carry a marker for
    what set them (memory, latency, …), the same words in every hover."""
    fig = go.Figure()
    rank = {p.name: i for i, p in enumerate(plans)}  # the legend keeps the order given
    for p in sorted(plans, key=_order):
        colour = PLAN_COLOURS.get(p.name, "#333333")
        style = PLAN_LINES.get(p.name, {"width": 2, "dash": "solid"})
        why = [BINDING_STYLE.get(b, ("", "", b))[2] for b in p.binding] or [""] * 24
        fig.add_trace(
            go.Scatter(
                x=list(range(25)),
                y=[*p.replicas, p.replicas[-1]],
                customdata=[*why, why[-1]],
                mode="lines",
                line={"shape": "hv", "color": colour, **style},
                # The wide band of (b) shows under the others without hiding them.
                opacity=0.45 if p.name == "hourly" else 1.0,
                name=p.label or p.name,
                legendrank=100 + rank[p.name],
                hovertemplate=f"{p.name}: %{{y}} replicas from %{{x}}:00, set by "
                "%{customdata}<extra></extra>",
            )
        )
    chosen = next((p for p in plans if p.name == marked and p.binding), None)
    if chosen is not None:
        for kind, (colour, symbol, words) in BINDING_STYLE.items():
            hours = [h for h, b in enumerate(chosen.binding) if b == kind]
            if not hours:
                continue
            fig.add_trace(
                go.Scatter(
                    x=[h + 0.5 for h in hours],
                    y=[chosen.replicas[h] for h in hours],
                    mode="markers",
                    marker={"color": colour, "symbol": symbol, "size": 9},
                    name=f"{chosen.label or chosen.name} set by {words}",
                    hovertemplate=f"{chosen.name}, %{{x:.0f}}:00: %{{y}} replicas, set by "
                    f"{words}<extra></extra>",
                )
            )
    fig.update_xaxes(
        range=[0, 24],
        tickvals=list(range(0, 25, 2)),
        ticktext=[f"{h:02d}:00" for h in range(0, 25, 2)],
    )
    top = max((max(p.replicas) for p in plans if p.replicas), default=1)
    # Zero a little above the axis, so its tick and the hour labels do not collide.
    fig.update_yaxes(range=[-0.25, top * 1.1 + 0.3], dtick=max(1, math.ceil(top / 8)))
    fig = layout(fig, "local hour of day", "replicas", height=380)
    fig.update_layout(legend={"orientation": "h", "y": -0.2, "font": {"size": 11}})
    return fig


def _order(p: PlanLine) -> int:
    return DRAW_ORDER.index(p.name) if p.name in DRAW_ORDER else len(DRAW_ORDER)


def coinciding(plans: Sequence[PlanLine]) -> list[list[PlanLine]]:
    """Groups of two or more plans with the same replicas at every hour (one line on another),
    in the order given."""
    groups: dict[tuple[int, ...], list[PlanLine]] = {}
    for p in plans:
        groups.setdefault(tuple(p.replicas), []).append(p)
    return [g for g in groups.values() if len(g) > 1]


def coinciding_words(plans: Sequence[PlanLine]) -> str:
    """A note naming the plans drawn on the same steps and how each can still be told apart,
    or '' when every line has steps of its own."""
    style = {
        "hourly": "the wide pale band",
        "static": "dashed",
        "seasonal": "the thin solid line",
        "now": "dotted",
    }
    notes = []
    for group in coinciding(plans):
        names = [f"{p.label or p.name} ({style.get(p.name, 'solid')})" for p in group]
        listed = ", ".join(names[:-1]) + " and " + names[-1]
        steady = len(set(group[0].replicas)) == 1
        at = (
            f"{group[0].replicas[0]} replica{'s' if group[0].replicas[0] != 1 else ''} all day"
            if steady
            else "the same replicas every hour"
        )
        notes.append(f"{listed} coincide: {at}, one line drawn over the other")
    return "; ".join(notes) + "." if notes else ""


def _clean(values: Sequence[float | None]) -> list[float | None]:
    return [v if v is not None and math.isfinite(v) else None for v in values]


def latency_figure(
    ttft_ms: Sequence[float | None],
    itl_ms: Sequence[float | None],
    *,
    percentile: float,
    ttft_target: float | None,
    itl_target: float | None,
    feasible: Sequence[bool] = (),
) -> go.Figure:
    """Per local hour, the predicted TTFT and ITL at the percentile (at the replicas the SLO
    needs) against the targets; hours no replica count meets are red."""
    p = f"p{percentile:g}"
    fig = make_subplots(
        rows=2,
        cols=1,
        shared_xaxes=True,
        vertical_spacing=0.12,
        subplot_titles=(f"TTFT {p}, ms", f"ITL {p}, ms"),
    )
    ok = list(feasible) or [True] * 24
    for row, (name, values, target) in enumerate(
        (("TTFT", ttft_ms, ttft_target), ("ITL", itl_ms, itl_target)), start=1
    ):
        ys = _clean(values)
        fig.add_trace(
            go.Bar(
                x=HOURS,
                y=ys,
                name=f"predicted {name} {p}",
                # Hours no replica count meets: red and hatched, not told by hue alone.
                marker={
                    "color": ["#2a9d8f" if good else "#b42318" for good in ok],
                    "pattern": {"shape": ["" if good else "x" for good in ok]},
                },
                hovertemplate=f"%{{x}}: predicted {name} {p} %{{y:,.1f}} ms<extra></extra>",
                showlegend=False,
            ),
            row=row,
            col=1,
        )
        if target is not None:
            fig.add_trace(
                go.Scatter(
                    x=HOURS,
                    y=[target] * 24,
                    mode="lines",
                    line={"color": "#d1495b", "dash": "dash", "width": 2},
                    name=f"{name} target {target:,.0f} ms",
                    hovertemplate=f"{name} target {target:,.0f} ms<extra></extra>",
                ),
                row=row,
                col=1,
            )
    fig.update_yaxes(rangemode="tozero")
    fig.update_xaxes(tickvals=HOURS[::2])
    fig = layout(fig, "", "", height=380)
    fig.update_layout(legend={"orientation": "h", "y": -0.12}, margin={"t": 40, "b": 60})
    return fig
