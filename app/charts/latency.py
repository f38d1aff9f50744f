"""Latency figures: percentile trends (whole or one line per value of a split), queueing time,
TTFT by prompt length (pooled, and fitted per model), ITL by position, E2E. Every hover names
the requests behind its point."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import plotly.graph_objects as go

from app.charts.style import (
    PERCENTILE_COLOURS,
    hover_text,
    layout,
    nonnegative,
    series_colour,
    tokens_label,
)

# The trend lines and the name a split series of "the rest" has (app.analytics.split.OTHER).
TREND_PERCENTILES = ("p50", "p90", "p99")
OTHER = "(other)"

__all__ = ["PERCENTILE_COLOURS", "TREND_PERCENTILES"]


def trend_figure(frame, measure: str, label: str) -> go.Figure:
    """p50/p90/p99 of one latency measure over time."""
    fig = go.Figure(
        [
            go.Scatter(
                x=frame["bucket"],
                y=frame[f"{measure}_{p}"],
                name=p,
                mode="lines+markers",
                line={"color": PERCENTILE_COLOURS[p]},
                marker={"size": 4},
                customdata=frame["requests"],
                hovertemplate=f"%{{x}}<br>{p} %{{y:,.1f}} ms<br>"
                "%{customdata:,} requests<extra></extra>",
            )
            for p in TREND_PERCENTILES
        ]
    )
    return nonnegative(layout(fig, "time", f"{label} (ms)"))


def _split_lines(
    series: Sequence[tuple[str, pd.DataFrame]],
    column: str,
    hover: str,
    custom: Sequence[str],
    dash: str | None = None,
) -> list[go.Scatter]:
    """One line per split series (busiest first, the rest grey), `hover` after its name."""
    lines = []
    for rank, (name, frame) in enumerate(series):
        lines.append(
            go.Scatter(
                x=frame["bucket"],
                y=frame[column],
                name=name,
                mode="lines+markers",
                line={"color": series_colour(rank, name == OTHER), "dash": dash},
                marker={"size": 4},
                customdata=np.column_stack([frame[c].to_numpy(dtype=float) for c in custom]),
                hovertemplate=f"{hover_text(name)}<br>%{{x}}<br>{hover}<extra></extra>",
            )
        )
    return lines


def trend_split_figure(
    series: Sequence[tuple[str, pd.DataFrame]], measure: str, label: str, percentile: str = "p90"
) -> go.Figure:
    """One latency measure's `percentile` over time, a line per value of a split (the hover
    has its p50, p90 and p99 and its request count)."""
    fig = go.Figure(
        _split_lines(
            series,
            f"{measure}_{percentile}",
            f"{percentile} %{{y:,.1f}} ms (p50 %{{customdata[1]:,.1f}}, "
            "p99 %{customdata[2]:,.1f})<br>%{customdata[0]:,} requests",
            ["requests", f"{measure}_p50", f"{measure}_p99"],
        )
    )
    return nonnegative(layout(fig, "time", f"{label} {percentile} (ms)"))


def queue_figure(series: Sequence[tuple[str, pd.DataFrame]]) -> go.Figure:
    """Queueing time over time: p50 and p95 of the whole window, or p95 per value of a split."""
    if len(series) == 1 and series[0][0] == "all":
        frame = series[0][1]
        fig = go.Figure(
            [
                go.Scatter(
                    x=frame["bucket"],
                    y=frame[f"queue_ms_{p}"],
                    name=p,
                    mode="lines+markers",
                    line={"color": PERCENTILE_COLOURS[p]},
                    marker={"size": 4},
                    customdata=frame["requests"],
                    hovertemplate=f"%{{x}}<br>{p} queued %{{y:,.1f}} ms<br>"
                    "%{customdata:,} requests report it<extra></extra>",
                )
                for p in ("p50", "p95")
            ]
        )
        return nonnegative(layout(fig, "time", "queueing time (ms)"))
    fig = go.Figure(
        _split_lines(
            series,
            "queue_ms_p95",
            "p95 queued %{y:,.1f} ms (p50 %{customdata[1]:,.1f})<br>"
            "%{customdata[0]:,} requests report it",
            ["requests", "queue_ms_p50"],
        )
    )
    return nonnegative(layout(fig, "time", "queueing time p95 (ms)"))


def ttft_fit_figure(fits: Sequence) -> go.Figure:
    """Per model (`latency.ModelFit`): the median TTFT of each ISL bin at the bin's mean ISL
    (markers) and the model's least-squares line (log ISL axis), a colour each."""
    traces: list[go.Scatter] = []
    for rank, fit in enumerate(fits):
        colour = series_colour(rank)
        name = hover_text(fit.model)
        bins = fit.bins
        traces.append(
            go.Scatter(
                x=bins["isl_mean"],
                y=bins["ttft_p50"],
                name=fit.model,
                legendgroup=fit.model,
                mode="markers",
                marker={"color": colour, "size": 7},
                customdata=np.column_stack(
                    [bins["requests"].to_numpy(dtype=float), bins["isl_from"].to_numpy(float)]
                ),
                hovertemplate=f"{name}<br>ISL bin from %{{customdata[1]:,}} (mean %{{x:,.0f}})"
                "<br>median TTFT %{y:,.0f} ms<br>%{customdata[0]:,} requests<extra></extra>",
            )
        )
        if fit.slope is None or not len(bins):
            continue
        lo, hi = max(float(bins["isl_mean"].min()), 1.0), float(bins["isl_mean"].max())
        x = np.geomspace(lo, max(hi, lo * 1.01), 40)
        traces.append(
            go.Scatter(
                x=x,
                y=fit.intercept + fit.slope * x,
                name=f"{fit.model} fit",
                legendgroup=fit.model,
                showlegend=False,
                mode="lines",
                line={"color": colour},
                customdata=np.full(len(x), float(fit.requests)),
                hovertemplate=f"{name} fit: {fit.slope * 1000:,.0f} ms per 1k input tokens "
                f"+ {fit.intercept:,.0f} ms<br>ISL %{{x:,.0f}}: %{{y:,.0f}} ms<br>"
                "from %{customdata:,} requests<extra></extra>",
            )
        )
    fig = go.Figure(traces)
    fig.update_xaxes(type="log")
    return nonnegative(layout(fig, "input tokens (ISL, log scale)", "time to first token (ms)"))


