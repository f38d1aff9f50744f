"""The Seasonal page's window heat maps on one colour scale (app/charts/seasonal), read back
through plotly's graph objects (which validates every attribute against plotly's schema)."""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go

from app.analytics.shapes import HeatMap
from app.charts.heatmap import heatmap_figure
from app.charts.seasonal import SHARE_UNIT, shared_heat_scale

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
