"""Observed-load figures: requests in flight per engine over time, latency by requests in
flight, and TTFT by prompt length split by load at arrival."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.charts.style import layout, tokens_label

# One colour per engine, in the order the frame lists them (plotly's default cycle).
ENGINE_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2")
LOAD_COLOURS = {"low": "#2a9d8f", "medium": "#e9c46a", "high": "#d1495b"}
PERCENTILE_DASH = {"p50": "solid", "p90": "dash", "p99": "dot"}


def engine_name(engine) -> str:
    """An engine's label; requests without one are '(no engine)'."""
    return (
        "(no engine)"
        if engine is None or (isinstance(engine, float) and pd.isna(engine))
        else str(engine)
    )


def _engines(frame: pd.DataFrame) -> list:
    return list(dict.fromkeys(frame["engine"].tolist())) if len(frame) else []


def _legend_above(fig: go.Figure) -> go.Figure:
    """A legend of two lines sits above the plot, not over its top."""
    fig.update_layout(margin={"t": 60}, legend={"yanchor": "bottom", "y": 1.02})
    return fig


def level_label(lo: int, hi: int) -> str:
    """'1', '3–4', '17–32' for an in-flight level."""
    return str(lo) if lo == hi else f"{lo}–{hi}"


def inflight_figure(frame: pd.DataFrame, height: int = 300) -> go.Figure:
    """Requests in flight per engine over time: the bucket's time-weighted mean (solid) and
    its most (dotted, same colour)."""
    traces = []
    for k, engine in enumerate(_engines(frame)):
        rows = frame[frame["engine"].isna()] if engine is None else frame[frame["engine"] == engine]
        colour = ENGINE_COLOURS[k % len(ENGINE_COLOURS)]
        name = engine_name(engine)
        traces += [
            go.Scatter(
                x=rows["bucket"],
                y=rows["inflight_mean"],
                name=f"{name} mean",
                legendgroup=name,
                mode="lines",
                line={"color": colour},
                hovertemplate=f"{name}<br>%{{x}}<br>mean %{{y:,.2f}} in flight<extra></extra>",
            ),
            go.Scatter(
                x=rows["bucket"],
                y=rows["inflight_max"],
                name=f"{name} max",
                legendgroup=name,
                mode="lines",
                line={"color": colour, "dash": "dot", "width": 1},
                hovertemplate=f"{name}<br>%{{x}}<br>max %{{y:,}} in flight<extra></extra>",
            ),
        ]
    return _legend_above(layout(go.Figure(traces), "time", "requests in flight", height=height))


MEASURES = (("ttft", "TTFT"), ("itl", "ITL"))
SHOWN = {"p50": "solid", "p90": "dash"}  # p99 is in the frame, too noisy for few requests


def _log_ticks(top: float) -> list[int]:
    """1, 2, 4, 8 … up to the first power of two at or above `top`."""
    ticks = [1]
    while ticks[-1] < top:
        ticks.append(ticks[-1] * 2)
    return ticks


