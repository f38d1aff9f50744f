"""Sending the weekly email over SMTP: retries on temporary failures, every attempt recorded."""

from __future__ import annotations

import logging
import os
import smtplib
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from email.message import EmailMessage
from email.utils import getaddresses
from typing import Any

from app.config import Settings
from app.jobs.schedule import canonical_week, week_bounds
from app.reports.build import report_for
from app.reports.render import compose
from app.services import profiles, report_runs
from app.storage.database import Database

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
) -> tuple[list[str], list[str]]:
    """(To, Bcc): an override, else TOKENSHAPE_REPORT_TO; and each engine profile's own
    `report_to` (the team that runs it) as Bcc, so teams do not see each other's addresses."""
    to = [r.strip() for r in (override or settings.report_to.split(",")) if r.strip()]
    bcc: list[str] = []
    if not override:
        for profile in (profiles or {}).values():
            bcc += [r.strip() for r in (profile.get("report_to") or "").split(",") if r.strip()]
    return to, [b for b in dict.fromkeys(bcc) if b not in to]


def tls_context() -> ssl.SSLContext:
    """The client's TLS context: certificates and host names verified, against the system's
    CAs, or only the CA file SSL_CERT_FILE names (a private CA, as OpenSSL tools take it)."""
    cafile = os.environ.get("SSL_CERT_FILE") or None
    try:
        return ssl.create_default_context(cafile=cafile)
    except (OSError, ssl.SSLError) as exc:
        raise PermanentFailure(f"SSL_CERT_FILE={cafile} cannot be used as CA file: {exc}") from None


