"""The Overview's figures: requests/s, goodput, TTFT/ITL against the SLO lines, GPU-hours or
money now vs planned, and the KPI sparklines. Plain dicts (as app/charts/slo.py) from frames."""

from __future__ import annotations

import math
from collections.abc import Sequence
from urllib.parse import quote

import pandas as pd

from app.charts.slo import goodput_time_figure
from app.charts.style import template

HEIGHT = 300
# Plotly's default qualitative colours: an engine keeps its colour across the latency charts.
PALETTE = (
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#d62728",
)
RATE_COLOUR = "#1f77b4"
NOW_COLOUR = "#9aa5b8"
BEST_COLOUR = "#2a9d8f"
SPARK_COLOUR = "#4c6ef5"
SPARK_TARGET = "#d1495b"
# The long frame latency_slo_figure draws: one row per (series, bucket).
LATENCY_COLUMNS = ("series", "bucket", "value", "target", "percentile")


def _x(values) -> list[str]:
    return [v.isoformat() if hasattr(v, "isoformat") else str(v) for v in values]


def _y(values) -> list[float | None]:
    out: list[float | None] = []
    for v in values:
        f = None if v is None or pd.isna(v) else float(v)
        out.append(f if f is not None and math.isfinite(f) else None)
    return out


def _layout(x_title: str, y_title: str, **extra) -> dict:
    return {
        "template": template(),
        "margin": {"l": 70, "r": 20, "t": 30, "b": 50},
        "height": HEIGHT,
        "xaxis": {"title": {"text": x_title}},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero"},
        "plot_bgcolor": "#ffffff",
        "paper_bgcolor": "#ffffff",
        # Above the plot, anchored by its bottom: a legend of several rows grows upwards (the
        # top margin makes room) instead of covering the top of the lines.
        "legend": {"orientation": "h", "x": 0, "y": 1.02, "yanchor": "bottom"},
        **extra,
    }


def colour(k: int) -> str:
    """The k-th series colour (wrapping round the palette)."""
    return PALETTE[k % len(PALETTE)]


def rate_figure(rates: pd.DataFrame) -> dict:
    """Requests/s per time bucket (columns bucket, requests_per_s), a filled line."""
    data = [
        {
            "type": "scatter",
            "mode": "lines",
            "name": "requests/s",
            "x": _x(rates["bucket"]),
            "y": _y(rates["requests_per_s"]),
            "fill": "tozeroy",
            "line": {"color": RATE_COLOUR, "width": 2},
            "hovertemplate": "%{x}<br>%{y:,.3f} requests/s<extra></extra>",
        }
    ]
    return {"data": data, "layout": _layout("time", "requests/s", showlegend=False)}


def goodput_figure(goodput: pd.DataFrame, target: float | None) -> dict:
    """Goodput per bucket (columns t, goodput, requests) with its target, as on the Latency
    page, at the Overview's height."""
    fig = goodput_time_figure(goodput, target)
    fig["layout"]["height"] = HEIGHT
    return fig


def latency_frame(
    name: str, frame: pd.DataFrame, measure: str, target: float | None, percentile: float
) -> pd.DataFrame:
    """One series of latency_slo_figure's long frame from a bucketed frame (bucket, measure)."""
    return pd.DataFrame(
        {
            "series": name,
            "bucket": frame["bucket"],
            "value": frame[measure].astype(float),
            "target": math.nan if target is None else float(target),
            "percentile": float(percentile),
        },
        columns=list(LATENCY_COLUMNS),
    )


def _ms(value: float) -> str:
    return f"{value:,.0f} ms" if value >= 10 else f"{value:g} ms"


