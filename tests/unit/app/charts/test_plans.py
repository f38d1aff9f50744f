"""The replica plans' figures (app/charts/plans), read back through plotly's graph objects (which
validates every attribute against plotly's schema)."""

from __future__ import annotations

import math

import plotly.graph_objects as go

from app.charts.plans import (
    PlanLine,
    coinciding,
    coinciding_words,
    latency_figure,
    replicas_figure,
)


def test_replicas_steps_per_plan_and_markers_for_what_set_each_hour():
    seasonal = PlanLine(
        "seasonal",
        [1] * 8 + [3] * 10 + [1] * 6,
        ["minimum"] * 8 + ["latency"] * 10 + ["memory"] * 6,
    )
    now = PlanLine("now", [4] * 24, ["today"] * 24, "now")
    fig = go.Figure(replicas_figure([now, seasonal], marked="seasonal"))
    steps = [t for t in fig.data if t.mode == "lines"]
    # Drawn widest first (the thin line of (c) under the dotted one of now); the legend keeps
    # the order given.
    assert [t.name for t in steps] == ["seasonal", "now"]
    assert [t.legendrank for t in steps] == [101, 100]
    assert list(steps[0].y) == [*seasonal.replicas, 1]  # 25 points: the last hour is drawn
    assert steps[1].line.dash == "dot" and steps[0].line.dash == "solid"
    assert steps[0].customdata[8] == "the latency targets"
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
    # Not by hue alone: the infeasible hours are hatched as well.
    assert bars[0].marker.pattern.shape[23] == "x" and bars[0].marker.pattern.shape[10] == ""
    assert [t.name for t in lines] == ["TTFT target 500 ms", "ITL target 40 ms"]
    assert set(lines[1].y) == {40}
    titles = [a.text for a in fig.layout.annotations]
    assert titles == ["TTFT p95, ms", "ITL p95, ms"]


def test_latency_without_an_itl_target_draws_only_the_ttft_line():
    fig = go.Figure(
        latency_figure([100.0] * 24, [10.0] * 24, percentile=99, ttft_target=800, itl_target=None)
    )
    assert [t.name for t in fig.data if t.type == "scatter"] == ["TTFT target 800 ms"]


def _four(hourly: list[int], seasonal: list[int]) -> list[PlanLine]:
    return [
        PlanLine("now", [2] * 24, label="now"),
        PlanLine("static", [max(hourly)] * 24, label="(a) peak all day"),
        PlanLine("hourly", hourly, label="(b) by the hour"),
        PlanLine("seasonal", seasonal, label="(c) two windows"),
    ]


def test_every_plan_has_its_own_dash_and_width_so_coinciding_steps_stay_apart():
    hourly = [1] * 10 + [3] * 6 + [1] * 8
    fig = go.Figure(replicas_figure(_four(hourly, hourly), marked="seasonal"))
    steps = {t.name: t for t in fig.data if t.mode == "lines"}
    styles = {(t.line.dash, t.line.width) for t in steps.values()}
    assert len(styles) == 4  # no two plans share both a dash and a width
    # Widest first: each narrower line is drawn inside the wider ones it lies on.
    widths = [t.line.width for t in fig.data if t.mode == "lines"]
    assert widths == sorted(widths, reverse=True)
    assert steps["(b) by the hour"].opacity < 1  # the band shows the line drawn over it


def test_coinciding_plans_are_named_with_how_to_tell_them_apart():
    hourly = [1] * 10 + [3] * 6 + [1] * 8
    lines = _four(hourly, hourly)
    assert [[p.name for p in g] for g in coinciding(lines)] == [["hourly", "seasonal"]]
    words = coinciding_words(lines)
    assert "(b) by the hour (the wide pale band) and (c) two windows (the thin solid line)" in words
    assert "the same replicas every hour" in words
    flat = _four([2] * 24, [2] * 24)
    assert "now (dotted), (a) peak all day (dashed), (b)" in coinciding_words(flat)
    assert "2 replicas all day" in coinciding_words(flat)
    assert coinciding_words(_four(hourly, [1] * 24)) == ""  # every line has steps of its own
