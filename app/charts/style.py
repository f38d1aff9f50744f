"""What every chart shares: token labels, bin positions, the layout and plotly's template."""

from __future__ import annotations

import functools
import itertools

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio


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


def bin_position(edges: tuple[int, ...], value: float) -> float:
    """Where a token count falls on a bin-index axis (bin k spans k-0.5 … k+0.5).

    Inside a bin the position is interpolated on a log scale for log bins (linearly in the
    first bin, which starts at 0), so a bound of 6,000 lands between the 4k and 8k marks."""
    k = int(np.searchsorted(edges, value, side="right")) - 1
    k = max(k, 0)
    if k >= len(edges) - 1:
        return float(k)  # the open-ended last bin
    lo, hi = edges[k], edges[k + 1]
    linear = len(set(np.diff(edges))) == 1
    if lo > 0 and not linear:
        frac = (np.log2(max(value, lo)) - np.log2(lo)) / (np.log2(hi) - np.log2(lo))
    else:
        frac = (value - lo) / (hi - lo)
    return k - 0.5 + float(frac)


@functools.cache
def template() -> dict:
    """Plotly's default template as plain JSON (the look every other figure has)."""
    return pio.templates[pio.templates.default].to_plotly_json()


def layout(fig: go.Figure, x_title: str, y_title: str, height: int = 300) -> go.Figure:
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


# One colour per percentile on every chart that draws percentiles as series (p90 is always
# the same orange), for any chart module to adopt.
PERCENTILE_COLOURS = {"p50": "#1f77b4", "p90": "#ff7f0e", "p95": "#d62728", "p99": "#7f3c8d"}
# Series split by a dimension: the busiest values in rank order, then "the rest" in grey.
SERIES_COLOURS = (
    "#4c78a8",
    "#54a24b",
    "#b279a2",
    "#e45756",
    "#72b7b2",
    "#9d755d",
    "#eeca3b",
    "#17becf",
)
OTHER_COLOUR = "#9a9a9a"


def series_colour(rank: int, other: bool = False) -> str:
    """The colour of the split series at `rank` (0: the busiest), grey for the rest."""
    return OTHER_COLOUR if other else SERIES_COLOURS[rank % len(SERIES_COLOURS)]


def nonnegative(fig: go.Figure, *axes: str) -> go.Figure:
    """Axes (e.g. "yaxis", "yaxis2") of counts, rates or durations start at 0: no negative
    tick, even for an empty or flat series."""
    fig.update_layout({axis: {"rangemode": "nonnegative"} for axis in axes or ("yaxis",)})
    return fig


def hover_text(name: str) -> str:
    """A stored value (a model, a tenant) as hover text: plotly reads <, > and & as markup
    and %{…} as a template."""
    text = name.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace("%", "&#37;")
