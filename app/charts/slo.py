"""The SLO ledger's figures: goodput per ISL × OSL cell, and goodput over time with its target."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from app.charts.heatmap import bin_axis
from app.charts.style import bin_labels, template

# Diverging, colour-blind safe (ColorBrewer RdBu): red below the target, white at it, blue above.
BELOW, AT, ABOVE = "#b2182b", "#f7f7f7", "#2166ac"
TARGET_COLOUR = "#d1495b"
FIXED_AXIS = {"automargin": False, "ticklabeloverflow": "allow"}


def diverging_scale(target: float) -> list[list]:
    """A 0..1 colour scale whose white midpoint sits at `target` (the SLO's share)."""
    t = min(max(target, 0.01), 0.99)
    return [
        [0.0, BELOW],
        [t / 2, "#ef8a62"],
        [t, AT],
        [t + (1 - t) / 2, "#67a9cf"],
        [1.0, ABOVE],
    ]


def goodput_heatmap_figure(
    edges: Sequence[int],
    judged: np.ndarray,
    goodput: np.ndarray,
    target: float,
    causes: Mapping[tuple[int, int], str] | None = None,
    not_measured: np.ndarray | None = None,
) -> dict:
    """ISL (x) by OSL (y) cells coloured by goodput on a scale centred on `target`.

    `judged[i][j]` is the cell's requests judged (good + missed), `goodput[i][j]` their share
    that met the SLO (NaN: none judged), `causes` the likely cause of a cell's misses. Hover
    gives the requests, goodput and cause. Empty outer bins are trimmed. A plain dict, as
    heatmap_figure, for the same first-paint reasons."""
    causes = causes or {}
    n = len(edges)
    used = judged > 0
    if not_measured is not None:
        used = used | (not_measured > 0)
    cols = np.flatnonzero(used.any(axis=1))  # ISL bins with requests
    rows = np.flatnonzero(used.any(axis=0))
    x_hi = int(cols.max()) + 1 if len(cols) else 1
    y_hi = int(rows.max()) + 1 if len(rows) else 1
    labels = bin_labels(tuple(edges))
    xl, yl = labels[:x_hi], labels[:y_hi]
    z, text, custom = [], [], []
    for j in range(y_hi):
        z_row, t_row, c_row = [], [], []
        for i in range(x_hi):
            g = goodput[i, j] if i < n and j < n else math.nan
            z_row.append(None if math.isnan(g) else round(float(g), 4))
            t_row.append(f"ISL {xl[i]} · OSL {yl[j]}")
            unmeasured = float(not_measured[i, j]) if not_measured is not None else 0.0
            c_row.append(
                [
                    float(judged[i, j]),
                    "–" if math.isnan(g) else f"{g:.1%}",
                    causes.get((i, j), "meets the target" if g >= target else "–")
                    if not math.isnan(g)
                    else "no request judged",
                    unmeasured,
                ]
            )
        z.append(z_row)
        text.append(t_row)
        custom.append(c_row)
    data = [
        {
            "type": "heatmap",
            "x": list(range(x_hi)),
            "y": list(range(y_hi)),
            "z": z,
            "zmin": 0.0,
            "zmax": 1.0,
            "text": text,
            "customdata": custom,
            "colorscale": diverging_scale(target),
            "colorbar": {
                "title": {"text": f"goodput (target {target:.0%})"},
                "tickformat": ".0%",
                "len": 0.9,
            },
            "hovertemplate": (
                "%{text} tokens<br>%{customdata[0]:,.0f} requests judged, "
                "%{customdata[1]} met the SLO<br>not measured: %{customdata[3]:,.0f}"
                "<br>%{customdata[2]}<extra></extra>"
            ),
            "xgap": 1,
            "ygap": 1,
        }
    ]
    layout = {
        "template": template(),
        "xaxis": bin_axis("y", None, xl, "input tokens (ISL), log bins"),
        "yaxis": bin_axis("x", None, yl, "output tokens (OSL), log bins"),
        "margin": {"l": 70, "r": 20, "t": 10, "b": 60},
        "height": 480,
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
    }
    return {"data": data, "layout": layout}


def goodput_time_figure(frame: pd.DataFrame, target: float | None) -> dict:
    """Goodput per time bucket (columns t, goodput, requests) with the target as a line."""
    xs = [t.isoformat() if hasattr(t, "isoformat") else str(t) for t in frame["t"]]
    ys = [None if pd.isna(v) else float(v) for v in frame["goodput"]]
    data: list[dict] = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": "goodput",
            "x": xs,
            "y": ys,
            "customdata": [float(v) for v in frame["requests"]],
            "hovertemplate": "%{x}<br>goodput %{y:.1%} of %{customdata:,.0f} requests"
            "<extra></extra>",
            "line": {"color": ABOVE, "width": 2},
            "marker": {"size": 4},
        }
    ]
    if target is not None and xs:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"target {target:.0%}",
                "x": [xs[0], xs[-1]],
                "y": [target, target],
                "line": {"color": TARGET_COLOUR, "dash": "dash", "width": 2},
                "hoverinfo": "name",
            }
        )
    low = min([v for v in ys if v is not None] + [target if target is not None else 1.0], default=0)
    layout = {
        "template": template(),
        "margin": {"l": 70, "r": 20, "t": 30, "b": 50},
        "height": 300,
        "xaxis": {"title": {"text": "time"}},
        "yaxis": {
            "title": {"text": "goodput"},
            "tickformat": ".0%",
            "range": [max(0.0, low - 0.05), 1.01],
        },
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "legend": {"orientation": "h", "y": 1.12},
    }
    return {"data": data, "layout": layout}