def latency_slo_figure(lines: pd.DataFrame, label: str) -> dict:
    """One line per series (an engine) at its SLO percentile over time, and its target as a
    dashed line of the same colour (`target` NaN: none set); clicking a legend entry hides the
    series and its target together."""
    data: list[dict] = []
    xs_all = _x(lines["bucket"])
    first, last = (min(xs_all), max(xs_all)) if xs_all else (None, None)
    for k, (name, group) in enumerate(lines.groupby("series", sort=False)):
        c = colour(k)
        p = f"p{float(group['percentile'].iloc[0]):g}"
        target = float(group["target"].iloc[0])
        has_target = math.isfinite(target) and first is not None
        # The legend names the target with its line, so it stays one entry per engine.
        legend = f"{name} {p}" + (f" (≤ {_ms(target)})" if has_target else "")
        data.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": legend,
                "legendgroup": str(name),
                "x": _x(group["bucket"]),
                "y": _y(group["value"]),
                "line": {"color": c, "width": 2},
                "marker": {"size": 3},
                "connectgaps": False,
                # Names reach the template by reference, never pasted into it (a name may
                # hold "%{" or markup).
                "hovertemplate": f"%{{x}}<br>%{{fullData.name}}: {label} %{{y:,.1f}} ms"
                "<extra></extra>",
            }
        )
        if has_target:
            data.append(
                {
                    "type": "scatter",
                    "mode": "lines",
                    "name": f"{name} target",
                    "legendgroup": str(name),
                    "showlegend": False,
                    "x": [first, last],
                    "y": [target, target],
                    "line": {"color": c, "dash": "dash", "width": 1.5},
                    "hovertemplate": f"%{{fullData.name}}: {label} {p} ≤ {_ms(target)}"
                    "<extra></extra>",
                }
            )
    return {"data": data, "layout": _layout("time", f"{label} (ms)")}


def money_figure(frame: pd.DataFrame, unit: str, currency: str | None = None) -> dict:
    """Per engine, now against its best plan (columns engine, now, best, now_label,
    best_label, now_replicas, best_replicas), in `unit` a month: money when `currency`
    is given, else GPU-hours."""

    def fmt(v: float) -> str:
        figure = f"{v:,.0f}"
        if currency is None:
            return figure
        return f"{currency}{figure}" if len(currency) == 1 else f"{figure} {currency}"

    engines = [str(e) for e in frame["engine"]]
    data = []
    for name, column, col in (("now", "now", NOW_COLOUR), ("best plan", "best", BEST_COLOUR)):
        values = [float(v) for v in frame[column]]
        data.append(
            {
                "type": "bar",
                "name": name,
                "x": engines,
                "y": values,
                "text": [fmt(v) for v in values],
                "textposition": "outside",
                "cliponaxis": False,
                "marker": {"color": col},
                "customdata": [
                    [str(lbl), int(n)]
                    for lbl, n in zip(
                        frame[f"{column}_label"], frame[f"{column}_replicas"], strict=True
                    )
                ],
                "hovertemplate": f"%{{x}} {name}: %{{text}} {unit_words(unit)}<br>"
                "%{customdata[0]}<br>peak %{customdata[1]} replicas<extra></extra>",
            }
        )
    layout = _layout("engine", unit, barmode="group")
    layout["xaxis"]["type"] = "category"
    return {"data": data, "layout": layout}


def unit_words(unit: str) -> str:
    """'GPU-hours/month' -> 'GPU-hours a month'; money units read 'a month'."""
    return unit.replace("/month", " a month").replace(" per month", " a month")


