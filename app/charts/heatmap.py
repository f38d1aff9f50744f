"""The ISL x OSL heat map with its marginal histograms and an engine's bounds."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from app.charts.style import bin_labels, bin_position, template

if TYPE_CHECKING:  # a type only: the figures take the frame, never the query
    from app.analytics.shapes import HeatMap

# Colour-blind-safe sequential scale; the lowest non-empty count is still visible.
HEAT_SCALE = "Cividis"
MARGIN_COLOUR = "#6c7a96"


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


def heatmap_figure(
    hm: HeatMap,
    *,
    percent: bool = False,
    bounds: Sequence[Bounds] = (),
    span: tuple[int, int] | None = None,
) -> dict:
    """ISL (x) by OSL (y) requests with marginal histograms; optionally an engine's bounds.

    Hover gives each cell's ranges, count and share of the window, and each margin bar's range,
    count and share. Empty outer bins are trimmed, unless a bound lies beyond them: then the
    axes stretch to show the headroom. `span` (ISL bins, OSL bins) fixes how many bins each
    axis shows instead, so maps side by side have the same bins (see heatmap_span).

    Built as a plain dict, not graph objects: this figure is on the dashboard's first paint,
    and validating it through graph objects cost ~80 ms of the server's GIL per page load.
    Axis margins are fixed (no automargin) and tick labels never hidden, which spares
    plotly.js a second layout pass in the browser; tests validate the dict with go.Figure."""
    counts = hm.counts.T  # rows are OSL bins (y), columns ISL bins (x)
    total = hm.total or 1
    x_hi, y_hi = span or heatmap_span(hm, bounds)
    if not (1 <= x_hi <= len(hm.isl_edges) and 1 <= y_hi <= len(hm.osl_edges)):
        raise ValueError(
            f"span {x_hi} × {y_hi} bins is outside the heat map's {len(hm.isl_edges)} × "
            f"{len(hm.osl_edges)}: give at least one and at most every bin per axis"
        )
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
        "template": template(),
        "xaxis": _margin_axis("y", X_MAP, matches="x3"),  # the ISL margin shares the map's x
        "yaxis": _margin_axis("x", Y_TOP, title=unit),
        "xaxis3": bin_axis("y3", X_MAP, xl, "input tokens (ISL), log bins"),
        "yaxis3": bin_axis("x3", Y_MAP, yl, "output tokens (OSL), log bins"),
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


def heatmap_span(hm: HeatMap, bounds: Sequence[Bounds] = ()) -> tuple[int, int]:
    """The bins a heat map shows along ISL and OSL: those up to the last with traffic,
    stretched to include a bound. The larger of two maps' spans shows both on the same bins."""
    counts = hm.counts.T
    max_in = max((b.max_input_len or 0 for b in bounds), default=0) or None
    max_seq = max((b.max_seq_len or 0 for b in bounds), default=0) or None
    x_hi = _span(np.flatnonzero(counts.sum(axis=0)), hm.isl_edges, max_in or max_seq)
    y_hi = _span(np.flatnonzero(counts.sum(axis=1)), hm.osl_edges, max_seq)
    return x_hi, y_hi


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
            # Its ticks are bin indices, not the map's bins: grid lines there would mislead
            # (white on white in the light theme, but drawn on the dark one).
            "showgrid": False,
            "zeroline": False,
            **FIXED_AXIS,
        }
    # A count or share is never negative: no tick below 0, even for an empty margin.
    return {
        "anchor": anchor,
        "domain": domain,
        "title": {"text": title},
        "nticks": 3,
        "rangemode": "nonnegative",
        **FIXED_AXIS,
    }


def bin_axis(anchor: str, domain: list[float] | None, labels: list[str], title: str) -> dict:
    """A heat map axis: one tick per bin, labelled with the bin's token range (`domain`: its
    share of the figure, None for all of it)."""
    return {
        "anchor": anchor,
        **({"domain": domain} if domain is not None else {}),
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
        "name": f"{axis} margin",
        "x": along if orientation == "v" else size,
        "y": size if orientation == "v" else along,
        "orientation": orientation,
        "text": labels,
        "textposition": "none",
        "customdata": np.column_stack([sums, sums / total * 100]).tolist(),
        "marker": {"color": MARGIN_COLOUR},
        # The bin's range, then its requests and their share, whichever the bars are drawn in.
        "hovertemplate": f"{axis} %{{text}} tokens<br>%{{customdata[0]:,}} requests "
        "(%{customdata[1]:.2f}% of the window)<extra></extra>",
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
