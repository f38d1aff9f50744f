"""Reports page: the weekly email of any past week as it would be sent, whether its links lead
here (TOKENSHAPE_PUBLIC_URL), a test email for admins, and the send history."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import dash
from dash import ALL, Input, Output, State, ctx, dcc, html

from app.auth import principal
from app.dashboard import filterbar, ids
from app.dashboard.pages import register_page
from app.jobs.schedule import canonical_week, last_full_week, week_bounds
from app.reports.build import report_for
from app.reports.links import check_links
from app.reports.render import render
from app.reports.send import recipients_for_test, resend_week, send_test
from app.services import report_runs
from app.storage.database import Database

LINKS_OK, LINKS_PROBLEM = "card links-ok", "card field-error links-problem"


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


def links_note(settings, href: str | None) -> html.Div:
    """Whether the email's links lead to this dashboard: TOKENSHAPE_PUBLIC_URL against the
    address this page was opened at (the page request's base URL, as the browser sent it)."""
    explicit = "public_url" in settings.model_fields_set
    verdict = check_links(settings.public_url, explicit, href or None)
    return html.Div(
        html.P(verdict.message),
        className=LINKS_OK if verdict.ok else LINKS_PROBLEM,
    )


def _test_block(settings) -> html.Div | None:
    """The admins' "Send a test email to me" button, saying beforehand where it goes."""
    if not principal.is_admin():
        return None
    who = principal.current()
    to, why = recipients_for_test(settings, who.name if who and who.via == "session" else None)
    problem = None
    if not settings.smtp_host:
        problem = "No SMTP server: set TOKENSHAPE_SMTP_HOST (and its port, TLS and login)."
    elif not to:
        problem = f"No address to send to: {why.removeprefix('nobody: ')}."
    where = (
        f"It goes to {', '.join(to)} — {why} — through {settings.smtp_host}:"
        f"{settings.smtp_port}, marked [test] and not recorded, so the week's real email still "
        "goes out."
        if not problem
        else problem
    )
    return html.Div(
        [
            html.H3("Test email"),
            html.P(where, className="muted"),
            html.Button(
                "Send a test email to me",
                id=ids.REPORTS_TEST_SEND,
                disabled=problem is not None,
                n_clicks=0,
            ),
            html.Div(id=ids.REPORTS_TEST_RESULT, role="status"),
        ],
        className="report-test",
    )


def test_result(db: Database, settings, week: str) -> html.Div:
    """Send the test email for `week` as the current admin asked; the outcome in words."""
    if not principal.is_admin():
        return html.Div(html.P("Only admins can send a test email."), className="card")
    who = principal.current()
    to, _ = recipients_for_test(settings, who.name if who and who.via == "session" else None)
    try:
        outcome = send_test(db, settings, week, to)
    except ValueError as exc:
        return html.Div(html.P(f"Not sent: {exc}."), className="card field-error")
    if outcome.status == "sent":
        return html.Div(
            html.P(f"Sent: {outcome.detail}. Check the inbox (and its spam folder)."),
            className="card test-sent",
        )
    return html.Div(
        html.P(f"Not sent: {outcome.detail}"),
        className=f"card field-error test-{outcome.status}",
    )


def _doubt_block(db: Database, now: datetime) -> html.Div | None:
    """Weeks whose email may have gone out (no answer after DATA, or a send cut short): never
    resent by themselves; an admin resends one here, knowing a second copy may arrive."""
    doubtful = report_runs.in_doubt(db, now)
    if not doubtful:
        return None
    admin = principal.is_admin()
    rows = []
    for d in doubtful:
        why = d["error"] or "a send was interrupted (the server stopped mid-send)"
        rows.append(
            html.Li(
                [
                    html.B(d["week"]),
                    f": possibly sent — {why}. Check the recipients' inboxes; ",
                    dcc.ConfirmDialogProvider(
                        html.Button(f"Resend {d['week']}", type="button"),
                        id={"type": ids.REPORTS_RESEND, "week": d["week"]},
                        message=f"Send the email for {d['week']} again? If the first one was "
                        "delivered, the recipients get two copies.",
                    )
                    if admin
                    else "an admin can resend it here.",
                ]
            )
        )
    return html.Div(
        [
            html.H3("Possibly sent"),
            html.P(
                "These weeks' emails may have been delivered: the SMTP server was sent the "
                "whole message and gave no answer. They are never sent again automatically "
                "(a duplicate is worse than a gap).",
                className="muted",
            ),
            html.Ul(rows),
            html.Div(id=ids.REPORTS_RESEND_RESULT, role="status"),
        ],
        className="card warning",
        id=ids.REPORTS_DOUBT,
    )


def resend_result(db: Database, settings, week: str, now: Callable[[], datetime]) -> html.P:
    """Resend a week in doubt and say what happened."""
    try:
        outcome = resend_week(db, settings, week, clock=now)
    except ValueError as exc:  # the week is the request's: anything may come
        return html.P(f"Not sent: {exc}.", className="field-error")
    words = {"sent": "Sent again", "skipped": "Not sent", "failed": "Failed"}
    return html.P(
        f"{words.get(outcome.status, outcome.status)}: {outcome.detail}",
        className="saved" if outcome.status == "sent" else "field-error",
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
            # Filled from the page's own address once the browser has it (a callback).
            dcc.Location(id=ids.REPORTS_LOCATION, refresh=False),
            html.Div(links_note(settings, None), id=ids.REPORTS_LINKS),
            dcc.Store(id=ids.REPORTS_WEEK, data=week),
            *([doubt] if (doubt := _doubt_block(db, now)) is not None else []),
            *([block] if (block := _test_block(settings)) is not None else []),
            # The email's own HTML, sandboxed: it is shown exactly as mail clients get it.
            html.Iframe(
                srcDoc=email,
                id=ids.REPORTS_PREVIEW,
                title="Preview of the weekly email",
                sandbox="allow-popups allow-popups-to-escape-sandbox",
                # Fluid like the email: as wide as the page up to the email's own width.
                style={
                    "width": "100%",
                    "maxWidth": "720px",
                    "height": "1100px",
                    "border": "1px solid #dfe3ec",
                },
            ),
            html.H3("Send history"),
            _history(db),
        ]
    )


