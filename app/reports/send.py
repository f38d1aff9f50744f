"""Sending the weekly email over SMTP: retries on temporary failures, every attempt recorded."""

from __future__ import annotations

import logging
import smtplib
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage

from app.config import Settings
from app.reports.build import report_for
from app.reports.render import compose
from app.storage import report_runs
from app.storage.database import Database
from app.storage.engines import list_profiles

log = logging.getLogger("tokenshape.reports")
ATTEMPTS = 3
BACKOFF_S = (5.0, 30.0)  # waits before the second and third attempts


class PermanentFailure(Exception):
    """The server refused for good (5xx, bad login): retrying would not help."""


@dataclass(frozen=True)
class Outcome:
    """What happened to a week's email."""

    week: str
    status: str  # sent, failed, skipped
    detail: str
    message_id: str | None = None


def recipients_of(
    settings: Settings, override: list[str] | None = None, profiles: dict | None = None
) -> list[str]:
    """The recipients: an override, else TOKENSHAPE_REPORT_TO plus each engine profile's own
    `report_to` (the team that runs it), without repeats."""
    listed = list(override) if override else settings.report_to.split(",")
    if not override:
        for profile in (profiles or {}).values():
            listed += (profile.get("report_to") or "").split(",")
    return list(dict.fromkeys(r.strip() for r in listed if r.strip()))


def transmit(msg: EmailMessage, settings: Settings, timeout: float = 30.0) -> None:
    """One SMTP delivery (STARTTLS, implicit TLS or plain, optional login)."""
    context = ssl.create_default_context()
    smtp_class = smtplib.SMTP_SSL if settings.smtp_tls == "ssl" else smtplib.SMTP
    kwargs = {"context": context} if settings.smtp_tls == "ssl" else {}
    try:
        with smtp_class(settings.smtp_host, settings.smtp_port, timeout=timeout, **kwargs) as s:
            if settings.smtp_tls == "starttls":
                s.starttls(context=context)
            if settings.smtp_user:
                s.login(settings.smtp_user, settings.smtp_password)
            s.send_message(msg)
    except smtplib.SMTPAuthenticationError as exc:
        raise PermanentFailure(f"SMTP login refused ({exc.smtp_code})") from None
    except smtplib.SMTPResponseException as exc:
        if 500 <= exc.smtp_code < 600:
            raise PermanentFailure(
                f"SMTP server refused ({exc.smtp_code} {exc.smtp_error!r})"
            ) from None
        raise


def deliver_week(
    db: Database,
    settings: Settings,
    week: str,
    *,
    clock: Callable[[], datetime],
    to: list[str] | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Outcome:
    """Build and send a week's email once: a week already sent is skipped, each attempt is a
    row in report_runs, temporary failures are retried with backoff."""
    cur = db.cursor()
    recipients = recipients_of(settings, to, list_profiles(cur))
    if not recipients:
        return Outcome(week, "skipped", "no recipients: set TOKENSHAPE_REPORT_TO or pass --to")
    if not settings.smtp_host:
        return Outcome(week, "skipped", "no SMTP server: set TOKENSHAPE_SMTP_HOST")
    if report_runs.sent(cur, week):
        return Outcome(week, "skipped", f"the email for {week} was sent already")
    report = report_for(db, settings, week)
    msg = compose(report, settings.smtp_from, recipients)
    error = ""

    def record(attempt: int, started: datetime, status: str, **extra) -> None:
        report_runs.record(
            cur,
            week=week,
            recipients=recipients,
            status=status,
            attempt=attempt,
            started_at=started,
            finished_at=clock(),
            **extra,
        )

    for attempt in range(1, ATTEMPTS + 1):
        started = clock()
        try:
            transmit(msg, settings)
        except (OSError, smtplib.SMTPException, PermanentFailure) as exc:
            error = f"{type(exc).__name__}: {exc}"
            record(attempt, started, "failed", error=error)
            log.warning("weekly email for %s, attempt %d: %s", week, attempt, error)
            if isinstance(exc, PermanentFailure) or attempt == ATTEMPTS:
                break
            sleep(BACKOFF_S[attempt - 1])
            continue
        record(attempt, started, "sent", message_id=msg["Message-ID"])
        log.info("weekly email for %s sent to %d recipients", week, len(recipients))
        return Outcome(week, "sent", f"sent to {', '.join(recipients)}", msg["Message-ID"])
    return Outcome(week, "failed", error)
