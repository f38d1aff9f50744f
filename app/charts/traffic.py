"""Traffic figures: rates over time and the weekday x hour pattern (replica plans: plans.py)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import plotly.graph_objects as go

from app.charts.heatmap import HEAT_SCALE
from app.charts.style import layout


def rates_figure(frame) -> go.Figure:
    """Requests/s and tokens/s over time (tokens on the right axis)."""
    fig = go.Figure(
        [
            go.Scatter(
                x=frame["bucket"],
                y=frame["requests_per_s"],
                name="requests/s",
                mode="lines",
                hovertemplate="%{x}<br>%{y:,.3f} req/s<extra></extra>",
            ),
            go.Scatter(
                x=frame["bucket"],
                y=frame["input_tokens_per_s"],
                name="input tokens/s",
                mode="lines",
                yaxis="y2",
                hovertemplate="%{x}<br>%{y:,.0f} input tokens/s<extra></extra>",
            ),
            go.Scatter(
                x=frame["bucket"],
                y=frame["output_tokens_per_s"],
                name="output tokens/s",
                mode="lines",
                yaxis="y2",
                hovertemplate="%{x}<br>%{y:,.0f} output tokens/s<extra></extra>",
            ),
        ]
    )
    fig.update_layout(yaxis2={"title": {"text": "tokens/s"}, "overlaying": "y", "side": "right"})
    return layout(fig, "time", "requests/s")


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
        for run in _runs(hours):
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


def _runs(hours: Sequence[int]) -> list[list[int]]:
    """Consecutive runs of hours (a window wrapping midnight is two runs)."""
    runs: list[list[int]] = []
    for h in sorted(hours):
        if runs and h == runs[-1][-1] + 1:
            runs[-1].append(h)
        else:
            runs.append([h])
    return runs
