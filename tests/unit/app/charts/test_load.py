"""The load figures (app/charts/load.py), built from the analytics' frames on the hand-made
overlapping requests and read back through plotly's graph objects (which validate them)."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from app.analytics import latency, load
from app.analytics.bins import LOG2_EDGES
from app.analytics.filters import Filter
from app.charts import load as charts
from tests.support.load_data import WINDOW, load_records
from tests.support.records import store

FLT = Filter(start=WINDOW[0], end=WINDOW[1])


@pytest.fixture
def cur(database):
    store(database, load_records())
    return database.cursor()


def test_inflight_figure_has_a_mean_and_a_max_line_per_engine(cur):
    fig = go.Figure(charts.inflight_figure(load.inflight_series(cur, FLT, "5m")))
    assert [t.name for t in fig.data] == [
        "chat-8b mean",
        "chat-8b max",
        "code-7b mean",
        "code-7b max",
    ]
    assert list(fig.data[1].y) == [3, 1]
    assert fig.data[0].line.color == fig.data[1].line.color and fig.data[1].line.dash == "dot"


def test_latency_inflight_figure_two_rows_p50_and_p90(cur):
    frame = load.latency_by_inflight(cur, FLT)
    fig = go.Figure(charts.latency_inflight_figure(frame))
    # 2 engines x (TTFT, ITL) x (p50, p90); one legend entry per engine.
    assert len(fig.data) == 8
    assert [t.name for t in fig.data if t.showlegend] == ["chat-8b", "code-7b"]
    ttft_p50 = fig.data[0]
    assert list(ttft_p50.x) == [1, 2, 3] and ttft_p50.yaxis == "y"
    assert fig.data[2].yaxis == "y2"  # chat-8b ITL p50
    assert list(ttft_p50.customdata[2]) == ["3–4", 2]
    assert fig.layout.xaxis.type == "log" and list(fig.layout.xaxis.tickvals) == [1, 2, 4]


def test_ttft_isl_load_figure_names_counts_for_one_engine(cur):
    one = Filter(start=WINDOW[0], end=WINDOW[1], engines=("chat-8b",))
    split = load.ttft_by_isl_and_load(cur, one, LOG2_EDGES)
    overall, _ = latency.ttft_vs_isl(cur, one)
    fig = go.Figure(charts.ttft_isl_load_figure(split, overall))
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["all requests", "low load (1–2 in flight)", "medium load (3 in flight)"]
    pooled = load.ttft_by_isl_and_load(cur, FLT, LOG2_EDGES)
    fig = go.Figure(charts.ttft_isl_load_figure(pooled))
    assert [t.name for t in fig.data if t.showlegend is not False] == ["low load", "medium load"]
    assert list(fig.layout.xaxis.categoryarray)[0] == "32+"


def test_empty_frames_give_empty_figures(cur):
    flt = Filter(start=WINDOW[0].replace(year=2020), end=WINDOW[1].replace(year=2020))
    assert len(go.Figure(charts.inflight_figure(load.inflight_series(cur, flt, "5m"))).data) == 0
    fig = charts.latency_inflight_figure(load.latency_by_inflight(cur, flt))
    assert len(go.Figure(fig).data) == 0
    assert charts.engine_name(None) == "(no engine)" and charts.level_label(5, 8) == "5–8"
