"""The comparison's figures (app/charts/compare), read back through plotly's graph objects (which
validates every attribute against plotly's schema)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from app.analytics.shapes import HeatMap
from app.charts.compare import ratio_figure, shape_pair_figure

EDGES = (0, 16, 32, 64, 128)


def _hm(cells: dict[tuple[int, int], int]) -> HeatMap:
    counts = np.zeros((len(EDGES), len(EDGES)), dtype=np.int64)
    for (i, j), n in cells.items():
        counts[i, j] = n
    return HeatMap(EDGES, EDGES, counts, int(counts.sum()))


def test_the_two_maps_share_one_colour_scale_and_their_trimmed_bins():
    prod = _hm({(1, 1): 30, (2, 1): 10})  # 75% and 25%
    bench = _hm({(2, 2): 1, (1, 1): 1})  # 50% and 50%
    fig = go.Figure(shape_pair_figure(prod, bench))
    left, right = fig.data
    assert left.coloraxis == right.coloraxis == "coloraxis"  # one scale, one colour bar
    assert fig.layout.coloraxis.cmin == 0 and fig.layout.coloraxis.cmax == 75.0
    # Bins 1–2 on both axes, trimmed at both ends the same way on both maps.
    for axis in ("xaxis", "xaxis2"):
        assert list(fig.layout[axis].ticktext) == ["16–32", "32–64"]
    assert list(fig.layout.yaxis.ticktext) == ["16–32", "32–64"]
    z_left = np.asarray(left.z, dtype=float)  # rows: OSL bins, columns: ISL bins
    assert z_left[0, 0] == 75.0 and z_left[0, 1] == 25.0 and np.isnan(z_left[1, 1])
    z_right = np.asarray(right.z, dtype=float)
    assert z_right[0, 0] == 50.0 and z_right[1, 1] == 50.0 and np.isnan(z_right[0, 1])
    # Each cell's hover carries its requests and the other map's share there.
    assert left.customdata[0][0] == [30, 50.0] and right.customdata[1][1] == [1, 0.0]
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["<b>production · 40 requests</b>", "<b>benchmark · 2 requests</b>"]
    assert fig.layout.yaxis2.matches == "y" and fig.layout.yaxis2.showticklabels is False


def test_maps_on_different_bins_are_refused():
    other = HeatMap((0, 8), (0, 8), np.ones((2, 2), dtype=np.int64), 4)
    with pytest.raises(ValueError, match="share their bins"):
        shape_pair_figure(_hm({(0, 0): 1}), other)


def _cells(n: int) -> pd.DataFrame:
    rows = []
    for k in range(n):
        rows.append(
            {
                "shape": f"ISL {k} × OSL {k}",
                "production_requests": 100 - k,
                **{
                    f"ratio_{m}_{q}": (math.nan if k == 1 else 0.5 + k)
                    for m in ("ttft", "itl")
                    for q in ("p50", "p90", "p99")
                },
            }
        )
    return pd.DataFrame(rows)


def test_ratio_bars_run_from_one_to_each_ratio_on_log_axes():
    fig = go.Figure(ratio_figure(_cells(5), limit=3))
    assert len(fig.data) == 6  # p99, p90, p50 for TTFT, then for ITL
    assert [t.name for t in fig.data[:3]] == ["p99", "p90", "p50"]
    bars = fig.data[2]
    # The cells with a ratio, the busiest of them at the top: 0, 2, 3 (cell 1 has none).
    assert list(bars.y) == ["ISL 3 ×<br>OSL 3", "ISL 2 ×<br>OSL 2", "ISL 0 ×<br>OSL 0"]
    assert bars.base == 1 and list(bars.x) == pytest.approx([2.5, 1.5, -0.5])
    assert list(bars.customdata) == pytest.approx([3.5, 2.5, 0.5])  # the ratios themselves
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    lo, hi = fig.layout.xaxis.range
    assert 10**lo < 0.5 and 10**hi > 3.5  # every ratio and the line at 1 on the axis
    assert [s.x0 for s in fig.layout.shapes] == [1, 1]
    assert fig.data[3].showlegend is False  # one legend entry per quantile
