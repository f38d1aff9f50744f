"""The SLO ledger's figures (app/charts/slo), read back through plotly's graph objects (which
validates every attribute against plotly's schema)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.charts.slo import AT, diverging_scale, goodput_heatmap_figure, goodput_time_figure


def test_goodput_heatmap_colours_by_goodput_centred_on_the_target():
    edges = (0, 16, 32, 64)
    judged = np.zeros((4, 4))
    goodput = np.full((4, 4), np.nan)
    judged[1, 0], goodput[1, 0] = 40, 0.25  # ISL 16-32, OSL 0-16
    judged[0, 1], goodput[0, 1] = 10, 1.0
    causes = {(1, 0): "chat-8b: queueing"}
    fig = go.Figure(goodput_heatmap_figure(edges, judged, goodput, 0.9, causes))
    (heat,) = fig.data
    assert list(fig.layout.xaxis.ticktext) == ["0–16", "16–32"]  # trimmed to used bins
    assert heat.z[0][1] == 0.25 and heat.z[1][0] == 1.0 and heat.z[1][1] is None
    assert (heat.zmin, heat.zmax) == (0.0, 1.0)
    assert heat.customdata[0][1][2] == "chat-8b: queueing"
    assert heat.customdata[1][0][2] == "meets the target"
    assert "%{customdata[1]} met the SLO" in heat.hovertemplate
    assert [0.9, AT] in [list(stop) for stop in heat.colorscale]  # white at the target


def test_diverging_scale_keeps_its_midpoint_inside():
    assert diverging_scale(1.0)[2][0] == 0.99 and diverging_scale(0.0)[2][0] == 0.01


def test_goodput_over_time_with_the_target_line():
    frame = pd.DataFrame(
        {
            "t": pd.to_datetime(["2026-11-20T12:00Z", "2026-11-20T13:00Z"]),
            "goodput": [0.97, np.nan],
            "requests": [100.0, 0.0],
        }
    )
    fig = go.Figure(goodput_time_figure(frame, 0.95))
    line, target = fig.data
    assert list(line.y) == [0.97, None]
    assert list(target.y) == [0.95, 0.95] and target.name == "target 95%"
    assert fig.layout.yaxis.tickformat == ".0%"
    assert len(go.Figure(goodput_time_figure(frame, None)).data) == 1
