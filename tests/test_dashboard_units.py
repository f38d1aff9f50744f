"""Pure pieces of the dashboard: URL query parsing, labels, figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import plotly.graph_objects as go

from app.analytics.shapes import HeatMap
from app.charts.heatmap import Bounds, heatmap_figure
from app.charts.style import bin_labels, bin_position, tokens_label
from app.dashboard import filterbar

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_query_to_view_and_filter():
    view = filterbar.parse_query({"window": "24h", "model": "m1", "engine": ""}, NOW)
    assert view.start == NOW - timedelta(hours=24) and view.end is None
    flt = view.filter()
    assert flt.models == ("m1",) and flt.engines == ()
    assert filterbar.parse_query({}, NOW).window == "7d"
    assert filterbar.parse_query({"window": "forever"}, NOW).window == "7d"
    assert filterbar.parse_query({"window": "all"}, NOW).start is None
    custom = filterbar.parse_query(
        {"window": "custom", "start": "2026-11-21T00:00", "end": "2026-11-20T00:00"}, NOW
    )
    assert custom.start < custom.end  # swapped, not an error
    broken = filterbar.parse_query({"window": "custom", "start": "soon"}, NOW)
    assert broken.start is None
    assert "'soon' is not a time" in broken.problems[0]  # said on the page, not swallowed
    form = filterbar.render(broken, {})
    assert any(getattr(c, "className", "") == "field-error" for c in form.children)


def test_labels_are_readable():
    assert [tokens_label(v) for v in (0, 96, 1024, 1536, 131072)] == [
        "0",
        "96",
        "1k",
        "1.5k",
        "128k",
    ]
    assert bin_labels((0, 16, 1024)) == ["0–16", "16–1k", "≥1k"]


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


def test_bin_position_interpolates_inside_bins():
    log_edges = (0, 16, 32, 64)
    assert bin_position(log_edges, 16) == 0.5  # the edge between bins 0 and 1
    assert bin_position(log_edges, 8) == 0.0  # the first bin is linear: 8 is its middle
    assert abs(bin_position(log_edges, 24) - (0.5 + np.log2(1.5))) < 1e-9
    assert bin_position(log_edges, 1000) == 3.0  # the open-ended last bin
    assert bin_position((0, 100, 200, 300), 150) == 1.0  # linear bins: linear inside


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


def test_partial_plotly_bundle_is_used_only_at_the_packages_version(tmp_path, monkeypatch):
    from plotly.offline import get_plotlyjs_version

    from app.dashboard.speedups import plotlyjs as shell

    bundle = tmp_path / "plotly-dashboard.min.js"
    monkeypatch.setattr(shell, "PARTIAL_PLOTLY", bundle)
    assert not shell.partial_plotly_usable()  # missing: the full bundle is used
    bundle.write_text("/**\n* plotly.js (tokenshape dashboard: scatter, bar, heatmap) v0.0.1\n*/")
    assert not shell.partial_plotly_usable()  # stale after an upgrade
    header = "/**\n* plotly.js (tokenshape dashboard: scatter, bar, heatmap) v{}\n*/"
    bundle.write_text(header.format(get_plotlyjs_version()))
    assert shell.partial_plotly_usable()
