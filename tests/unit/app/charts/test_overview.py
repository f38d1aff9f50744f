"""The Overview's figures (app/charts/overview), built from small frames and read back through
plotly's graph objects (which validates every attribute against plotly's schema)."""

from __future__ import annotations

import math
from urllib.parse import unquote

import pandas as pd
import plotly.graph_objects as go

from app.charts import overview as charts

T = pd.to_datetime(["2026-11-20 00:00", "2026-11-20 01:00", "2026-11-20 02:00"], utc=True)


def _bucketed(ttft, itl) -> pd.DataFrame:
    return pd.DataFrame({"bucket": T, "requests": [3.0, 4.0, 5.0], "ttft_ms": ttft, "itl_ms": itl})


def test_rate_figure_draws_requests_per_second_per_bucket():
    rates = pd.DataFrame({"bucket": T, "requests": [36, 72, 0], "requests_per_s": [0.01, 0.02, 0]})
    fig = go.Figure(charts.rate_figure(rates))
    (trace,) = fig.data
    assert list(trace.y) == [0.01, 0.02, 0.0]
    assert list(trace.x) == [t.isoformat() for t in T]
    assert fig.layout.yaxis.title.text == "requests/s"


def test_goodput_figure_has_the_goodput_and_its_target_line():
    frame = pd.DataFrame({"t": T, "requests": [10.0, 10.0, 10.0], "goodput": [1.0, 0.9, math.nan]})
    fig = go.Figure(charts.goodput_figure(frame, 0.95))
    line, target = fig.data
    assert list(line.y) == [1.0, 0.9, None]  # an empty bucket is a gap, not a zero
    assert list(target.y) == [0.95, 0.95] and target.line.dash == "dash"
    assert fig.layout.height == charts.HEIGHT


def test_latency_slo_figure_draws_each_engine_with_its_own_target():
    lines = pd.concat(
        [
            charts.latency_frame(
                "chat", _bucketed([100, 900, 200], [30, 31, 32]), "ttft_ms", 800, 95
            ),
            charts.latency_frame(
                "rag", _bucketed([1500, 1600, 1700], [40, 41, 42]), "ttft_ms", 2500, 99
            ),
            charts.latency_frame(
                "batch", _bucketed([5, 6, math.nan], [1, 2, 3]), "ttft_ms", None, 95
            ),
        ],
        ignore_index=True,
    )
    fig = go.Figure(charts.latency_slo_figure(lines, "TTFT"))
    names = [t.name for t in fig.data]
    assert names == [
        "chat p95 (≤ 800 ms)",
        "chat target",
        "rag p99 (≤ 2,500 ms)",
        "rag target",
        "batch p95",  # no target set: no line for it
    ]
    chat, chat_target, rag, rag_target, batch = fig.data
    assert list(chat.y) == [100, 900, 200]
    assert list(chat_target.y) == [800, 800] and list(rag_target.y) == [2500, 2500]
    # The target spans the whole window, dashed in its engine's colour, grouped with it.
    assert list(chat_target.x) == [T[0].isoformat(), T[-1].isoformat()]
    assert chat_target.line.color == chat.line.color and chat_target.line.dash == "dash"
    assert chat_target.legendgroup == chat.legendgroup == "chat"
    assert chat_target.showlegend is False
    assert rag.line.color != chat.line.color
    assert list(batch.y) == [5, 6, None]
    assert fig.layout.yaxis.title.text == "TTFT (ms)"


def test_latency_slo_figure_of_nothing_is_an_empty_chart():
    empty = pd.DataFrame(columns=list(charts.LATENCY_COLUMNS))
    assert go.Figure(charts.latency_slo_figure(empty, "ITL")).data == ()


def _money() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": ["chat", "rag"],
            "now": [8036.0, 32142.0],
            "best": [4018.0, 16071.0],
            "now_label": ["today's replicas, all day"] * 2,
            "best_label": ["rebuilt, replicas scaled by the hour"] * 2,
            "now_replicas": [2, 8],
            "best_replicas": [2, 6],
        }
    )


def test_money_figure_has_now_and_best_bars_per_engine():
    fig = go.Figure(charts.money_figure(_money(), "$/month", "$"))
    now, best = fig.data
    assert (now.name, best.name) == ("now", "best plan")
    assert list(now.x) == list(best.x) == ["chat", "rag"]
    assert list(now.y) == [8036.0, 32142.0] and list(best.y) == [4018.0, 16071.0]
    assert list(best.text) == ["$4,018", "$16,071"]
    assert list(best.customdata[1]) == ["rebuilt, replicas scaled by the hour", 6]
    assert fig.layout.barmode == "group" and fig.layout.yaxis.title.text == "$/month"


def test_money_figure_in_gpu_hours_without_prices():
    fig = go.Figure(charts.money_figure(_money(), "GPU-hours/month"))
    assert list(fig.data[0].text) == ["8,036", "32,142"]
    assert "GPU-hours a month" in fig.data[0].hovertemplate


def test_sparkline_has_no_axes_and_an_optional_target():
    fig = go.Figure(charts.sparkline_figure(T, [0.99, 0.97, 1.0], target=0.95, percent=True))
    line, target = fig.data
    assert list(line.y) == [0.99, 0.97, 1.0] and list(target.y) == [0.95, 0.95]
    assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False
    assert fig.layout.showlegend is False and fig.layout.height <= 60
    assert fig.layout.yaxis.range[0] <= 0.95  # the target stays in view
    plain = go.Figure(charts.sparkline_figure(T, [1.0, 2.0, math.inf]))
    assert len(plain.data) == 1 and list(plain.data[0].y) == [1.0, 2.0, None]


def test_fleet_latency_figure_draws_ttft_itl_and_total_on_one_log_axis():
    frame = _bucketed([300.0, 0.0, math.nan], [30.0, 31.0, 29.0])
    frame["e2e_ms"] = [20_000.0, 25_000.0, 30_000.0]
    fig = go.Figure(charts.fleet_latency_figure(frame))
    assert [t.name for t in fig.data] == ["TTFT p95", "ITL p95", "total (E2E) p95"]
    ttft = fig.data[0]
    assert list(ttft.y) == [300.0, None, None]  # nothing at 0 on a log axis, NaN a gap
    assert fig.layout.yaxis.type == "log"
    # Without an E2E column (the engines' frames) the chart draws what it has.
    assert len(go.Figure(charts.fleet_latency_figure(_bucketed([1.0] * 3, [2.0] * 3))).data) == 2


def test_sparkline_svg_is_a_data_url_with_a_line_per_run_of_values():
    src = charts.sparkline_svg([1.0, 2.0, math.nan, 4.0, 0.0])
    assert src.startswith("data:image/svg+xml,")
    svg = unquote(src.removeprefix("data:image/svg+xml,"))
    assert svg.count("<polyline") == 2  # the gap splits the line
    assert 'xmlns="http://www.w3.org/2000/svg"' in svg and "<script" not in svg
    # The highest value reaches the top (y = the padding), zero the bottom.
    assert ",1.5" in svg and f",{36 - 1.5:.1f}" in svg
    assert charts.sparkline_svg([]) == "" and charts.sparkline_svg([math.nan]) == ""
    assert charts.sparkline_svg([5.0]).startswith("data:image/svg+xml,")  # one bucket: a dot
