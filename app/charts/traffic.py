"""Traffic figures: rates over time (whole or one line per value of a split), the prefix-cache
hit rate per engine, and the weekday x hour pattern (replica plans: plans.py). Every hover
names the requests behind its point."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.charts.heatmap import HEAT_SCALE
from app.charts.style import hover_text, layout, nonnegative, series_colour

OTHER = "(other)"  # the split series of "the rest" (app.analytics.split.OTHER)


def rates_figure(frame) -> go.Figure:
    """Requests/s and tokens/s over time (tokens on the right axis)."""
    counts = frame["requests"]
    fig = go.Figure(
        [
            go.Scatter(
                x=frame["bucket"],
                y=frame["requests_per_s"],
                name="requests/s",
                mode="lines",
                customdata=counts,
                hovertemplate="%{x}<br>%{y:,.3f} req/s<br>%{customdata:,} requests<extra></extra>",
            ),
            go.Scatter(
                x=frame["bucket"],
                y=frame["input_tokens_per_s"],
                name="input tokens/s",
                mode="lines",
                yaxis="y2",
                customdata=counts,
                hovertemplate="%{x}<br>%{y:,.0f} input tokens/s<br>"
                "%{customdata:,} requests<extra></extra>",
            ),
            go.Scatter(
                x=frame["bucket"],
                y=frame["output_tokens_per_s"],
                name="output tokens/s",
                mode="lines",
                yaxis="y2",
                customdata=counts,
                hovertemplate="%{x}<br>%{y:,.0f} output tokens/s<br>"
                "%{customdata:,} requests<extra></extra>",
            ),
        ]
    )
    fig.update_layout(yaxis2={"title": {"text": "tokens/s"}, "overlaying": "y", "side": "right"})
    return nonnegative(layout(fig, "time", "requests/s"), "yaxis", "yaxis2")


def requests_split_figure(series: Sequence[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Requests/s over time, a line per value of a split (busiest first, the rest grey)."""
    fig = go.Figure(
        [
            go.Scatter(
                x=frame["bucket"],
                y=frame["requests_per_s"],
                name=name,
                mode="lines",
                line={"color": series_colour(rank, name == OTHER)},
                customdata=frame["requests"],
                hovertemplate=f"{hover_text(name)}<br>%{{x}}<br>%{{y:,.3f}} req/s<br>"
                "%{customdata:,} requests<extra></extra>",
            )
            for rank, (name, frame) in enumerate(series)
        ]
    )
    return nonnegative(layout(fig, "time", "requests/s"))


def cache_hit_figure(series: Sequence[tuple[str, pd.DataFrame]]) -> go.Figure:
    """The prefix-cache hit rate (cached / input tokens) over time, a line per engine."""
    fig = go.Figure(
        [
            go.Scatter(
                x=frame["bucket"],
                y=frame["hit_rate"],
                name=name,
                mode="lines+markers",
                line={"color": series_colour(rank, name == OTHER)},
                marker={"size": 4},
                customdata=np.column_stack(
                    [
                        frame["requests"].to_numpy(dtype=float),
                        frame["sum_cached_tokens"].to_numpy(dtype=float),
                        frame["sum_isl"].to_numpy(dtype=float),
                    ]
                ),
                hovertemplate=f"{hover_text(name)}<br>%{{x}}<br>%{{y:.1%}} of input tokens "
                "cached<br>%{customdata[1]:,.0f} of %{customdata[2]:,.0f} tokens<br>"
                "%{customdata[0]:,} requests<extra></extra>",
            )
            for rank, (name, frame) in enumerate(series)
        ]
    )
    fig.update_yaxes(tickformat=".0%", range=[0, 1.02])
    return layout(fig, "time", "prefix-cache hit rate")


WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


WINDOW_COLOURS = ("#2a9d8f", "#d1495b")


def weekday_hour_figure(
    matrix: np.ndarray, tz: str, windows: Sequence[tuple[str, tuple[int, ...]]] = ()
) -> go.Figure:
    """Requests per hour of day (x) and weekday (y) in the configured time zone; optional
    windows (label, hours) outlined over it."""
    fig = go.Figure(
        go.Heatmap(
            z=matrix,
            x=[f"{h:02d}:00" for h in range(24)],
            y=list(WEEKDAYS),
            colorscale=HEAT_SCALE,
            colorbar={"title": {"text": "requests"}},
            xgap=1,
            ygap=1,
            hovertemplate="%{y} %{x}<br>%{z:,} requests<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", type="category")
    fig.update_xaxes(type="category")
    for (label, hours), colour in zip(windows, WINDOW_COLOURS, strict=False):
        for run in hour_runs(hours):
            fig.add_shape(
                type="rect",
                x0=run[0] - 0.5,
                x1=run[-1] + 0.5,
                y0=-0.5,
                y1=6.5,
                line={"color": colour, "width": 3},
                fillcolor="rgba(0,0,0,0)",
            )
        fig.add_trace(
            go.Scatter(x=[None], y=[None], mode="lines", line={"color": colour}, name=label)
        )
    return layout(fig, f"hour of day ({tz})", "weekday", height=340)


def hour_runs(hours: Sequence[int]) -> list[list[int]]:
    """Consecutive runs of hours (a window wrapping midnight is two runs)."""
    runs: list[list[int]] = []
    for h in sorted(hours):
        if runs and h == runs[-1][-1] + 1:
            runs[-1].append(h)
        else:
            runs.append([h])
    return runs