def sparkline_figure(
    x: Sequence, y: Sequence, *, target: float | None = None, percent: bool = False
) -> dict:
    """A KPI's trend: a small filled line with no axes, grid or legend (its target dashed)."""
    xs, ys = _x(x), _y(y)
    fmt = ".1%" if percent else ",.3~g"
    data: list[dict] = [
        {
            "type": "scatter",
            "mode": "lines",
            "x": xs,
            "y": ys,
            "fill": "tozeroy" if not percent else "none",
            "line": {"color": SPARK_COLOUR, "width": 1.5},
            "fillcolor": "rgba(76, 110, 245, 0.12)",
            "hovertemplate": f"%{{x}}<br>%{{y:{fmt}}}<extra></extra>",
        }
    ]
    if target is not None and xs:
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "x": [xs[0], xs[-1]],
                "y": [target, target],
                "line": {"color": SPARK_TARGET, "dash": "dot", "width": 1},
                "hoverinfo": "skip",
            }
        )
    hidden: dict = {"visible": False, "fixedrange": True}
    finite = [v for v in ys if v is not None]
    yaxis: dict = dict(hidden)
    if percent and finite:
        low = min([*finite, target if target is not None else 1.0])
        yaxis["range"] = [max(0.0, low - 0.02), 1.005]
    return {
        "data": data,
        # No template: with no axes or legend it changes nothing, and four copies of it
        # would add ~28 kB to the page.
        "layout": {
            "height": 44,
            "margin": {"l": 0, "r": 0, "t": 2, "b": 2},
            "xaxis": hidden,
            "yaxis": yaxis,
            "showlegend": False,
            "plot_bgcolor": "rgba(0,0,0,0)",
            "paper_bgcolor": "rgba(0,0,0,0)",
            "hovermode": "x",
        },
    }


# The fleet's p95 latencies, one colour each (the Latency page's measures).
FLEET_LINES = (
    ("ttft_ms", "TTFT", "#1f77b4"),
    ("itl_ms", "ITL", "#2ca02c"),
    ("e2e_ms", "total (E2E)", "#9467bd"),
)


def fleet_latency_figure(frame: pd.DataFrame, percentile: float = 95.0) -> dict:
    """The fleet's TTFT, ITL and total (E2E) at one percentile per bucket (columns bucket and
    any of ttft_ms, itl_ms, e2e_ms), on one log axis: tens of ms of ITL and tens of seconds of
    E2E read on the same chart."""
    p = f"p{percentile:g}"
    xs = _x(frame["bucket"])
    data = []
    for column, label, c in FLEET_LINES:
        if column not in frame:
            continue
        # A log axis has no place for 0 or less (a row that measured nothing of it).
        ys = [v if v is not None and v > 0 else None for v in _y(frame[column])]
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"{label} {p}",
                "x": xs,
                "y": ys,
                "line": {"color": c, "width": 2},
                "connectgaps": False,
                "hovertemplate": f"%{{x}}<br>{label} {p} %{{y:,.0f}} ms<extra></extra>",
            }
        )
    layout = _layout("time", f"{p} latency (ms, log)")
    layout["yaxis"] = {"title": {"text": f"{p} latency (ms, log)"}, "type": "log"}
    return {"data": data, "layout": layout}


def sparkline_svg(
    values: Sequence, *, width: int = 220, height: int = 36, colour: str = SPARK_COLOUR
) -> str:
    """A tiny filled line of `values` (None or NaN: a gap) as an SVG data URL, for an <img>:
    a dozen cards cost no plot to draw. Empty when nothing is drawable."""
    ys = _y(values)
    finite = [v for v in ys if v is not None]
    if not finite:
        return ""
    top = max(finite) or 1.0
    n = len(ys)
    pad = 1.5

    def point(k: int, v: float) -> str:
        x = pad + (width - 2 * pad) * (k / (n - 1) if n > 1 else 0.5)
        y = height - pad - (height - 2 * pad) * (v / top)
        return f"{x:.1f},{y:.1f}"

    runs: list[list[tuple[int, float]]] = [[]]
    for k, v in enumerate(ys):
        if v is None:
            if runs[-1]:
                runs.append([])
        else:
            runs[-1].append((k, v))
    shapes = []
    for run in (r for r in runs if r):
        line = " ".join(point(k, v) for k, v in run)
        first, last = point(run[0][0], 0.0), point(run[-1][0], 0.0)
        shapes.append(
            f'<polygon points="{first} {line} {last}" fill="{colour}" fill-opacity="0.14"/>'
            f'<polyline points="{line}" fill="none" stroke="{colour}" stroke-width="1.5" '
            'stroke-linejoin="round"/>'
        )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" preserveAspectRatio="none">{"".join(shapes)}</svg>'
    )
    return "data:image/svg+xml," + quote(svg)
