"""The Seasonal page's per-window heat maps on the same bins and one colour scale, so a cell and a
colour mean the same in every window; the hour × weekday matrix with the windows outlined."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import plotly.graph_objects as go

from app.charts.heatmap import heatmap_figure, heatmap_span
from app.charts.traffic import hour_runs, weekday_hour_figure

if TYPE_CHECKING:  # a type only: the figures take the frame, never the query
    from app.analytics.shapes import HeatMap

# Each window's outline: a dash pattern and a width as well as a hue, so the two stay apart
# for colour-blind readers and in greyscale print (WCAG 1.4.1, colour not the only cue).
WINDOW_LINES = (
    {"color": "#2a9d8f", "dash": "solid", "width": 4},
    {"color": "#d1495b", "dash": "dash", "width": 3},
)
# How far (in hours) each outline sits inside its window: two windows that meet at an hour
# draw two lines side by side there, not one over the other.
OUTLINE_INSET = 0.08
SHARE_UNIT = "% of the window's requests"
COLORBAR_ROOM = 120  # px right of each map: the colour bar's width with its title


def _heat(fig: dict) -> dict:
    return next(t for t in fig["data"] if t.get("type") == "heatmap")


def _peak(values: list[list[float | None]]) -> float:
    return max((v for row in values for v in row if v is not None), default=0.0)


def shared_heat_scale(figures: Sequence[dict]) -> tuple[list[dict], float]:
    """Copies of heat maps (app/charts/heatmap, in percent) with one colour range, 0 to the
    largest cell share of any, and one colour bar (on the last); their marginal histograms share
    their ranges too. Returns the figures and that largest share."""
    out = [copy.deepcopy(f) for f in figures]
    if not out:
        return out, 0.0
    top = max(_peak(_heat(f)["z"]) for f in out) or 1.0
    isl = max((max(t["y"], default=0) for f in out for t in f["data"] if _bars(t, "v")), default=0)
    osl = max((max(t["x"], default=0) for f in out for t in f["data"] if _bars(t, "h")), default=0)
    for i, f in enumerate(out):
        heat = _heat(f)
        heat.update({"zmin": 0.0, "zmax": top, "zauto": False})
        heat["showscale"] = i == len(out) - 1
        heat["colorbar"] = {
            **heat.get("colorbar", {}),
            "title": {"text": SHARE_UNIT, "side": "right"},
        }
        # Every map keeps room for the one colour bar, so the maps are the same size.
        f["layout"]["margin"] = {**f["layout"].get("margin", {}), "r": COLORBAR_ROOM}
        # The maps' margins on one range as well: a bar's length means the same share.
        if isl:
            f["layout"]["yaxis"]["range"] = [0, isl * 1.05]
        if osl:
            f["layout"]["xaxis4"]["range"] = [0, osl * 1.05]
    return out, top


def _bars(trace: dict, orientation: str) -> bool:
    return trace.get("type") == "bar" and trace.get("orientation") == orientation


def window_heatmaps(maps: Sequence[HeatMap]) -> tuple[list[dict], float]:
    """Heat maps of the windows' traffic (in percent) on the same bins (one span: the widest of
    any along each axis) and one colour scale (shared_heat_scale). Returns the figures and the
    largest cell share."""
    if not maps:
        return [], 0.0
    first = maps[0]
    for hm in maps[1:]:
        if hm.isl_edges != first.isl_edges or hm.osl_edges != first.osl_edges:
            raise ValueError(
                "the windows' heat maps have different bin edges; build them with the same "
                "edges (one call of app.analytics.shapes.heatmap per window, same settings)"
            )
    spans = [heatmap_span(hm) for hm in maps]
    span = (max(x for x, _ in spans), max(y for _, y in spans))
    return shared_heat_scale([heatmap_figure(hm, percent=True, span=span) for hm in maps])


def windows_matrix_figure(
    matrix: np.ndarray, tz: str, windows: Sequence[tuple[str, tuple[int, ...]]]
) -> go.Figure:
    """Requests per hour and weekday (app.charts.traffic) with each window (label, hours)
    outlined in its own hue, dash and width, named in the legend with the same line."""
    fig = weekday_hour_figure(matrix, tz)
    for (label, hours), line in zip(windows, WINDOW_LINES, strict=False):
        for run in hour_runs(hours):
            fig.add_shape(
                type="rect",
                x0=run[0] - 0.5 + OUTLINE_INSET,
                x1=run[-1] + 0.5 - OUTLINE_INSET,
                y0=-0.5 + OUTLINE_INSET,
                y1=6.5 - OUTLINE_INSET,
                line=line,
                fillcolor="rgba(0,0,0,0)",
            )
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=line, name=label))
    return fig
