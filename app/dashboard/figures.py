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
