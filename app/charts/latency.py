"""Latency figures: percentile trends, TTFT by prompt length, ITL by position, E2E."""

from __future__ import annotations

import itertools

import plotly.graph_objects as go

from app.charts.style import layout, tokens_label

PERCENTILE_COLOURS = {"p50": "#1f77b4", "p90": "#ff7f0e", "p99": "#7f3c8d"}


def trend_figure(frame, measure: str, label: str) -> go.Figure:
    """p50/p90/p99 of one latency measure over time."""
    fig = go.Figure(
        [
            go.Scatter(
                x=frame["bucket"],
                y=frame[f"{measure}_{p}"],
                name=p,
                mode="lines+markers",
                line={"color": colour},
                marker={"size": 4},
                hovertemplate=f"%{{x}}<br>{p} %{{y:,.1f}} ms<extra></extra>",
            )
            for p, colour in PERCENTILE_COLOURS.items()
        ]
    )
    return layout(fig, "time", f"{label} (ms)")


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
                customdata=counts,
                hovertemplate=f"{prefix} %{{x}}<br>median %{{y:,.{digits}f}} ms<br>"
                f"%{{customdata:,}} {counted}<extra></extra>",
            ),
            go.Scatter(
                x=labels,
                y=p90,
                name="p90",
                mode="lines+markers",
                hovertemplate=f"{prefix} %{{x}}<br>p90 %{{y:,.{digits}f}} ms<extra></extra>",
            ),
        ]
    )
    fig.update_xaxes(type="category")
    return layout(fig, x_title, y_title)


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
    return layout(fig, "time to completion (E2E)", "requests")
