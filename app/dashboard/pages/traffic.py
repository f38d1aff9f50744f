"""Traffic page: requests/s and tokens/s over time (requests/s also split by model, engine,
tenant or gateway), the prefix-cache hit rate per engine, and the weekday x hour matrix."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from dash import html

from app.analytics import rollups, split, traffic, windows
from app.analytics.rollups.missing import raw_only_note
from app.charts import traffic as charts
from app.dashboard import filterbar, ids
from app.dashboard.pages import graph_card, register_page
from app.storage.database import Database

SPLIT_OPTIONS = {"": "none", **{d: d for d in split.SPLITS}}


def split_bar(query: dict) -> tuple[str | None, list, list]:
    """The URL's `split`: the dimension (None: unsplit), the filter bar's select for it, and
    the page's words when the value was not one of the choices (like the bar's own)."""
    by, problem = split.parse(query.get("split"))
    select = filterbar.choice("split", "split by", SPLIT_OPTIONS, by or "")
    words = [html.P(problem, className="field-error", id=ids.SPLIT_PROBLEM)] if problem else []
    return by, [select], words


def split_card(db: Database, flt, bucket: str, tz: str, by: str) -> html.Div:
    """Requests/s over time, a line per busiest value of `by` and one of the rest."""
    found = traffic.requests_by(db.cursor(), flt, bucket, tz, by)
    named = [n for n, _ in found.series if n != split.OTHER]
    rest = any(n == split.OTHER for n, _ in found.series)
    note = (
        f"Requests/s per {bucket} bucket for the {len(named)} busiest {by}s by requests"
        + (f", and {split.OTHER} for every other {by} and rows without one" if rest else "")
        + "; the hover says how many requests each point stands for."
    )
    if not found.raw:
        note += " Exact, from the rollups."
    elif by == "tenant":
        note += (
            " Split by tenant reads raw rows (tenants are kept only in the full-grain hourly "
            "rollups)"
            + ("; estimated from sampled rows (1/sample_rate)." if found.sampled else ": exact.")
        )
    elif found.sampled:
        note += " Estimated from sampled rows (1/sample_rate)."
    return graph_card(
        f"Requests per second by {by}",
        ids.TRAFFIC_SPLIT,
        charts.requests_split_figure(found.series),
        html.P(note, className="muted", id=ids.TRAFFIC_SPLIT_NOTE),
    )


def cache_card(db: Database, flt, bucket: str, tz: str) -> html.Div:
    """The prefix-cache hit rate per engine over time, or the words saying no request
    reports cached_tokens."""
    cur = db.cursor()
    reported, total = split.reporting(cur, flt, "cached_tokens")
    title = "Prefix-cache hit rate by engine"
    if reported == 0:
        return html.Div(
            [
                html.H3(title),
                html.P(
                    f"None of the window's {total:,} requests reports cached_tokens (prompt "
                    "tokens served from the engine's prefix cache): nothing to chart. Gateways "
                    "that know it send it as cached_tokens.",
                    className="muted",
                    id=ids.TRAFFIC_CACHE_NOTE,
                ),
            ],
            className="card",
        )
    found = traffic.cache_hits(cur, flt, bucket, tz)
    share = reported / total if total else 0.0
    note = (
        f"Cached input tokens / input tokens per {bucket} bucket, of the requests that report "
        f"cached_tokens: {reported:,} of {total:,} ({share:.1%}); the rest are left out. "
        "From raw rows (no rollup keeps it)."
        + (" Estimated from sampled rows (1/sample_rate)." if found.sampled else "")
    )
    return graph_card(
        title,
        ids.TRAFFIC_CACHE,
        charts.cache_hit_figure(found.series),
        html.P(note, className="muted", id=ids.TRAFFIC_CACHE_NOTE),
    )


def layout_for(db: Database, query: dict, now: datetime, tz: str) -> html.Div:
    """The page for a URL query."""
    cur = db.cursor()
    by, extra, split_problem = split_bar(query)
    view, flt, bar = filterbar.prepare(db, query, now, extra, tz=tz)
    tz = view.tz  # the zone the page shows its times in (the URL's, else the server's)
    start, end, count = windows.span(cur, flt)
    if count == 0:
        return html.Div(
            [
                html.H2("Traffic"),
                bar,
                *split_problem,
                filterbar.empty_state(view, ids.TRAFFIC_EMPTY),
            ]
        )
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
            *split_problem,
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
            *([split_card(db, flt, bucket, tz, by)] if by else []),
            graph_card(
                "Requests and tokens per second" + (" (all)" if by else ""),
                ids.TRAFFIC_RATES,
                charts.rates_figure(rates),
            ),
            cache_card(db, flt, bucket, tz),
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
