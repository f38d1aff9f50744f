"""The weekly email over the API: GET /api/reports/preview (the email of a past week, unsent)
and POST /api/reports/send (send it, or a test copy), so `tokenshape report` works while the
server holds the database."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, Field

from app.auth.bearer import require_scope
from app.jobs.schedule import canonical_week, last_full_week, week_bounds
from app.reports.build import report_for
from app.reports.links import check_links
from app.reports.render import compose, render
from app.reports.send import deliver_week, recipients_of, resend_week, send_test
from app.server.deps import ClockDep, DbDep, SettingsDep

router = APIRouter(tags=["reports"])
REPORT_HEADER = "X-Tokenshape-Report"  # the preview's subject and links, JSON in ASCII (CLI)
_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "The week is not an ISO week, or has not ended yet."},
}

Week = Annotated[
    str | None,
    Query(
        max_length=16,
        description="ISO week, e.g. 2026-W47 (default: the last full week in TOKENSHAPE_REPORT_TZ)",
    ),
]
To = Annotated[
    str | None,
    Query(max_length=2000, description="comma-separated recipients for the To header"),
]
Format = Annotated[
    Literal["json", "html", "text", "eml"],
    Query(
        description="json (subject, summary, money, sentences, html, text), html, text or "
        "eml (the whole message, as it would be sent)"
    ),
]


def _week(asked: str | None, settings, now) -> str:
    """The asked week (checked, ended) or the last full one; 400 in words otherwise."""
    if not asked:
        return last_full_week(now, settings.report_tz)
    try:
        week = canonical_week(asked)
        ends = week_bounds(week, settings.report_tz)[1]
    except ValueError as exc:
        raise HTTPException(400, detail=str(exc)) from None
    if ends > now:
        raise HTTPException(
            400,
            detail=f"week {week} has not ended yet, so it has no report; ask for "
            f"{last_full_week(now, settings.report_tz)} or an earlier week",
        )
    return week


def _to(text: str | list[str] | None) -> list[str]:
    items = text.split(",") if isinstance(text, str) else (text or [])
    return [t.strip() for t in items if t.strip()]


def links_of(settings, seen: str | None) -> dict[str, Any]:
    """The email's links: TOKENSHAPE_PUBLIC_URL, whether it is set, and the verdict on it."""
    explicit = "public_url" in settings.model_fields_set
    verdict = check_links(settings.public_url, explicit, seen)
    return {
        "public_url": settings.public_url,
        "set": explicit,
        "ok": verdict.ok,
        "message": verdict.message,
    }


@router.get(
    "/api/reports/preview",
    responses={
        **_ERRORS,
        200: {
            "description": "The email as JSON, or its HTML, text or .eml; the subject and the "
            "links' verdict also ride in X-Tokenshape-Report",
            "content": {"text/html": {}, "text/plain": {}, "message/rfc822": {}},
        },
    },
    summary="The weekly email of a past week, unsent",
)
def preview(
    request: Request,
    db: DbDep,
    settings: SettingsDep,
    clock: ClockDep,
    week: Week = None,
    to: To = None,
    format: Format = "json",
) -> Response:
    """The email for a week exactly as it would be sent (a read token suffices: the Reports
    page shows it to every viewer)."""
    chosen = _week(week, settings, clock())
    report = report_for(db, settings, chosen)
    links = links_of(settings, str(request.base_url))
    meta = {"week": chosen, "subject": report.subject, "links": links}
    headers = {REPORT_HEADER: json.dumps(meta, ensure_ascii=True)}
    if format == "eml":
        recipients = _to(to) or recipients_of(settings)[0] or ["(no recipients set)"]
        msg = compose(report, settings.smtp_from, recipients)
        headers["Content-Disposition"] = f'attachment; filename="report-{chosen}.eml"'
        return Response(msg.as_bytes(), media_type="message/rfc822", headers=headers)
    html, text = render(report)
    if format == "html":
        return Response(html, media_type="text/html; charset=utf-8", headers=headers)
    if format == "text":
        return Response(text, media_type="text/plain; charset=utf-8", headers=headers)
    body = {
        **meta,
        "summary": report.summary,
        "money": report.money_line,
        "engines": [
            {
                "engine": e.name,
                "status": e.status.as_dict() if e.status else None,
                "sentence": e.sentence,
            }
            for e in report.engines
        ],
        "html": html,
        "text": text,
    }
    return JSONResponse(body, headers=headers)


class SendIn(BaseModel):
    """What to send: a week (default: the last full one), to whom, and whether as a test."""

    week: str | None = Field(None, max_length=16, description="ISO week, e.g. 2026-W47")
    to: list[str] | None = Field(
        None,
        max_length=50,
        description="recipients instead of TOKENSHAPE_REPORT_TO (and of the engines' teams)",
    )
    test: bool = Field(
        False,
        description="a test copy: one attempt, subject marked [test], not recorded, so the "
        "week's real email still goes out; to `to`, else TOKENSHAPE_REPORT_TO",
    )
    resend: bool = Field(
        False,
        description="send a week in doubt again (possibly sent: the SMTP server gave no answer "
        "after DATA, or a send was interrupted); never done automatically",
    )


class SendOut(BaseModel):
    """What happened: sent, skipped (with why) or failed (with the SMTP error in words)."""

    week: str
    status: Literal["sent", "skipped", "failed"]
    detail: str
    message_id: str | None = None


@router.post(
    "/api/reports/send",
    response_model=SendOut,
    dependencies=[Depends(require_scope("admin"))],
    responses={
        **_ERRORS,
        401: {"description": "Missing, unknown or revoked token."},
        403: {"description": "The token is not an admin token."},
        502: {"description": "The SMTP server could not be reached or refused the email."},
    },
    summary="Send the weekly email of a past week (or a test copy)",
)
def send(body: SendIn, db: DbDep, settings: SettingsDep, clock: ClockDep) -> JSONResponse:
    """Send a week's email through the same code as the schedule: a week already sent is
    skipped, temporary SMTP failures are retried, every attempt is in the send history."""
    chosen = _week(body.week, settings, clock())
    to = _to(body.to)
    if body.test:
        outcome = send_test(db, settings, chosen, to or recipients_of(settings)[0])
    elif body.resend:
        outcome = resend_week(db, settings, chosen, clock=clock)
    else:
        try:
            outcome = deliver_week(db, settings, chosen, clock=clock, to=to or None)
        except ValueError as exc:
            raise HTTPException(400, detail=str(exc)) from None
    out = SendOut(**outcome.__dict__)
    return JSONResponse(out.model_dump(), status_code=502 if outcome.status == "failed" else 200)
