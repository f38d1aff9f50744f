"""Figures built from analytics results by pure functions (shared with the weekly email)."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio

if TYPE_CHECKING:  # a type only: the figures take the frame, never the query
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


# The heat map's subplots, as make_subplots would place them: the map bottom left, the ISL
# margin above it, the OSL margin right of it (column widths .85/.15 with a .012 gap, row
# heights .18/.82 with a .02 gap). The empty top-right cell gets no axes at all.
X_MAP, X_SIDE = [0.0, 0.8398], [0.8518, 1.0]
Y_MAP, Y_TOP = [0.0, 0.8036], [0.8236, 1.0]


@functools.cache
def _template() -> dict:
    """Plotly's default template as plain JSON (the look every other figure has)."""
    return pio.templates[pio.templates.default].to_plotly_json()


def heatmap_figure(hm: HeatMap, *, percent: bool = False, bounds: Sequence[Bounds] = ()) -> dict:
    """ISL (x) by OSL (y) requests with marginal histograms; optionally an engine's bounds.

    Hover gives each cell's ranges, count and share of the window. Empty outer bins are
    trimmed, unless a bound lies beyond them: then the axes stretch to show the headroom.

    Built as a plain dict, not graph objects: this figure is on the dashboard's first paint,
    and validating it through graph objects cost ~80 ms of the server's GIL per page load.
    Axis margins are fixed (no automargin) and tick labels never hidden, which spares
    plotly.js a second layout pass in the browser; tests validate the dict with go.Figure."""
    counts = hm.counts.T  # rows are OSL bins (y), columns ISL bins (x)
    total = hm.total or 1
    max_in = max((b.max_input_len or 0 for b in bounds), default=0) or None
    max_seq = max((b.max_seq_len or 0 for b in bounds), default=0) or None
    x_hi = _span(np.flatnonzero(counts.sum(axis=0)), hm.isl_edges, max_in or max_seq)
    y_hi = _span(np.flatnonzero(counts.sum(axis=1)), hm.osl_edges, max_seq)
    xl, yl = bin_labels(hm.isl_edges)[:x_hi], bin_labels(hm.osl_edges)[:y_hi]
    cells = counts[:y_hi, :x_hi]
    share = cells / total * 100
    values = share if percent else cells
    unit = "% of requests" if percent else "requests"
    xs, ys = list(range(x_hi)), list(range(y_hi))
    scale = 100 / total if percent else 1
    isl_sums, osl_sums = cells.sum(axis=0), cells.sum(axis=1)
    data: list[dict] = [
        {
            "type": "heatmap",
            "x": xs,
            "y": ys,
            "z": [
                [v if c > 0 else None for v, c in zip(vr, cr, strict=True)]
                for vr, cr in zip(values.tolist(), cells.tolist(), strict=True)
            ],
            "text": [[f"ISL {x} · OSL {y}" for x in xl] for y in yl],
            "customdata": np.dstack([cells, share]).tolist(),
            "colorscale": HEAT_SCALE,
            "colorbar": {"title": {"text": unit}, "len": 0.8, "y": 0.41, "x": 1.02},
            "hovertemplate": (
                "%{text} tokens<br>%{customdata[0]:,} requests "
                "(%{customdata[1]:.2f}%)<extra></extra>"
            ),
            "xgap": 1,
            "ygap": 1,
            "xaxis": "x3",
            "yaxis": "y3",
        },
        _margin_bars("ISL", xs, isl_sums, scale, total, xl, "v", "x", "y"),
        _margin_bars("OSL", ys, osl_sums, scale, total, yl, "h", "x4", "y4"),
    ]
    for b in bounds:
        data.extend(_bound_lines(hm, b, y_hi))
    layout = {
        "template": _template(),
        "xaxis": _margin_axis("y", X_MAP, matches="x3"),  # the ISL margin shares the map's x
        "yaxis": _margin_axis("x", Y_TOP, title=unit),
        "xaxis3": _bin_axis("y3", X_MAP, xl, "input tokens (ISL), log bins"),
        "yaxis3": _bin_axis("x3", Y_MAP, yl, "output tokens (OSL), log bins"),
        "xaxis4": _margin_axis("y4", X_SIDE, title=unit),
        "yaxis4": _margin_axis("x4", Y_MAP, matches="y3"),  # the OSL margin shares the map's y
        "margin": {"l": 70, "r": 20, "t": 10, "b": 60},
        "height": 520,
        "bargap": 0.08,
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "showlegend": bool(bounds),
        "legend": {"orientation": "h", "x": 0, "y": -0.16},
    }
    return {"data": data, "layout": layout}


