"""Where an engine's GPU memory goes: weights, activations, KV cache, free."""

from __future__ import annotations

import plotly.graph_objects as go

MEMORY_PARTS = (
    ("weights", "#4c6a92"),
    ("KV cache", "#e0b23e"),
    ("overhead", "#a05a7b"),
    ("unused", "#d9dee8"),
)


def memory_figure(rows: list[tuple[str, dict[str, float]]]) -> go.Figure:
    """Stacked bars of one replica's memory in GiB: weights, KV cache, overhead, unused."""
    fig = go.Figure()
    labels = [label for label, _ in rows]
    for part, colour in MEMORY_PARTS:
        values = [parts.get(part, 0.0) for _, parts in rows]
        fig.add_trace(
            go.Bar(
                y=labels,
                x=values,
                name=part,
                orientation="h",
                marker_color=colour,
                text=[f"{v:,.1f}" if v >= 1 else "" for v in values],
                textposition="inside",
                hovertemplate=f"{part}: %{{x:,.2f}} GiB<extra></extra>",
            )
        )
    fig.update_layout(
        barmode="stack",
        height=80 + 46 * len(rows),
        margin={"l": 120, "r": 20, "t": 10, "b": 40},
        xaxis={"title": {"text": "GiB per replica"}},
        yaxis={"autorange": "reversed"},
        legend={"orientation": "h", "y": -0.45, "traceorder": "normal"},
        plot_bgcolor="#ffffff",
        paper_bgcolor="#ffffff",
    )
    return fig
