"""The replica plans' figures (app/charts/plans), read back through plotly's graph objects (which
validates every attribute against plotly's schema)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from app.charts.plans import PlanLine, latency_figure, replicas_figure


def test_replicas_steps_per_plan_and_markers_for_what_set_each_hour():
    seasonal = PlanLine(
        "seasonal",
        [1] * 8 + [3] * 10 + [1] * 6,
        ["minimum"] * 8 + ["latency"] * 10 + ["memory"] * 6,
    )
    now = PlanLine("now", [4] * 24, ["today"] * 24, "now")
    fig = go.Figure(replicas_figure([now, seasonal], marked="seasonal"))
    steps = [t for t in fig.data if t.mode == "lines"]
    assert [t.name for t in steps] == ["now", "seasonal"]
    assert list(steps[1].y) == [*seasonal.replicas, 1]  # 25 points: the last hour is drawn
    assert steps[0].line.dash == "dot" and steps[1].line.width == 3
    assert steps[1].customdata[8] == "the latency targets"
    markers = {t.name: t for t in fig.data if t.mode == "markers"}
    assert set(markers) == {
        "seasonal set by the minimum of one replica",
        "seasonal set by the latency targets",
        "seasonal set by the KV cache (memory)",
    }
    latency = markers["seasonal set by the latency targets"]
    assert list(latency.x) == [h + 0.5 for h in range(8, 18)] and set(latency.y) == {3}


def test_latency_bars_per_hour_against_the_targets_and_red_where_infeasible():
    ttft = [None] * 6 + [120.0] * 17 + [math.inf]
    itl = [None] * 6 + [20.0] * 18
    ok = [True] * 23 + [False]
    fig = go.Figure(
        latency_figure(ttft, itl, percentile=95, ttft_target=500, itl_target=40, feasible=ok)
    )
    bars = [t for t in fig.data if t.type == "bar"]
    lines = [t for t in fig.data if t.type == "scatter"]
    assert len(bars) == 2 and bars[0].y[0] is None and bars[0].y[23] is None  # inf: no bar
    assert bars[0].marker.color[23] == "#b42318" and bars[0].marker.color[10] == "#2a9d8f"
    assert [t.name for t in lines] == ["TTFT target 500 ms", "ITL target 40 ms"]
    assert set(lines[1].y) == {40}
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["TTFT p95, ms", "ITL p95, ms"]


def test_latency_without_an_itl_target_draws_only_the_ttft_line():
    fig = go.Figure(
        latency_figure([100.0] * 24, [10.0] * 24, percentile=99, ttft_target=800, itl_target=None)
    )
    assert [t.name for t in fig.data if t.type == "scatter"] == ["TTFT target 800 ms"]