# Axes keep the figure's margins (no automargin pass) and never hide a tick label.
FIXED_AXIS = {"automargin": False, "ticklabeloverflow": "allow"}


def _margin_axis(
    anchor: str, domain: list[float], *, title: str | None = None, matches: str | None = None
) -> dict:
    """A marginal histogram's axis: its counts (titled, three ticks), or the map's bins it
    shares (`matches`, no labels of its own)."""
    if matches:
        return {
            "anchor": anchor,
            "domain": domain,
            "matches": matches,
            "showticklabels": False,
            **FIXED_AXIS,
        }
    return {"anchor": anchor, "domain": domain, "title": {"text": title}, "nticks": 3, **FIXED_AXIS}


def _bin_axis(anchor: str, domain: list[float], labels: list[str], title: str) -> dict:
    """A heat map axis: one tick per bin, labelled with the bin's token range."""
    return {
        "anchor": anchor,
        "domain": domain,
        "range": [-0.5, len(labels) - 0.5],
        "tickmode": "array",
        "tickvals": list(range(len(labels))),
        "ticktext": labels,
        "title": {"text": title},
        "showgrid": False,
        "zeroline": False,
        **FIXED_AXIS,
    }


def _margin_bars(
    axis: str,
    along: list[int],
    sums: np.ndarray,
    scale: float,
    total: int,
    labels: list[str],
    orientation: str,
    xaxis: str,
    yaxis: str,
) -> dict:
    """One marginal histogram: above the map along ISL (vertical bars) or right of it along
    OSL (horizontal bars)."""
    size = (sums * scale).tolist()
    return {
        "type": "bar",
        "x": along if orientation == "v" else size,
        "y": size if orientation == "v" else along,
        "orientation": orientation,
        "text": labels,
        "textposition": "none",
        "customdata": (sums / total * 100).tolist(),
        "marker": {"color": MARGIN_COLOUR},
        "hovertemplate": f"{axis} %{{text}} tokens<br>%{{customdata:.2f}}% of requests"
        "<extra></extra>",
        "showlegend": False,
        "xaxis": xaxis,
        "yaxis": yaxis,
    }


def _bound_lines(hm: HeatMap, bounds: Bounds, y_hi: int) -> list[dict]:
    """max_input_len as a vertical line; ISL + OSL = max_seq_len as a curve."""
    top = y_hi - 0.5
    lines = []
    on_map = {"type": "scatter", "mode": "lines", "hoverinfo": "name", "xaxis": "x3", "yaxis": "y3"}
    if bounds.max_input_len:
        x = bin_position(hm.isl_edges, bounds.max_input_len)
        lines.append(
            {
                **on_map,
                "x": [x, x],
                "y": [-0.5, top],
                "line": {"color": bounds.colour, "dash": "dash", "width": 2},
                "name": f"{bounds.label}: max_input_len {bounds.max_input_len:,}",
            }
        )
    if bounds.max_seq_len:
        seq = bounds.max_seq_len
        isl = np.unique(np.round(np.geomspace(1, seq - 1, 160)).astype(int))
        osl = seq - isl
        lines.append(
            {
                **on_map,
                "x": [bin_position(hm.isl_edges, v) for v in isl],
                "y": [bin_position(hm.osl_edges, v) for v in osl],
                "line": {"color": bounds.colour, "width": 2},
                "name": f"{bounds.label}: ISL + OSL = max_seq_len {seq:,}",
            }
        )
    return lines


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
