"""Figures built from analytics results by pure functions (shared with the weekly email)."""

from __future__ import annotations

import itertools

import numpy as np
import plotly.graph_objects as go

from app.analytics.shapes import HeatMap

# Colour-blind-safe sequential scale; the lowest non-empty count is still visible.
HEAT_SCALE = "Cividis"


def tokens_label(value: int) -> str:
    """1024 -> '1k', 1536 -> '1.5k', 131072 -> '128k', 96 -> '96'."""
    if value >= 1024:
        k = value / 1024
        return f"{k:g}k"
    return str(value)


def bin_labels(edges: tuple[int, ...]) -> list[str]:
    """'0–16', '16–32', …, '≥128k' for half-open bins with an open last one."""
    labels = [f"{tokens_label(a)}–{tokens_label(b)}" for a, b in itertools.pairwise(edges)]
    return labels + [f"≥{tokens_label(edges[-1])}"]


def heatmap_figure(hm: HeatMap) -> go.Figure:
    """ISL (x) by OSL (y) request counts; hover gives ranges, count and share of the window."""
    counts = hm.counts.T  # rows are OSL bins (y), columns ISL bins (x)
    share = counts / hm.total if hm.total else counts.astype(float)
    # Trim empty outer bins so the map shows the traffic, keeping at least the first bins.
    used_x = np.flatnonzero(counts.sum(axis=0))
    used_y = np.flatnonzero(counts.sum(axis=1))
    x_hi = int(used_x.max()) + 1 if len(used_x) else 1
    y_hi = int(used_y.max()) + 1 if len(used_y) else 1
    xl, yl = bin_labels(hm.isl_edges)[:x_hi], bin_labels(hm.osl_edges)[:y_hi]
    z = np.where(counts[:y_hi, :x_hi] > 0, counts[:y_hi, :x_hi], np.nan)
    fig = go.Figure(
        go.Heatmap(
            x=xl,
            y=yl,
            z=z,
            customdata=share[:y_hi, :x_hi] * 100,
            colorscale=HEAT_SCALE,
            colorbar={"title": {"text": "requests"}},
            hovertemplate=(
                "ISL %{x} tokens<br>OSL %{y} tokens<br>%{z:,} requests "
                "(%{customdata:.2f}%)<extra></extra>"
            ),
            xgap=1,
            ygap=1,
        )
    )
    fig.update_layout(
        margin={"l": 70, "r": 20, "t": 10, "b": 60},
        height=460,
        xaxis={"title": {"text": "input tokens (ISL), log bins"}, "type": "category"},
        yaxis={"title": {"text": "output tokens (OSL), log bins"}, "type": "category"},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
    )
    return fig


def _layout(fig: go.Figure, x_title: str, y_title: str, height: int = 300) -> go.Figure:
    fig.update_layout(
        margin={"l": 70, "r": 20, "t": 30, "b": 50},
        height=height,
        xaxis={"title": {"text": x_title}},
        yaxis={"title": {"text": y_title}},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        legend={"orientation": "h", "y": 1.12},
    )
    return fig


PERCENTILE_COLOURS = {"p50": "#1f77b4", "p90": "#ff7f0e", "p99": "#7f3c8d"}


def trend_figure(frame, measure: str, label: str) -> go.Figure:
    """p50/p90/p99 of one latency measure over time."""
    fig = go.Figure(
        [
            go.Scatter(
                x=frame["bucket"],
                y=frame[f"{measure}_{p}"],
                name=p,
                mode="lines+markers",
                line={"color": colour},
                marker={"size": 4},
                hovertemplate=f"%{{x}}<br>{p} %{{y:,.1f}} ms<extra></extra>",
            )
            for p, colour in PERCENTILE_COLOURS.items()
        ]
    )
    return _layout(fig, "time", f"{label} (ms)")


def _median_p90_figure(
    starts,
    p50,
    p90,
    counts,
    *,
    prefix: str,
    counted: str,
    digits: int,
    x_title: str,
    y_title: str,
) -> go.Figure:
    """Median and p90 lines over log buckets labelled by their lower edge ('1k+')."""
    labels = [f"{tokens_label(int(v))}+" for v in starts]
    fig = go.Figure(
        [
            go.Scatter(
                x=labels,
                y=p50,
                name="median",
                mode="lines+markers",
                customdata=counts,
                hovertemplate=f"{prefix} %{{x}}<br>median %{{y:,.{digits}f}} ms<br>"
                f"%{{customdata:,}} {counted}<extra></extra>",
            ),
            go.Scatter(
                x=labels,
                y=p90,
                name="p90",
                mode="lines+markers",
                hovertemplate=f"{prefix} %{{x}}<br>p90 %{{y:,.{digits}f}} ms<extra></extra>",
            ),
        ]
    )
    fig.update_xaxes(type="category")
    return _layout(fig, x_title, y_title)


def ttft_isl_figure(frame) -> go.Figure:
    """Median and p90 TTFT per ISL bin."""
    return _median_p90_figure(
        frame["isl_from"],
        frame["ttft_p50"],
        frame["ttft_p90"],
        frame["requests"],
        prefix="ISL",
        counted="requests",
        digits=0,
        x_title="input tokens (ISL bin, from)",
        y_title="time to first token (ms)",
    )


def itl_position_figure(frame) -> go.Figure:
    """Median and p90 inter-token latency by output-token position."""
    return _median_p90_figure(
        frame["position_from"],
        frame["itl_p50"],
        frame["itl_p90"],
        frame["gaps"],
        prefix="token",
        counted="gaps",
        digits=1,
        x_title="output token position (bucket, from)",
        y_title="inter-token latency (ms)",
    )


def _ms_label(ms: int) -> str:
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms} ms"


def e2e_figure(frame) -> go.Figure:
    """Requests per time-to-completion bin."""
    edges = [int(e) for e in frame["e2e_from_ms"]]
    labels = [f"{_ms_label(a)}–{_ms_label(b)}" for a, b in itertools.pairwise(edges)]
    labels.append(f"≥{_ms_label(edges[-1])}")
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=frame["requests"],
            marker={"color": "#3b5b92"},
            hovertemplate="%{x}<br>%{y:,} requests<extra></extra>",
        )
    )
    fig.update_xaxes(type="category")
    return _layout(fig, "time to completion (E2E)", "requests")


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
    return _layout(fig, "time", "requests/s")


WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


def weekday_hour_figure(matrix: np.ndarray, tz: str) -> go.Figure:
    """Requests per hour of day (x) and weekday (y) in the configured time zone."""
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
    return _layout(fig, f"hour of day ({tz})", "weekday", height=320)
