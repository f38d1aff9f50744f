"""Sending the weekly email over SMTP: retries on temporary failures, every attempt recorded."""

from __future__ import annotations

import logging
import os
import re
import smtplib
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from email.message import EmailMessage
from email.utils import getaddresses
from typing import Any

from app.config import Settings
from app.jobs.schedule import canonical_week, week_bounds
from app.reports.build import report_for
from app.reports.render import compose
from app.services import profiles, report_runs
from app.services.report_runs import POSSIBLY_SENT
from app.storage.database import Database

log = logging.getLogger("tokenshape.reports")
ATTEMPTS = 3
BACKOFF_S = (5.0, 30.0)  # waits before the second and third attempts
# A user name that is a whole email address (names may hold '@' and '.'): users have no
# address of their own, so that name is the only "me" a test email can go to.
_ADDRESS = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}")


class PermanentFailure(Exception):
    """The server refused for good (5xx, bad login): retrying would not help."""


class PossiblySent(Exception):
    """The message went out after DATA and no answer came (a timeout, a lost connection):
    the server may have taken it. Never retried automatically; an admin may resend."""


class _MarksData:
    """smtplib's DATA step, marking the moment the message itself starts going out: a
    failure before it delivered nothing, one after it may have delivered the email."""

    body_sent = False

    def data(self, msg):  # type: ignore[no-untyped-def]
        """DATA as smtplib sends it (RFC 5321 section 4.1.1.4), with the mark."""
        self.putcmd("data")  # type: ignore[attr-defined]
        code, repl = self.getreply()  # type: ignore[attr-defined]
        if code != 354:
            self.rset()  # type: ignore[attr-defined]
            raise smtplib.SMTPDataError(code, repl)
        body = smtplib._quote_periods(msg)  # type: ignore[attr-defined]  # smtplib's own quoting
        if body[-2:] != b"\r\n":
            body += b"\r\n"
        self.body_sent = True
        self.send(body + b".\r\n")  # type: ignore[attr-defined]
        return self.getreply()  # type: ignore[attr-defined]


class _SMTP(_MarksData, smtplib.SMTP):
    pass


class _SMTP_SSL(_MarksData, smtplib.SMTP_SSL):  # noqa: N801  (smtplib's own name)
    pass


@dataclass(frozen=True)
class Outcome:
    """What happened to a week's email."""

    week: str
    status: str  # sent, failed, skipped, possibly-sent
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
    smtp_class = _SMTP_SSL if settings.smtp_tls == "ssl" else _SMTP
    kwargs: dict[str, Any] = {"context": context} if settings.smtp_tls == "ssl" else {}
    s: _MarksData | None = None
    try:
        try:
            s = smtp_class(settings.smtp_host, settings.smtp_port, timeout=timeout, **kwargs)
            assert isinstance(s, smtplib.SMTP)
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
        except OSError as exc:
            # After the message went out, no answer is not "not sent": the server may have
            # it. (An answer to the final dot, an SMTPResponseException, is definite.)
            answered = isinstance(exc, smtplib.SMTPResponseException)
            if s is not None and s.body_sent and not answered:
                raise PossiblySent(
                    f"the SMTP server {settings.smtp_host}:{settings.smtp_port} was sent the "
                    f"whole message but gave no answer ({in_words(exc, settings)}): it may "
                    "have delivered it"
                ) from None
            raise
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
    timeout: float = 30.0,
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
    done = Outcome(week, "skipped", f"the email for {week} was sent already (or may have been)")
    if report_runs.sent(db, week):
        return done
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
        # Claimed, not merely recorded: the scheduler, the API and the CLI may all ask for
        # the same week; whoever claims it first sends it, the others skip.
        run_id = report_runs.claim(
            db,
            week=week,
            recipients=everyone,
            attempt=attempt,
            started_at=clock(),
            finished_at=None,
            message_id=msg["Message-ID"],
        )
        if run_id is None:
            return done
        try:
            refused = transmit(msg, settings, bcc, timeout=timeout)
        except PossiblySent as exc:
            # Never retried: a second copy is worse than a gap. Health, /metrics and the
            # Reports page show it until an admin resends it (resend_week) or lets it be.
            error = str(exc)
            report_runs.finish(db, run_id, status=POSSIBLY_SENT, finished_at=clock(), error=error)
            log.error("weekly email for %s possibly sent, not retried: %s", week, error)
            return Outcome(week, POSSIBLY_SENT, error, msg["Message-ID"])
        except (OSError, smtplib.SMTPException, PermanentFailure) as exc:
            error = f"{type(exc).__name__}: {in_words(exc, settings)}"
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