def latency_inflight_figure(frame: pd.DataFrame, height: int = 460) -> go.Figure:
    """TTFT (top) and ITL (bottom) p50 (solid) and p90 (dashed) against the requests in flight
    at arrival (from `load.latency_by_inflight`), one colour per engine. x is each level's
    mean count on a shared log axis, so engines whose levels differ still line up."""
    fig = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    for k, engine in enumerate(_engines(frame)):
        mine = frame[frame["engine"].isna()] if engine is None else frame[frame["engine"] == engine]
        colour = ENGINE_COLOURS[k % len(ENGINE_COLOURS)]
        name = engine_name(engine)
        for row, (measure, label) in enumerate(MEASURES, start=1):
            rows = mine[mine[f"{measure}_p50"].notna()]
            levels = [
                level_label(int(a), int(b))
                for a, b in zip(rows["inflight_lo"], rows["inflight_hi"], strict=True)
            ]
            custom = list(zip(levels, rows["requests"].astype(int), strict=True))
            for p, dash in SHOWN.items():
                fig.add_trace(
                    go.Scatter(
                        x=rows["inflight_mean"],
                        y=rows[f"{measure}_{p}"],
                        name=name,
                        legendgroup=name,
                        showlegend=row == 1 and p == "p50",
                        mode="lines+markers",
                        line={"color": colour, "dash": dash, "width": 2 if p == "p50" else 1},
                        marker={"size": 5 if p == "p50" else 3},
                        customdata=custom,
                        hovertemplate=f"{name}: %{{customdata[0]}} in flight<br>"
                        f"{label} {p} %{{y:,.1f}} ms<br>"
                        "%{customdata[1]:,} requests<extra></extra>",
                    ),
                    row=row,
                    col=1,
                )
    top = float(frame["inflight_mean"].max()) if len(frame) else 1.0
    fig.update_xaxes(type="log", tickvals=_log_ticks(top))
    fig.update_yaxes(title_text="TTFT (ms)", row=1, col=1)
    fig.update_yaxes(title_text="ITL (ms)", row=2, col=1)
    fig.update_xaxes(title_text="requests in flight on the engine at arrival", row=2, col=1)
    return layout(fig, "", "TTFT (ms)", height=height)


def ttft_isl_load_figure(frame: pd.DataFrame, overall: pd.DataFrame | None = None) -> go.Figure:
    """Median TTFT per ISL bin (p90 dotted), one line per load class at arrival (from
    `load.ttft_by_isl_and_load`; the legend names each class's in-flight counts when the frame
    holds one engine, `frame.attrs["engines"]`), and the median over all requests (`overall`,
    the frame of `latency.ttft_vs_isl`) in grey."""
    starts = [int(v) for v in frame["isl_from"]]
    if overall is not None:
        starts += [int(v) for v in overall["isl_from"]]
    labels = {v: f"{tokens_label(v)}+" for v in starts}
    order = [labels[v] for v in sorted(labels)]
    traces = []
    if overall is not None and len(overall):
        traces.append(
            go.Scatter(
                x=[labels[int(v)] for v in overall["isl_from"]],
                y=overall["ttft_p50"],
                name="all requests",
                mode="lines",
                line={"color": "#888888", "width": 3},
                opacity=0.5,
                customdata=overall["requests"],
                hovertemplate="all, ISL %{x}<br>median %{y:,.0f} ms<br>"
                "%{customdata:,} requests<extra></extra>",
            )
        )
    for load, rows in frame.groupby("load", sort=True):
        name = str(rows["load_name"].iloc[0])
        lo, hi = int(rows["inflight_lo"].iloc[0]), int(rows["inflight_hi"].iloc[0])
        # Pooled engines' thirds overlap in counts: name the range for one engine only.
        one = frame.attrs.get("engines", 1) == 1
        legend = f"{name} load" + (f" ({level_label(lo, hi)} in flight)" if one else "")
        colour = LOAD_COLOURS.get(name, "#555555")
        x = [labels[int(v)] for v in rows["isl_from"]]
        traces += [
            go.Scatter(
                x=x,
                y=rows["ttft_p50"],
                name=legend,
                legendgroup=str(load),
                mode="lines+markers",
                line={"color": colour},
                customdata=rows["requests"],
                hovertemplate=f"{name} load, ISL %{{x}}<br>median %{{y:,.0f}} ms<br>"
                "%{customdata:,} requests<extra></extra>",
            ),
            go.Scatter(
                x=x,
                y=rows["ttft_p90"],
                name=f"{name} p90",
                legendgroup=str(load),
                showlegend=False,
                mode="lines",
                line={"color": colour, "dash": "dot", "width": 1},
                customdata=rows["requests"],
                hovertemplate=f"{name} load, ISL %{{x}}<br>p90 %{{y:,.0f}} ms<br>"
                "%{customdata:,} requests<extra></extra>",
            ),
        ]
    fig = go.Figure(traces)
    fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    return _legend_above(layout(fig, "input tokens (ISL bin, from)", "time to first token (ms)"))
