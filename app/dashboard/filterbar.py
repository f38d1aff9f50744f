"""The shared filter bar: a plain GET form, so every view is a shareable URL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from dash import dcc, html

from app.analytics import overview, sampling
from app.analytics.filters import Filter, time_problem
from app.config import zones
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
# Auto-refresh: seconds between reloads (static/filterbar.js reloads the page, paused while the
# tab is hidden), kept in the URL like the rest.
REFRESH = {"": "off", "30": "30 s", "60": "1 min", "300": "5 min"}


@dataclass(frozen=True)
class View:
    """What the URL asks for: the window preset, custom bounds and the chosen dimensions."""

    window: str
    start: datetime | None
    end: datetime | None
    choices: dict[str, str]
    problems: tuple[str, ...] = ()
    refresh: str = ""  # a key of REFRESH
    tz: str = "UTC"  # the zone times are shown in (the URL's `tz`, else the server's)
    tz_asked: bool = False  # the URL names the zone: its zone-less times are in it

    def filter(self) -> Filter:
        """The analytics filter of this view."""
        return Filter(
            start=self.start,
            end=self.end,
            **{f"{d}s": ((self.choices[d],) if self.choices.get(d) else ()) for d in DIMENSIONS},  # type: ignore[arg-type]  # keys: the str-tuple fields models..tenants
        )


def parse_time(text: object, zone: str = "UTC") -> datetime | None:
    """An ISO 8601 time from a URL query (in `zone` when it names none); None if absent or
    broken."""
    if not text or not isinstance(text, str):
        return None
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    if not value.tzinfo:
        value = value.replace(tzinfo=UTC if zone == "UTC" else ZoneInfo(zone))
    return None if time_problem("time", value) else value


def parse_query(query: dict, now: datetime, default_tz: str = "UTC") -> View:
    """The view a URL query describes; a broken value falls back to a default and says so in
    `problems` (shown under the bar), never silently. Times are shown in the URL's `tz`, else
    `default_tz`; zone-less times in the URL are in its `tz`, else UTC (so links made before
    the zone switch restore exactly)."""
    asked = str(query.get("window") or "")
    window = asked or "7d"
    start = end = None
    problems: list[str] = []
    tz, tz_asked = default_tz, False
    if query.get("tz"):
        wanted = str(query["tz"])
        if wanted in zones():
            tz, tz_asked = wanted, True
        else:
            problems.append(
                f"“tz”: {wanted[:40]!r} is not an IANA time zone (e.g. UTC, Europe/Berlin); "
                f"times are shown in {default_tz}."
            )
    url_zone = tz if tz_asked else "UTC"
    if window not in (*WINDOWS, "custom"):
        problems.append(
            f"“window”: {asked[:40]!r} is not one of {', '.join(WINDOWS)} or custom; showing "
            f"the {WINDOW_LABELS['7d']}."
        )
        window = "7d"
    # A from or to typed while a preset is chosen means that range (the page's script also
    # switches the select as one types): never silently ignored.
    if window != "custom" and (query.get("start") or query.get("end")):
        window = "custom"
    if window == "custom":
        start = parse_time(query.get("start"), url_zone)
        end = parse_time(query.get("end"), url_zone)
        for label, text, value in (
            ("from", query.get("start"), start),
            ("to", query.get("end"), end),
        ):
            if text and value is None:
                problems.append(
                    f"“{label}”: {str(text)[:40]!r} is not a time between 1970 and 2200; use "
                    f"e.g. 2026-11-20T08:00 ({url_zone}). The window is open-ended on that side."
                )
        if start and end and start >= end:
            problems.append(
                f"“from” was after “to”: showing {_short(end, tz)} to {_short(start, tz)} "
                f"({tz}) instead."
            )
            start, end = end, start
    else:
        span = WINDOWS[window]
        start = now - span if span else None
    choices = {d: str(query[d]) for d in DIMENSIONS if query.get(d)}
    refresh = str(query.get("refresh") or "")
    if refresh not in REFRESH:
        problems.append(
            f"“refresh”: {refresh[:20]!r} is not one of 30, 60 or 300 seconds; auto-refresh is off."
        )
        refresh = ""
    return View(window, start, end, choices, tuple(problems), refresh, tz, tz_asked)


def zoom_out(view: View, query: dict, now: datetime) -> str | None:
    """The page's URL with its window twice as long around the same middle (never past now),
    or None for an open window (all time)."""
    if view.start is None:
        return None
    end = view.end or now
    span = end - view.start
    new_end = min(end + span / 2, now)
    new_start = new_end - 2 * span
    keep = {k: str(v) for k, v in query.items() if v and k not in ("window", "start", "end")}
    fmt = "%Y-%m-%dT%H:%M"
    zone = _zone(view.tz if view.tz_asked else "UTC")
    keep |= {"window": "custom", "start": new_start.astimezone(zone).strftime(fmt)}
    keep["end"] = new_end.astimezone(zone).strftime(fmt)
    return "?" + urlencode(keep)


def _zone(name: str):  # type: ignore[no-untyped-def]
    return UTC if name == "UTC" else ZoneInfo(name)


def _short(t: datetime, tz: str = "UTC") -> str:
    return t.astimezone(_zone(tz)).strftime("%Y-%m-%d %H:%M")


def _span(delta: timedelta) -> str:
    """A duration in words: 7 days, 36 hours, 45 minutes."""
    minutes = round(delta.total_seconds() / 60)
    if minutes % (24 * 60) == 0 and minutes >= 48 * 60:
        n, unit = minutes // (24 * 60), "day"
    elif minutes % 60 == 0 and minutes >= 60:
        n, unit = minutes // 60, "hour"
    elif minutes >= 48 * 60:
        return f"{delta.total_seconds() / 86400:.1f} days"
    elif minutes >= 120:
        return f"{delta.total_seconds() / 3600:.1f} hours"
    else:
        n, unit = minutes, "minute"
    return f"{n:,} {unit}{'' if n == 1 else 's'}"


def range_words(view: View, now: datetime) -> str:
    """The window the page shows, in words: 'Showing 2026-11-22 12:00 to 2026-11-29 12:00 UTC
    (7 days)', in the view's zone; open ends say where they stop."""
    if view.start is None and view.end is None:
        return "Showing all stored requests (all time)."
    tz = view.tz
    lo = f"{_short(view.start, tz)}" if view.start else "the first request"
    hi = _short(view.end, tz) if view.end else f"now ({_short(now, tz)})"
    span = f" ({_span((view.end or now) - view.start)})" if view.start else ""
    return f"Showing {lo} to {hi} {tz}{span}."


def _select(name: str, label: str, values: list[str], chosen: str | None, blank: str):
    options = [html.Option(blank, value="")] + [
        html.Option(v, value=v, selected=(v == chosen)) for v in values
    ]
    if chosen and chosen not in values:
        options.append(html.Option(chosen, value=chosen, selected=True))
    return html.Label([html.Span(label), html.Select(options, name=name, id=f"filter-{name}")])


def _time_input(name: str, label: str, value: datetime | None, tz: str) -> html.Label:
    # Text that static/filterbar.js turns into a native date-time picker (dcc.Input knows no
    # datetime-local); its value, zone-less, is in the zone the form submits with it (the
    # label says which). The placeholder names the format, so it never passes for a value.
    text = value.astimezone(_zone(tz)).strftime("%Y-%m-%dT%H:%M") if value else ""
    return html.Label(
        [
            html.Span(label),
            dcc.Input(
                type="text",
                name=name,
                id=f"filter-{name}",
                value=text,
                placeholder="YYYY-MM-DDTHH:MM",
                className="time-input",
                style={"width": "17em"},  # a whole date and time visible (12-hour clocks too)
            ),
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
    now: datetime | None = None,
    query: dict | None = None,
    tz: str = "UTC",
) -> html.Form:
    """The filter bar for a view, with the choices the database offers and a page's own, and
    `note` (the window was sampled: "estimated from a 1% sample of …") after them; with `now`,
    the window it resolves to, in words, and a zoom-out link (keeping the rest of `query`).
    `tz` is the zone the page's time axes are drawn in: dragging across one sets the window
    (static/filterbar.js reads it from the form's data-tz)."""
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
            "start", f"from ({view.tz})", view.start if view.window == "custom" else None, view.tz
        ),
        _time_input(
            "end", f"to ({view.tz})", view.end if view.window == "custom" else None, view.tz
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
            _zone_select(view, tz),
            html.Button("Apply", type="submit", id=ids.FILTER_APPLY),
            choice("refresh", "auto-refresh", REFRESH, view.refresh),
            *(_range(view, now, query or {}) if now is not None else []),
            *([html.P(note, className="sampling-note", id=ids.SAMPLING_NOTE)] if note else []),
            *[html.P(problem, className="field-error") for problem in view.problems],
        ],
        method="get",
        className="filterbar",
        id=ids.FILTER_BAR,
        # data-* is a wildcard prop Dash's typed signature does not list.
        **{"data-tz": view.tz, "data-server-tz": tz},  # type: ignore[arg-type]
    )


