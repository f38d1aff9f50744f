"""The heat map figure (app/charts/heatmap), read back through plotly's graph objects (which
validates every attribute against plotly's schema)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from app.analytics.shapes import HeatMap
from app.charts.heatmap import Bounds, heatmap_figure, heatmap_span


def _heatmap(hm: HeatMap, **kwargs) -> go.Figure:
    """The page's plain-dict heat map, read back through graph objects: that validates every
    attribute against plotly's schema (a misspelt one raises)."""
    return go.Figure(heatmap_figure(hm, **kwargs))


def test_heatmap_figure_trims_empty_outer_bins_and_keeps_counts():
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[0, 1] = 3
    counts[2, 0] = 1
    fig = _heatmap(HeatMap((0, 16, 32, 64), (0, 16, 32, 64), counts, 4))
    heat, isl_margin, osl_margin = fig.data[:3]
    assert list(heat.x) == [0, 1, 2]  # ISL bins up to the last used one
    assert list(fig.layout.xaxis3.ticktext) == ["0–16", "16–32", "32–64"]
    assert list(fig.layout.yaxis3.ticktext) == ["0–16", "16–32"]
    z = np.asarray(heat.z, dtype=float)
    assert np.nansum(z) == 4 and np.isnan(z[0, 1])  # empty cells are blank, not zero-coloured
    # The marginal histograms are the heat map's row and column sums.
    assert list(isl_margin.y) == [3, 0, 1] and list(osl_margin.x) == [1, 3]
    assert len(fig.data) == 3  # no bounds, no lines
    # Fixed margins: plotly.js draws the map once, without a second pass to fit tick labels.
    assert all(fig.layout[a].automargin is False for a in ("xaxis", "xaxis3", "yaxis3"))
    assert "xaxis2" not in fig.layout.to_plotly_json()  # the empty corner cell has no axes


def test_heatmap_figure_in_percent():
    counts = np.array([[1, 3], [0, 4]], dtype=np.int64)
    fig = _heatmap(HeatMap((0, 16), (0, 16), counts, 8), percent=True)
    z = np.asarray(fig.data[0].z, dtype=float)
    assert np.nansum(z) == 100.0 and z[1, 0] == 37.5  # OSL bin 1, ISL bin 0: 3 of 8
    assert sum(fig.data[1].y) == 100.0 and sum(fig.data[2].x) == 100.0
    assert fig.data[0].colorbar.title.text == "% of requests"


def test_heatmap_figure_draws_engine_bounds_and_stretches_to_them():
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[0, 0] = 5
    hm = HeatMap((0, 16, 32, 64), (0, 16, 32, 64), counts, 5)
    fig = _heatmap(hm, bounds=[Bounds("e1", max_input_len=32, max_seq_len=48)])
    line, curve = fig.data[3], fig.data[4]
    assert "max_input_len 32" in line.name and list(line.x) == [1.5, 1.5]
    assert "max_seq_len 48" in curve.name
    # Along the curve ISL + OSL stays 48: its first point is ISL 1 / OSL 47 (OSL bin 2).
    assert curve.x[0] < 0 < curve.y[0] - 2 + 0.5
    # The axes reach the bins holding the bounds, although traffic is only in the first one.
    assert len(fig.layout.xaxis3.ticktext) == 3 and len(fig.layout.yaxis3.ticktext) == 3


def test_the_margins_hover_with_range_count_and_share_and_count_from_zero():
    counts = np.array([[1, 3], [0, 4]], dtype=np.int64)  # ISL bin 0: 4 requests, bin 1: 4
    for percent in (False, True):
        fig = _heatmap(HeatMap((0, 16), (0, 16), counts, 8), percent=percent)
        isl, osl = fig.data[1], fig.data[2]
        # Whichever the bars are drawn in (requests or %), hover gives both and the bin.
        assert [list(c) for c in isl.customdata] == [[4, 50.0], [4, 50.0]]
        assert [list(c) for c in osl.customdata] == [[1, 12.5], [7, 87.5]]  # OSL bins 0, 1
        for bars, axis in ((isl, "ISL"), (osl, "OSL")):
            assert list(bars.text) == ["0–16", "≥16"]
            assert bars.hovertemplate.startswith(f"{axis} %{{text}} tokens<br>")
            assert "%{customdata[0]:,} requests (%{customdata[1]:.2f}% " in bars.hovertemplate
        # The count axes never tick below zero.
        assert fig.layout.yaxis.rangemode == fig.layout.xaxis4.rangemode == "nonnegative"


def test_a_span_gives_maps_the_same_bins():
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[0, 0] = 5
    hm = HeatMap((0, 16, 32, 64), (0, 16, 32, 64), counts, 5)
    assert heatmap_span(hm) == (1, 1)
    fig = _heatmap(hm, span=(3, 2))
    assert list(fig.layout.xaxis3.ticktext) == ["0–16", "16–32", "32–64"]
    assert list(fig.layout.yaxis3.ticktext) == ["0–16", "16–32"]
    assert np.asarray(fig.data[0].z, dtype=float).shape == (2, 3)
    with pytest.raises(ValueError, match="span 5 × 1 bins is outside the heat map's 4 × 4"):
        heatmap_figure(hm, span=(5, 1))
