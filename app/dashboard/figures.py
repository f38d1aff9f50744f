"""Figures built from analytics results by pure functions (shared with the weekly email)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from app.analytics.shapes import HeatMap

# Colour-blind-safe sequential scale; the lowest non-empty count is still visible.
HEAT_SCALE = "Cividis"
MARGIN_COLOUR = "#6c7a96"


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


@dataclass(frozen=True)
class Bounds:
    """A set of engine bounds drawn over the heat map, named in the legend by `label`."""

    label: str
    max_input_len: int | None = None
    max_seq_len: int | None = None
    colour: str = "#d1495b"  # stands out against every Cividis colour


def _span(used: np.ndarray, edges: tuple[int, ...], bound: int | None) -> int:
    """How many bins an axis shows: those with traffic, stretched to include a bound."""
    hi = int(used.max()) + 1 if len(used) else 1
    if bound:
        hi = max(hi, min(int(np.searchsorted(edges, bound, side="right")), len(edges)))
    return hi


def heatmap_figure(
    hm: HeatMap, *, percent: bool = False, bounds: Sequence[Bounds] = ()
) -> go.Figure:
    """ISL (x) by OSL (y) requests with marginal histograms; optionally an engine's bounds.

    Hover gives each cell's ranges, count and share of the window. Empty outer bins are
    trimmed, unless a bound lies beyond them: then the axes stretch to show the headroom."""
    counts = hm.counts.T  # rows are OSL bins (y), columns ISL bins (x)
    total = hm.total or 1
    max_in = max((b.max_input_len or 0 for b in bounds), default=0) or None
    max_seq = max((b.max_seq_len or 0 for b in bounds), default=0) or None
    x_hi = _span(np.flatnonzero(counts.sum(axis=0)), hm.isl_edges, max_in or max_seq)
    y_hi = _span(np.flatnonzero(counts.sum(axis=1)), hm.osl_edges, max_seq)
    xl, yl = bin_labels(hm.isl_edges)[:x_hi], bin_labels(hm.osl_edges)[:y_hi]
    cells = counts[:y_hi, :x_hi]
    values = cells / total * 100 if percent else cells
    z = np.where(cells > 0, values, np.nan)
    share = cells / total * 100
    unit = "% of requests" if percent else "requests"
    xs, ys = np.arange(x_hi), np.arange(y_hi)
    fig = make_subplots(
        rows=2,
        cols=2,
        shared_xaxes=True,
        shared_yaxes=True,
        column_widths=[0.85, 0.15],
        row_heights=[0.18, 0.82],
        horizontal_spacing=0.012,
        vertical_spacing=0.02,
    )
    text = np.array([[f"ISL {x} · OSL {y}" for x in xl] for y in yl])
    fig.add_trace(
        go.Heatmap(
            x=xs,
            y=ys,
            z=z,
            text=text,
            customdata=np.dstack([cells, share]),
            colorscale=HEAT_SCALE,
            colorbar={"title": {"text": unit}, "len": 0.8, "y": 0.41, "x": 1.02},
            hovertemplate=(
                "%{text} tokens<br>%{customdata[0]:,} requests "
                "(%{customdata[1]:.2f}%)<extra></extra>"
            ),
            xgap=1,
            ygap=1,
        ),
        row=2,
        col=1,
    )
    scale = 100 / total if percent else 1
    for axis, along, sums, labels, row, col in (
        ("ISL", xs, cells.sum(axis=0), xl, 1, 1),  # above the map, along ISL
        ("OSL", ys, cells.sum(axis=1), yl, 2, 2),  # right of the map, along OSL
    ):
        size = sums * scale
        fig.add_trace(
            go.Bar(
                x=along if axis == "ISL" else size,
                y=size if axis == "ISL" else along,
                orientation="v" if axis == "ISL" else "h",
                text=labels,
                textposition="none",
                customdata=sums / total * 100,
                marker_color=MARGIN_COLOUR,
                hovertemplate=f"{axis} %{{text}} tokens<br>%{{customdata:.2f}}% of requests"
                "<extra></extra>",
                showlegend=False,
            ),
            row=row,
            col=col,
        )
    for b in bounds:
        _draw_bounds(fig, hm, b, y_hi)
    fig.update_layout(
        margin={"l": 70, "r": 20, "t": 10, "b": 60},
        height=520,
        bargap=0.08,
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
        showlegend=bool(bounds),
        legend={"orientation": "h", "x": 0, "y": -0.16},
    )
    tick = {"tickmode": "array", "showgrid": False, "zeroline": False}
    fig.update_xaxes(range=[-0.5, x_hi - 0.5], **tick, row=2, col=1)
    fig.update_xaxes(tickvals=list(xs), ticktext=xl, row=2, col=1)
    fig.update_xaxes(title_text="input tokens (ISL), log bins", row=2, col=1)
    fig.update_yaxes(range=[-0.5, y_hi - 0.5], **tick, tickvals=list(ys), ticktext=yl, row=2, col=1)
    fig.update_yaxes(title_text="output tokens (OSL), log bins", row=2, col=1)
    fig.update_yaxes(title_text=unit if percent else "requests", row=1, col=1, nticks=3)
    fig.update_xaxes(title_text=unit if percent else "requests", row=2, col=2, nticks=3)
    return fig


def _draw_bounds(fig: go.Figure, hm: HeatMap, bounds: Bounds, y_hi: int) -> None:
    """max_input_len as a vertical line; ISL + OSL = max_seq_len as a curve."""
    top = y_hi - 0.5
    if bounds.max_input_len:
        x = bin_position(hm.isl_edges, bounds.max_input_len)
        fig.add_trace(
            go.Scatter(
                x=[x, x],
                y=[-0.5, top],
                mode="lines",
                line={"color": bounds.colour, "dash": "dash", "width": 2},
                name=f"{bounds.label}: max_input_len {bounds.max_input_len:,}",
                hoverinfo="name",
            ),
            row=2,
            col=1,
        )
    if bounds.max_seq_len:
        seq = bounds.max_seq_len
        isl = np.unique(np.round(np.geomspace(1, seq - 1, 160)).astype(int))
        osl = seq - isl
        fig.add_trace(
            go.Scatter(
                x=[bin_position(hm.isl_edges, v) for v in isl],
                y=[bin_position(hm.osl_edges, v) for v in osl],
                mode="lines",
                line={"color": bounds.colour, "width": 2},
                name=f"{bounds.label}: ISL + OSL = max_seq_len {seq:,}",
                hoverinfo="name",
            ),
            row=2,
            col=1,
        )


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
    return _layout(fig, f"hour of day ({tz})", "weekday", height=340)


def _runs(hours: Sequence[int]) -> list[list[int]]:
    """Consecutive runs of hours (a window wrapping midnight is two runs)."""
    runs: list[list[int]] = []
    for h in sorted(hours):
        if runs and h == runs[-1][-1] + 1:
            runs[-1].append(h)
        else:
            runs.append([h])
    return runs


def replicas_figure(plans: Sequence[tuple[str, list[int]]]) -> go.Figure:
    """Replicas per hour of day for each plan, as steps."""
    fig = go.Figure()
    for (name, per_hour), colour in zip(plans, ("#6c7a96", "#e0b23e", "#2a9d8f"), strict=False):
        fig.add_trace(
            go.Scatter(
                x=list(range(25)),
                y=[*per_hour, per_hour[-1]],
                mode="lines",
                line={"shape": "hv", "color": colour, "width": 3 if name == "seasonal" else 2},
                name=name,
                hovertemplate=f"{name}: %{{y}} replicas from %{{x}}:00<extra></extra>",
            )
        )
    fig.update_xaxes(
        tickvals=list(range(0, 25, 2)), ticktext=[f"{h:02d}:00" for h in range(0, 25, 2)]
    )
    fig.update_yaxes(rangemode="tozero", dtick=1)
    return _layout(fig, "hour of day", "replicas", height=300)


MEMORY_PARTS = (
    ("weights", "#4c6a92"),
    ("KV cache", "#e0b23e"),
    ("overhead", "#a05a7b"),
    ("unused", "#d9dee8"),
)


def memory_figure(rows: list[tuple[str, dict[str, float]]]) -> go.Figure:
    """Stacked bars of one replica's memory in GiB: weights, KV cache, overhead, unused."""
    fig = go.Figure()
    labels = [label for label, _ in rows]
    for part, colour in MEMORY_PARTS:
        values = [parts.get(part, 0.0) for _, parts in rows]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=values,
                name=part,
                orientation="h",
                marker_color=colour,
                text=[f"{v:,.1f}" if v >= 1 else "" for v in values],
                textposition="inside",
                hovertemplate=f"{part}: %{{x:,.2f}} GiB<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        height=80 + 46 * len(rows),
        margin={"l": 120, "r": 20, "t": 10, "b": 40},
        xaxis={"title": {"text": "GiB per replica"}},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": -0.45, "traceorder": "normal"},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
    )
    return fig