def _zone_select(view: View, server_tz: str) -> html.Label:
    # The server's zone, UTC, and the URL's if another; static/filterbar.js adds the browser's
    # own zone and remembers the choice. Always submitted, so typed times are read in it.
    options = {server_tz: f"{server_tz} (server)", "UTC": "UTC"}
    options.setdefault(view.tz, view.tz)
    return html.Label(
        [
            html.Span("times in"),
            html.Select(
                [
                    html.Option(text, value=v, selected=(v == view.tz))
                    for v, text in options.items()
                ],
                name="tz",
                id=ids.FILTER_TZ,
            ),
        ]
    )


def _range(view: View, now: datetime, query: dict) -> list:
    words: list = [range_words(view, now)]
    if (href := zoom_out(view, query, now)) is not None:
        words += [" ", html.A("Zoom out", href=href, id=ids.FILTER_ZOOM_OUT)]
    hint = " Drag across a time chart to zoom in; Back returns." if view.start else ""
    return [html.P([*words, hint], className="range-words", id=ids.FILTER_RANGE)]


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
    tz: str = "UTC",
) -> tuple[View, Filter, html.Form]:
    """What every filtered page starts with: the view, its filter, and the filter bar (which
    says so when the window's counts are estimated from sampled rows); `tz`, the server's zone,
    shown unless the URL names another (`view.tz` is the one to draw the page's times in)."""
    view = parse_query(query, now, tz)
    flt = view.filter()
    note = sampling.sampling(db.cursor(), flt).note()
    return view, flt, render(view, choices(db), extra, note, now, query, tz)
