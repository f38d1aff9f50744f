"""Benchmark vs production: the two ISL × OSL heat maps side by side on one colour scale, and
benchmark ÷ production latency per cell."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from app.charts.heatmap import HEAT_SCALE, bin_axis
from app.charts.style import PERCENTILE_COLOURS, bin_labels, template

if TYPE_CHECKING:  # types only: the figures take frames and maps, never the query
    import pandas as pd

    from app.analytics.shapes import HeatMap

# The two maps' shares of the figure's width, the colour bar right of the second.
LEFT, RIGHT = [0.0, 0.43], [0.5, 0.93]
# One colour per percentile on every chart (app/charts/style.py): p90 is p90 everywhere.
QUANTILE_COLOURS = {k: PERCENTILE_COLOURS[k] for k in ("p50", "p90", "p99")}
SAME_COLOUR = "#6c7a96"
FIXED_AXIS = {"automargin": False, "ticklabeloverflow": "allow"}


def _shares(hm: HeatMap) -> np.ndarray:
    total = float(hm.counts.sum())
    return hm.counts / total * 100 if total > 0 else np.zeros(hm.counts.shape)


def shape_pair_figure(
    production: HeatMap, benchmark: HeatMap, names: tuple[str, str] = ("production", "benchmark")
) -> dict:
    """Production's ISL (x) by OSL (y) shares beside the benchmark's, on the same bins and one
    colour scale (0 to the largest share of either map), so a colour means the same share on
    both. Empty cells stay blank; outer bins empty on both maps are trimmed (from both ends:
    the axes' ticks name the bins shown).
    Hover gives a cell's ranges, its share and requests, and the other map's share there.

    A plain dict, as heatmap_figure, for the same first-paint reasons."""
    if production.isl_edges != benchmark.isl_edges or production.osl_edges != benchmark.osl_edges:
        raise ValueError("the two heat maps must share their bins")
    used = (production.counts + benchmark.counts) > 0
    cols, rows = np.flatnonzero(used.any(axis=1)), np.flatnonzero(used.any(axis=0))
    x_lo, x_hi = (int(cols.min()), int(cols.max()) + 1) if len(cols) else (0, 1)
    y_lo, y_hi = (int(rows.min()), int(rows.max()) + 1) if len(rows) else (0, 1)
    xl = bin_labels(production.isl_edges)[x_lo:x_hi]
    yl = bin_labels(production.osl_edges)[y_lo:y_hi]
    maps = (production, benchmark)
    pct = [_shares(hm)[x_lo:x_hi, y_lo:y_hi].T for hm in maps]  # rows are OSL bins (y)
    counts = [hm.counts[x_lo:x_hi, y_lo:y_hi].T for hm in maps]
    top = max(float(p.max()) for p in pct) or 1.0
    data = []
    for k, (name, axis) in enumerate(zip(names, ("", "2"), strict=True)):
        other = pct[1 - k]
        data.append(
            {
                "type": "heatmap",
                "name": name,
                "x": list(range(len(xl))),
                "y": list(range(len(yl))),
                "z": [
                    [round(v, 4) if c > 0 else None for v, c in zip(vr, cr, strict=True)]
                    for vr, cr in zip(pct[k].tolist(), counts[k].tolist(), strict=True)
                ],
                "text": [[f"ISL {x} · OSL {y}" for x in xl] for y in yl],
                "customdata": np.dstack([counts[k], other]).tolist(),
                "coloraxis": "coloraxis",
                "hovertemplate": (
                    f"%{{text}} tokens<br>%{{z:.2f}}% of {name} (%{{customdata[0]:,}} requests)"
                    f"<br>{names[1 - k]}: %{{customdata[1]:.2f}}%<extra></extra>"
                ),
                "xgap": 1,
                "ygap": 1,
                "xaxis": f"x{axis}",
                "yaxis": f"y{axis}",
            }
        )
    title = [
        f"{name} · {int(hm.counts.sum()):,} requests" for name, hm in zip(names, maps, strict=True)
    ]
    layout = {
        "template": template(),
        "coloraxis": {
            "colorscale": HEAT_SCALE,
            "cmin": 0,
            "cmax": round(top, 4),
            "colorbar": {"title": {"text": "% of requests"}, "len": 0.9, "x": 0.95},
        },
        "xaxis": bin_axis("y", LEFT, xl, "input tokens (ISL)"),
        "yaxis": bin_axis("x", None, yl, "output tokens (OSL)"),
        "xaxis2": bin_axis("y2", RIGHT, xl, "input tokens (ISL)"),
        "yaxis2": {
            **bin_axis("x2", None, yl, ""),
            "matches": "y",
            "showticklabels": False,
        },
        "annotations": [
            {
                "text": f"<b>{text}</b>",
                "xref": "paper",
                "yref": "paper",
                "x": (domain[0] + domain[1]) / 2,
                "y": 1.0,
                "yanchor": "bottom",
                "showarrow": False,
                "font": {"size": 13},
            }
            for text, domain in zip(title, (LEFT, RIGHT), strict=True)
        ],
        "margin": {"l": 70, "r": 20, "t": 30, "b": 60},
        "height": 440,
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "showlegend": False,
    }
    return {"data": data, "layout": layout}


def _span(values: list[float]) -> list[float]:
    """A log axis range (log10) holding the values and 1, with some room."""
    found = [v for v in values if v > 0] or [1.0]
    lo, hi = min(min(found), 1.0) / 1.25, max(max(found), 1.0) * 1.25
    return [float(np.log10(lo)), float(np.log10(hi))]


def ratio_figure(cells: pd.DataFrame, limit: int = 12) -> dict:
    """Benchmark ÷ production of TTFT (left) and ITL (right) at p50, p90 and p99 per cell, as
    horizontal bars from the line at 1 (the same as production) on log axes: right of it the
    benchmark is slower, left of it faster.

    `cells` is the comparison's cell frame (app/services/compare.py join_cells: `shape`,
    `production_requests` and `ratio_<ttft|itl>_<p50|p90|p99>`); the `limit` cells with a
    ratio that production sends most, busiest at the top."""
    ratio_cols = [f"ratio_{m}_{q}" for m in ("ttft", "itl") for q in QUANTILE_COLOURS]
    kept = cells[cells[ratio_cols].notna().any(axis=1)].head(limit).iloc[::-1]
    labels = [s.replace(" × ", " ×<br>") for s in kept["shape"]]
    data = []
    spans = {}
    for measure, suffix in (("ttft", ""), ("itl", "2")):
        found: list[float] = []
        # Horizontal groups stack their traces upwards: p99 first puts p50 on top.
        for q in reversed(QUANTILE_COLOURS):
            ratios = [None if v != v else round(float(v), 4) for v in kept[f"ratio_{measure}_{q}"]]
            found += [r for r in ratios if r is not None]
            data.append(
                {
                    "type": "bar",
                    "orientation": "h",
                    "name": q,
                    "legendgroup": q,
                    "showlegend": suffix == "",
                    # Each bar spans 1 → its ratio: `base` 1 and the length beyond it.
                    "base": 1,
                    "x": [None if r is None else r - 1 for r in ratios],
                    "y": labels,
                    "customdata": ratios,
                    "marker": {"color": QUANTILE_COLOURS[q]},
                    "hovertemplate": f"%{{y}}<br>{measure.upper()} {q}: benchmark "
                    "%{customdata:.2f}× production<extra></extra>",
                    "xaxis": f"x{suffix}",
                    "yaxis": f"y{suffix}",
                }
            )
        spans[measure] = _span(found)

    def log_axis(domain: list[float], title: str, span: list[float], anchor: str) -> dict:
        return {
            "type": "log",
            "domain": domain,
            "range": span,
            "title": {"text": title},
            "zeroline": False,
            "anchor": anchor,
            **FIXED_AXIS,
        }

    layout = {
        "template": template(),
        "barmode": "group",
        "bargap": 0.25,
        "xaxis": log_axis([0.0, 0.47], "TTFT: benchmark ÷ production", spans["ttft"], "y"),
        "xaxis2": log_axis([0.53, 1.0], "ITL: benchmark ÷ production", spans["itl"], "y2"),
        "yaxis": {"anchor": "x", "automargin": True},
        "yaxis2": {"anchor": "x2", "matches": "y", "showticklabels": False},
        "shapes": [
            {
                "type": "line",
                "xref": ref,
                "yref": "paper",
                "x0": 1,
                "x1": 1,
                "y0": 0,
                "y1": 1,
                "line": {"color": SAME_COLOUR, "dash": "dash", "width": 1.5},
            }
            for ref in ("x", "x2")
        ],
        "margin": {"l": 140, "r": 20, "t": 40, "b": 50},
        "height": max(260, 60 + 46 * len(kept)),
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        "legend": {
            "orientation": "h",
            "x": 0,
            "y": 1.02,
            "yanchor": "bottom",
            "traceorder": "reversed",
        },
    }
    return {"data": data, "layout": layout}