def transmit(
    msg: EmailMessage, settings: Settings, bcc: list[str], timeout: float = 30.0
) -> str | None:
    """One SMTP delivery (STARTTLS, implicit TLS or plain, optional login). Returns the
    recipients the server refused, if some were taken. Raises PermanentFailure when retrying
    cannot help; other exceptions are temporary."""
    if settings.smtp_user and settings.smtp_tls == "none":
        # Never, loopback included: a "local" port can be a tunnel or another user's relay.
        raise PermanentFailure(
            "refusing to send the SMTP password unencrypted (TOKENSHAPE_SMTP_TLS=none with "
            "TOKENSHAPE_SMTP_USER set): set TOKENSHAPE_SMTP_TLS to starttls or ssl"
        )
    context = tls_context()
    smtp_class = smtplib.SMTP_SSL if settings.smtp_tls == "ssl" else smtplib.SMTP
    kwargs: dict[str, Any] = {"context": context} if settings.smtp_tls == "ssl" else {}
    try:
        s = smtp_class(settings.smtp_host, settings.smtp_port, timeout=timeout, **kwargs)
        try:
            if settings.smtp_tls == "starttls":
                s.starttls(context=context)
            if settings.smtp_user:
                s.login(settings.smtp_user, settings.smtp_password.get_secret_value())
            to = [a for _, a in getaddresses([msg["To"] or ""])] + bcc
            refused = s.send_message(msg, to_addrs=to)
        finally:
            try:  # once the message is taken, a failing QUIT must not make it a failure
                s.quit()
            except (OSError, smtplib.SMTPException):
                s.close()
    except smtplib.SMTPAuthenticationError as exc:
        if 400 <= exc.smtp_code < 500:
            raise
        raise PermanentFailure(f"SMTP login refused ({exc.smtp_code})") from None
    except (smtplib.SMTPRecipientsRefused, smtplib.SMTPNotSupportedError) as exc:
        raise PermanentFailure(f"{type(exc).__name__}: {exc}") from None
    except ssl.SSLCertVerificationError as exc:
        raise PermanentFailure(
            f"certificate verify failed for {settings.smtp_host}:{settings.smtp_port} "
            f"({exc.verify_message}): set SSL_CERT_FILE to the CA file that signed the "
            "server's certificate, or give the server one this machine trusts"
        ) from None
    except ssl.SSLError as exc:  # no TLS where TLS was asked for, or the other way round
        if isinstance(exc, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
            raise  # the connection dropped mid-handshake: temporary
        raise PermanentFailure(
            f"TLS with {settings.smtp_host}:{settings.smtp_port} failed ({exc.reason}): is "
            f"TOKENSHAPE_SMTP_TLS={settings.smtp_tls} what this port speaks? (ssl is usually "
            "port 465, starttls 587)"
        ) from None
    except smtplib.SMTPResponseException as exc:
        if 500 <= exc.smtp_code < 600:
            raise PermanentFailure(
                f"SMTP server refused ({exc.smtp_code} {exc.smtp_error!r})"
            ) from None
        raise
    return ", ".join(f"{a} ({code})" for a, (code, _) in refused.items()) or None


def deliver_week(
    db: Database,
    settings: Settings,
    week: str,
    *,
    clock: Callable[[], datetime],
    to: list[str] | None = None,
    sleep: Callable[[float], object] = time.sleep,
    stop: threading.Event | None = None,
) -> Outcome:
    """Build and send a week's email once. A week already sent (or in doubt) is skipped; each
    attempt is a row in report_runs, opened as 'sending' before the server is contacted, so a
    crash mid-send is never followed by a second copy; temporary failures are retried with
    backoff (cut short by `stop` when the server shuts down)."""
    week = canonical_week(week)
    start, end = week_bounds(week, settings.report_tz)
    if end > clock():
        raise ValueError(f"week {week} has not ended yet; its email goes out when it has")
    recipients, bcc = recipients_of(settings, to, profiles.stored_profiles(db))
    if not recipients:
        return Outcome(week, "skipped", "no recipients: set TOKENSHAPE_REPORT_TO or pass --to")
    if not settings.smtp_host:
        return Outcome(week, "skipped", "no SMTP server: set TOKENSHAPE_SMTP_HOST")
    if report_runs.sent(db, week):
        return Outcome(week, "skipped", f"the email for {week} was sent already (or may have been)")
    everyone = recipients + bcc
    error = ""
    try:
        msg = compose(report_for(db, settings, week), settings.smtp_from, recipients)
    except Exception as exc:  # recorded, so /api/health shows it; the scheduler retries
        error = f"building the email failed: {type(exc).__name__}: {exc}"
        log.error("weekly email for %s: %s", week, error)
        report_runs.record(
            db,
            week=week,
            recipients=everyone,
            status="failed",
            attempt=1,
            started_at=clock(),
            finished_at=clock(),
            error=error,
        )
        return Outcome(week, "failed", error)
    for attempt in range(1, ATTEMPTS + 1):
        run_id = report_runs.record(
            db,
            week=week,
            recipients=everyone,
            status="sending",
            attempt=attempt,
            started_at=clock(),
            finished_at=None,
            message_id=msg["Message-ID"],
        )
        try:
            refused = transmit(msg, settings, bcc)
        except (OSError, smtplib.SMTPException, PermanentFailure) as exc:
            error = f"{type(exc).__name__}: {exc}"
            report_runs.finish(db, run_id, status="failed", finished_at=clock(), error=error)
            log.warning("weekly email for %s, attempt %d: %s", week, attempt, error)
            last = isinstance(exc, PermanentFailure) or attempt == ATTEMPTS
            if last or (stop is not None and stop.is_set()):
                break
            if stop is not None:
                if stop.wait(BACKOFF_S[attempt - 1]):
                    break
            else:
                sleep(BACKOFF_S[attempt - 1])
            continue
        note = f"refused: {refused}" if refused else None
        report_runs.finish(db, run_id, status="sent", finished_at=clock(), error=note)
        log.info("weekly email for %s sent to %d recipients", week, len(everyone))
        return Outcome(week, "sent", f"sent to {', '.join(everyone)}", msg["Message-ID"])
    return Outcome(week, "failed", error)
