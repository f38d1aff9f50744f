"""Reports page: the weekly email of any past week as it would be sent, and the send history."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from dash import html

from app.dashboard import filterbar, ids
from app.dashboard.pages import register_page
from app.jobs.schedule import canonical_week, last_full_week, week_bounds
from app.reports.build import report_for
from app.reports.render import render
from app.services import report_runs
from app.storage.database import Database


def _weeks(now: datetime, tz: str, count: int = 8) -> dict[str, str]:
    weeks = [last_full_week(now - timedelta(weeks=k), tz) for k in range(count)]
    return {w: w for w in weeks}


def _history(db: Database) -> html.Table:
    rows = [
        html.Tr(
            [
                html.Td(r["week"]),
                html.Td(f"{r['started_at'].astimezone(UTC):%Y-%m-%d %H:%M}"),
                html.Td(r["status"]),
                html.Td(str(r["attempt"])),
                html.Td(r["recipients"]),
                html.Td(r["error"] or "", className="muted"),
            ]
        )
        for r in report_runs.history(db)
    ]
    if not rows:
        rows = [html.Tr(html.Td("Nothing sent yet.", colSpan=6))]
    head = html.Tr([html.Th(h) for h in ("week", "when (UTC)", "status", "try", "to", "error")])
    return html.Table(
        [html.Thead(head), html.Tbody(rows)], className="grid history", id=ids.REPORTS_HISTORY
    )


def layout_for(db: Database, query: dict, now: datetime, settings) -> html.Div:
    """The page for a URL query: one week's email and the history."""
    weeks = _weeks(now, settings.report_tz)
    week = next(iter(weeks))
    asked = query.get("week")
    problems: list[str] = []
    if asked:
        try:  # any past week, not only those in the list
            ends = week_bounds(canonical_week(asked), settings.report_tz)[1]
        except ValueError:
            problems.append(
                f"“week”: {str(asked)[:20]!r} is not an ISO week; use e.g. {week}. Showing {week}."
            )
        else:
            if ends <= now:
                week = asked
                weeks.setdefault(asked, asked)
            else:
                problems.append(
                    f"“week”: {asked} has not ended yet, so it has no report; showing {week}, "
                    "the last whole week."
                )
    report = report_for(db, settings, week)
    email, _ = render(report)
    # Links open in a new tab: inside the sandboxed frame the dashboard could not run.
    email = email.replace("<head>", '<head><base target="_blank">', 1)
    schedule = (
        f"Scheduled: '{settings.report_cron}' in {settings.report_tz} to {settings.report_to}."
        if settings.report_to and settings.smtp_host
        else "Not scheduled: set TOKENSHAPE_SMTP_HOST and TOKENSHAPE_REPORT_TO to send it weekly."
    )
    form = html.Form(
        [
            filterbar.choice("week", "week", weeks, week),
            html.Button("Show", type="submit", id=ids.FILTER_APPLY),
            *[html.P(problem, className="field-error") for problem in problems],
        ],
        method="get",
        className="filterbar",
    )
    return html.Div(
        [
            html.H2("Weekly report"),
            form,
            html.P(
                [html.B(report.subject, id=ids.REPORTS_SUBJECT), html.Br(), schedule],
                className="muted",
            ),
            # The email's own HTML, sandboxed: it is shown exactly as mail clients get it.
            html.Iframe(
                srcDoc=email,
                id=ids.REPORTS_PREVIEW,
                title="Preview of the weekly email",
                sandbox="allow-popups allow-popups-to-escape-sandbox",
                style={"width": "660px", "height": "900px", "border": "1px solid #dfe3ec"},
            ),
            html.H3("Send history"),
            _history(db),
        ]
    )


def register(db: Database, clock: Callable[[], datetime], settings) -> None:
    """Register the page at /reports."""
    register_page(
        __name__, "/reports", "Reports", 6, lambda **query: layout_for(db, query, clock(), settings)
    )
