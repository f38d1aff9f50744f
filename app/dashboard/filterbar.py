"""The shared filter bar: a plain GET form, so every view is a shareable URL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from dash import dcc, html

from app.analytics import overview, sampling
from app.analytics.filters import Filter
from app.dashboard import ids
from app.services import status
from app.storage.database import Database

WINDOWS = {
    "1h": timedelta(hours=1),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
    "all": None,
}
WINDOW_LABELS = {
    "1h": "last hour",
    "24h": "last 24 hours",
    "7d": "last 7 days",
    "30d": "last 30 days",
    "all": "all time",
    "custom": "custom",
}
DIMENSIONS = ("model", "engine", "gateway", "tenant")


@dataclass(frozen=True)
class View:
    """What the URL asks for: the window preset, custom bounds and the chosen dimensions."""

    window: str
    start: datetime | None
    end: datetime | None
    choices: dict[str, str]
    problems: tuple[str, ...] = ()

    def filter(self) -> Filter:
        """The analytics filter of this view."""
        return Filter(
            start=self.start,
            end=self.end,
            **{f"{d}s": ((self.choices[d],) if self.choices.get(d) else ()) for d in DIMENSIONS},  # type: ignore[arg-type]  # keys: the str-tuple fields models..tenants
        )


def parse_time(text: object) -> datetime | None:
    """An ISO 8601 time from a URL query (UTC when it names no zone); None if absent or broken."""
    if not text or not isinstance(text, str):
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def parse_query(query: dict, now: datetime) -> View:
    """The view a URL query describes; unknown or broken values fall back to defaults."""
    window = query.get("window") or "7d"
    start = end = None
    problems: list[str] = []
    if window == "custom":
        start, end = parse_time(query.get("start")), parse_time(query.get("end"))
        for label, text, value in (
            ("from", query.get("start"), start),
            ("to", query.get("end"), end),
        ):
            if text and value is None:
                problems.append(
                    f"“{label}”: {str(text)[:40]!r} is not a time; use e.g. 2026-11-20T08:00 "
                    f"(UTC). The window is open-ended on that side."
                )
        if start and end and start >= end:
            start, end = end, start
    elif window in WINDOWS:
        span = WINDOWS[window]
        start = now - span if span else None
    else:
        window = "7d"
        start = now - WINDOWS["7d"]  # type: ignore[operator]
    choices = {d: str(query[d]) for d in DIMENSIONS if query.get(d)}
    return View(window, start, end, choices, tuple(problems))


def _select(name: str, label: str, values: list[str], chosen: str | None, blank: str):
    options = [html.Option(blank, value="")] + [
        html.Option(v, value=v, selected=(v == chosen)) for v in values
    ]
    if chosen and chosen not in values:
        options.append(html.Option(chosen, value=chosen, selected=True))
    return html.Label([html.Span(label), html.Select(options, name=name, id=f"filter-{name}")])


def _time_input(name: str, label: str, value: datetime | None, example: str) -> html.Label:
    text = value.strftime("%Y-%m-%dT%H:%M") if value else ""
    return html.Label(
        [
            html.Span(label),
            dcc.Input(type="text", placeholder=example, name=name, id=f"filter-{name}", value=text),
        ]
    )


def choice(name: str, label: str, options: dict[str, str], chosen: str) -> html.Label:
    """A page's own select in the filter bar (e.g. counts or %), kept in the URL like the rest."""
    return html.Label(
        [
            html.Span(label),
            html.Select(
                [html.Option(text, value=v, selected=(v == chosen)) for v, text in options.items()],
                name=name,
                id=f"filter-{name}",
            ),
        ]
    )


def render(
    view: View,
    values: dict[str, list[str]],
    extra: list[html.Label] | None = None,
    note: str | None = None,
) -> html.Form:
    """The filter bar for a view, with the choices the database offers and a page's own, and
    `note` (the window was sampled: "estimated from a 1% sample of …") after them."""
    windows = html.Label(
        [
            html.Span("window"),
            html.Select(
                [
                    html.Option(WINDOW_LABELS[w], value=w, selected=(w == view.window))
                    for w in [*WINDOWS, "custom"]
                ],
                name="window",
                id="filter-window",
            ),
        ]
    )
    custom = [
        _time_input(
            "start",
            "from (UTC, ISO 8601)",
            view.start if view.window == "custom" else None,
            "2026-11-20T08:00",
        ),
        _time_input(
            "end", "to (UTC)", view.end if view.window == "custom" else None, "2026-11-21T08:00"
        ),
    ]
    selects = [
        _select(d, d, values.get(d, []), view.choices.get(d), f"all {d}s") for d in DIMENSIONS
    ]
    return html.Form(
        [
            windows,
            *custom,
            *selects,
            *(extra or []),
            html.Button("Apply", type="submit", id=ids.FILTER_APPLY),
            *([html.P(note, className="sampling-note", id=ids.SAMPLING_NOTE)] if note else []),
            *[html.P(problem, className="field-error") for problem in view.problems],
        ],
        method="get",
        className="filterbar",
        id=ids.FILTER_BAR,
    )


CURL = (
    'curl -s http://127.0.0.1:8050/v1/requests -H "Authorization: Bearer $TOKEN" '
    '-H \'Content-Type: application/json\' -d \'{"model": "llama-3.1-8b-instruct", '
    '"isl": 1300, "osl": 250}\''
)


def empty_state(view: View, component_id: str) -> html.Div:
    """What to do when the window holds no requests."""
    return html.Div(
        [
            html.H3("No requests in this window"),
            html.P(
                f"Nothing matches {WINDOW_LABELS[view.window]}"
                + (" with the chosen filters" if view.choices else "")
                + ". Widen the window (try “all time”), clear a filter, or ship a record:"
            ),
            html.Pre(CURL, className="code"),
        ],
        id=component_id,
        className="empty",
    )


# The filter bar's choices per database, valid while the row count and the rollups are
# unchanged: the DISTINCT scans cost ~0.1-0.3 s at 10M rows on every page load, a count(*) and
# the rollups' version about a millisecond (a lake import adds rollups, not rows).
_choices: dict[str, tuple[tuple, dict[str, list[str]]]] = {}


def choices(db: Database) -> dict[str, list[str]]:
    """Distinct models, engines, gateways and tenants, recomputed only when rows changed."""
    rows = (status.request_count(db), overview.rollup_version(db.cursor()))
    key = str(db.path)
    cached = _choices.get(key)
    if cached is None or cached[0] != rows:
        cached = (rows, overview.dimension_values(db.cursor()))
        _choices[key] = cached
    return cached[1]


def prepare(
    db: Database,
    query: dict,
    now: datetime,
    extra: list[html.Label] | None = None,
) -> tuple[View, Filter, html.Form]:
    """What every filtered page starts with: the view, its filter, and the filter bar (which
    says so when the window's counts are estimated from sampled rows)."""
    view = parse_query(query, now)
    flt = view.filter()
    note = sampling.sampling(db.cursor(), flt).note()
    return view, flt, render(view, choices(db), extra, note)
