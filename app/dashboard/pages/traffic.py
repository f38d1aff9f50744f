"""Traffic page: requests/s and tokens/s over time, and the weekday x hour-of-day matrix."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dash import html

from app.analytics import rollups, traffic, windows
from app.analytics.rollups.missing import raw_only_note
from app.charts import traffic as charts
from app.dashboard import filterbar, ids
from app.dashboard.pages import graph_card, register_page
from app.storage.database import Database


def layout_for(db: Database, query: dict, now: datetime, tz: str) -> html.Div:
    """The page for a URL query."""
    cur = db.cursor()
    view, flt, bar = filterbar.prepare(db, query, now, tz=tz)
    start, end, count = windows.span(cur, flt)
    if count == 0:
        return html.Div([html.H2("Traffic"), bar, filterbar.empty_state(view, ids.TRAFFIC_EMPTY)])
    bucket = windows.bucket_for(start, end)
    rates = traffic.rates(cur, flt, bucket, tz)
    matrix = traffic.hour_weekday(cur, flt, tz)
    # Buckets under an hour, and zones with half-hour offsets, read the rates raw: then say
    # what the raw rows no longer count.
    seconds = windows.BUCKETS[bucket]
    source = rollups.coverage(cur, flt, seconds, tz)
    return html.Div(
        [
            html.H2("Traffic"),
            bar,
            html.P(
                [
                    html.Span(f"{int(rates['requests'].sum()):,}", id=ids.TRAFFIC_TOTAL),
                    f" requests; rates averaged over {bucket} buckets ({tz}).",
                ],
                className="muted",
            ),
            html.P(
                source or raw_only_note(cur, flt, now) or "",
                id=ids.TRAFFIC_SOURCE,
                className="muted",
            ),
            graph_card(
                "Requests and tokens per second", ids.TRAFFIC_RATES, charts.rates_figure(rates)
            ),
            graph_card(
                "When requests arrive",
                ids.TRAFFIC_MATRIX,
                charts.weekday_hour_figure(matrix, tz),
                html.P(
                    "Request counts per weekday and hour of day over the window.",
                    className="muted",
                ),
            ),
        ]
    )


def register(db: Database, clock: Callable[[], datetime], tz: str) -> None:
    """Register the page at /traffic."""
    register_page(
        __name__, "/traffic", "Traffic", 3, lambda **query: layout_for(db, query, clock(), tz)
    )