def _median_p90_figure(
    starts,
    p50,
    p90,
    counts,
    *,
    prefix: str,
    counted: str,
    digits: int,
    x_title: str,
    y_title: str,
) -> go.Figure:
    """Median and p90 lines over log buckets labelled by their lower edge ('1k+')."""
    labels = [f"{tokens_label(int(v))}+" for v in starts]
    fig = go.Figure(
        [
            go.Scatter(
                x=labels,
                y=p50,
                name="median",
                mode="lines+markers",
                line={"color": PERCENTILE_COLOURS["p50"]},
                customdata=counts,
                hovertemplate=f"{prefix} %{{x}}<br>median %{{y:,.{digits}f}} ms<br>"
                f"%{{customdata:,}} {counted}<extra></extra>",
            ),
            go.Scatter(
                x=labels,
                y=p90,
                name="p90",
                mode="lines+markers",
                line={"color": PERCENTILE_COLOURS["p90"]},
                customdata=counts,
                hovertemplate=f"{prefix} %{{x}}<br>p90 %{{y:,.{digits}f}} ms<br>"
                f"%{{customdata:,}} {counted}<extra></extra>",
            ),
        ]
    )
    fig.update_xaxes(type="category")
    return nonnegative(layout(fig, x_title, y_title))


def ttft_isl_figure(frame) -> go.Figure:
    """Median and p90 TTFT per ISL bin."""
    return _median_p90_figure(
        frame["isl_from"],
        frame["ttft_p50"],
        frame["ttft_p90"],
        frame["requests"],
        prefix="ISL",
        counted="requests",
        digits=0,
        x_title="input tokens (ISL bin, from)",
        y_title="time to first token (ms)",
    )


def itl_position_figure(frame) -> go.Figure:
    """Median and p90 inter-token latency by output-token position."""
    return _median_p90_figure(
        frame["position_from"],
        frame["itl_p50"],
        frame["itl_p90"],
        frame["gaps"],
        prefix="token",
        counted="gaps",
        digits=1,
        x_title="output token position (bucket, from)",
        y_title="inter-token latency (ms)",
    )


def _ms_label(ms: int) -> str:
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms} ms"


def e2e_figure(frame) -> go.Figure:
    """Requests per time-to-completion bin."""
    edges = [int(e) for e in frame["e2e_from_ms"]]
    labels = [f"{_ms_label(a)}–{_ms_label(b)}" for a, b in itertools.pairwise(edges)]
    labels.append(f"≥{_ms_label(edges[-1])}")
    fig = go.Figure(
        go.Bar(
            x=labels,
            y=frame["requests"],
            marker={"color": "#3b5b92"},
            hovertemplate="%{x}<br>%{y:,} requests<extra></extra>",
        )
    )
    fig.update_xaxes(type="category")
    return nonnegative(layout(fig, "time to completion (E2E)", "requests"))
