"""The Seasonal page's window heat maps on one colour scale (app/charts/seasonal), read back
through plotly's graph objects (which validates every attribute against plotly's schema)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest

from app.analytics.shapes import HeatMap
from app.charts.heatmap import heatmap_figure
from app.charts.seasonal import (
    SHARE_UNIT,
    WINDOW_LINES,
    shared_heat_scale,
    window_heatmaps,
    windows_matrix_figure,
)

EDGES = (0, 16, 32, 64)


def _map(counts: list[list[int]]) -> dict:
    c = np.array(counts, dtype=np.int64)
    return heatmap_figure(HeatMap(EDGES, EDGES, c, int(c.sum())), percent=True)


def test_two_windows_share_one_colour_range_and_one_colour_bar():
    # Day: one cell holds 50% of its requests; night: 80%, and 100 times the requests.
    day = _map([[5, 5, 0], [0, 0, 0], [0, 0, 0]])
    night = _map([[800, 0, 0], [100, 100, 0], [0, 0, 0]])
    (a, b), top = shared_heat_scale([day, night])
    assert top == 80.0
    heats = [go.Figure(f).data[0] for f in (a, b)]
    assert {(h.zmin, h.zmax) for h in heats} == {(0.0, 80.0)}  # a colour is the same share
    assert [h.showscale for h in heats] == [False, True]  # one colour bar, on the right
    assert heats[1].colorbar.title.text == SHARE_UNIT
    # The margins on one range as well, and the same room on the right of both maps.
    assert a["layout"]["yaxis"]["range"] == b["layout"]["yaxis"]["range"]
    assert a["layout"]["xaxis4"]["range"] == b["layout"]["xaxis4"]["range"]
    assert a["layout"]["margin"] == b["layout"]["margin"]
    assert "zmax" not in day["data"][0]  # the figures given are left as they were


def test_no_windows_no_scale():
    assert shared_heat_scale([]) == ([], 0.0)


def test_the_windows_maps_have_the_same_bins():
    # Day: short requests only (first bins); night: one long request (ISL bin 2, OSL bin 1).
    c_day = np.zeros((4, 4), dtype=np.int64)
    c_day[0, 0] = 10
    c_night = np.zeros((4, 4), dtype=np.int64)
    c_night[0, 0], c_night[2, 1] = 4, 1
    day, night = (HeatMap(EDGES, EDGES, c, int(c.sum())) for c in (c_day, c_night))
    (a, b), top = window_heatmaps([day, night])
    assert top == 100.0
    for axis in ("xaxis3", "yaxis3"):  # the same bins: the same ticks and the same range
        assert a["layout"][axis]["ticktext"] == b["layout"][axis]["ticktext"]
        assert a["layout"][axis]["range"] == b["layout"][axis]["range"]
    assert a["layout"]["xaxis3"]["ticktext"] == ["0–16", "16–32", "32–64"]
    assert a["layout"]["yaxis3"]["ticktext"] == ["0–16", "16–32"]
    assert a["data"][0]["x"] == b["data"][0]["x"] and a["data"][0]["y"] == b["data"][0]["y"]
    assert [t["showscale"] for t in (a["data"][0], b["data"][0])] == [False, True]
    go.Figure(a), go.Figure(b)  # valid against plotly's schema
    other = HeatMap((0, 8, 16, 32), EDGES, c_day, 10)
    with pytest.raises(ValueError, match="different bin edges"):
        window_heatmaps([day, other])
    assert window_heatmaps([]) == ([], 0.0)


def test_the_windows_outlines_differ_by_dash_and_width_as_well_as_hue():
    matrix = np.ones((7, 24))
    night = (*range(20, 24), *range(0, 8))
    fig = windows_matrix_figure(
        matrix, "UTC", [("08:00–20:00", tuple(range(8, 20))), ("20:00–08:00", night)]
    )
    rects = [s for s in fig.layout.shapes if s.type == "rect"]
    assert len(rects) == 3  # the day, and the night in two runs (it wraps past midnight)
    styles = {(s.line.color, s.line.dash, s.line.width) for s in rects}
    assert len(styles) == 2
    (c1, d1, w1), (c2, d2, w2) = sorted(styles)
    assert c1 != c2 and d1 != d2 and w1 != w2
    # Where the windows meet (20:00) their outlines sit side by side, not on each other.
    day = next(s for s in rects if s.line.dash == WINDOW_LINES[0]["dash"])
    after = next(s for s in rects if s.line.dash == WINDOW_LINES[1]["dash"] and s.x0 > 10)
    assert day.x1 < after.x0
    # The legend's line for each window is drawn as its outline.
    legend = [t for t in fig.data if t.type == "scatter"]
    assert [(t.name, t.line.dash, t.line.width) for t in legend] == [
        ("08:00–20:00", "solid", 4),
        ("20:00–08:00", "dash", 3),
    ]