def resend_week(
    db: Database,
    settings: Settings,
    week: str,
    *,
    clock: Callable[[], datetime],
    timeout: float = 30.0,
) -> Outcome:
    """An admin's "send it again" for a week in doubt (possibly sent, or interrupted): its
    doubtful attempts stop blocking it and the week is delivered as usual. A week sent for
    sure is not sent again."""
    week = canonical_week(week)
    if not report_runs.release_doubt(db, week, clock()):
        if report_runs.sent(db, week):
            return Outcome(week, "skipped", f"the email for {week} was sent already")
    return deliver_week(db, settings, week, clock=clock, timeout=timeout)


def in_words(exc: BaseException, settings: Settings) -> str:
    """An SMTP failure in words: what went wrong with which server, and what to check."""
    where = f"{settings.smtp_host}:{settings.smtp_port}"
    if isinstance(exc, PermanentFailure):
        return str(exc)
    if isinstance(exc, ConnectionRefusedError):
        return (
            f"nothing accepts connections at {where}: check TOKENSHAPE_SMTP_HOST and "
            "TOKENSHAPE_SMTP_PORT, and that the mail server runs"
        )
    if isinstance(exc, socket.gaierror):
        return f"the SMTP host {settings.smtp_host!r} is not known: check TOKENSHAPE_SMTP_HOST"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"{where} did not answer in time: check the address and any firewall between"
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return f"{where} closed the connection ({exc or 'no reason given'}); try again later"
    if isinstance(exc, smtplib.SMTPResponseException):
        text = (
            exc.smtp_error.decode(errors="replace")
            if isinstance(exc.smtp_error, bytes)
            else exc.smtp_error
        )
        return f"{where} answered {exc.smtp_code} {text}: a temporary refusal, try again later"
    return str(exc) or type(exc).__name__


def recipients_for_test(settings: Settings, user: str | None) -> tuple[list[str], str]:
    """Who a test email goes to, and why: the signed-in user when the name is an email address
    (users have no other address), else TOKENSHAPE_REPORT_TO (never the engines' teams)."""
    name = (user or "").strip()
    if _ADDRESS.fullmatch(name):
        return [name], f"you ({name}, your user name)"
    to = recipients_of(settings)[0]
    if to:
        why = "your user name is not an email address" if name else "no one is signed in"
        return to, f"TOKENSHAPE_REPORT_TO ({why})"
    return [], "nobody: set TOKENSHAPE_REPORT_TO, or sign in as a user named by an email address"


def send_test(
    db: Database, settings: Settings, week: str, to: list[str], *, timeout: float = 20.0
) -> Outcome:
    """Send a week's email once to `to` as a test: the same message and SMTP code as the
    weekly one, its subject marked [test], one attempt, not recorded (so it never stands in
    for the week's real email)."""
    week = canonical_week(week)
    if not to:
        return Outcome(week, "skipped", "no recipients: set TOKENSHAPE_REPORT_TO")
    if not settings.smtp_host:
        return Outcome(week, "skipped", "no SMTP server: set TOKENSHAPE_SMTP_HOST")
    report = report_for(db, settings, week)
    report = replace(report, subject=f"[test] {report.subject}")
    msg = compose(report, settings.smtp_from, to)
    try:
        refused = transmit(msg, settings, [], timeout=timeout)
    except (OSError, smtplib.SMTPException, PermanentFailure) as exc:
        error = in_words(exc, settings)
        log.warning("test email for %s to %s: %s", week, ", ".join(to), error)
        return Outcome(week, "failed", error)
    log.info("test email for %s sent to %s", week, ", ".join(to))
    note = f" (refused: {refused})" if refused else ""
    return Outcome(week, "sent", f"sent to {', '.join(to)}{note}", msg["Message-ID"])