def register(db: Database, clock: Callable[[], datetime], settings) -> None:
    """Register the page at /reports and its callbacks: the links' verdict against the
    page's address, and the admins' test email."""
    register_page(
        __name__, "/reports", "Reports", 6, lambda **query: layout_for(db, query, clock(), settings)
    )
    app = dash.get_app()  # the app being mounted (the shell passes none to this page)

    @app.callback(Output(ids.REPORTS_LINKS, "children"), Input(ids.REPORTS_LOCATION, "href"))
    async def _links(href: str | None):  # type: ignore[no-untyped-def]
        return links_note(settings, href if isinstance(href, str) else None)

    @app.callback(
        Output(ids.REPORTS_TEST_RESULT, "children"),
        Input(ids.REPORTS_TEST_SEND, "n_clicks"),
        State(ids.REPORTS_WEEK, "data"),
        prevent_initial_call=True,
    )
    async def _test(n_clicks: int | None, week: str | None):  # type: ignore[no-untyped-def]
        if not n_clicks:
            return dash.no_update
        chosen = week if isinstance(week, str) else last_full_week(clock(), settings.report_tz)
        return await asyncio.to_thread(test_result, db, settings, chosen)

    @app.callback(
        Output(ids.REPORTS_RESEND_RESULT, "children"),
        Input({"type": ids.REPORTS_RESEND, "week": ALL}, "submit_n_clicks"),
        prevent_initial_call=True,
    )
    async def _resend(clicks: list[int | None]):  # type: ignore[no-untyped-def]
        asked = ctx.triggered_id
        week = asked.get("week") if isinstance(asked, dict) else None
        if not any(clicks or []) or not isinstance(week, str):
            return dash.no_update
        if not principal.is_admin():  # the gate refuses it too; a request can skip the page
            return html.P("Only admins can resend the weekly email.", className="field-error")
        return await asyncio.to_thread(resend_result, db, settings, week, clock)
