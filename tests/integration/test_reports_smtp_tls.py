"""The weekly email over real TLS: aiosmtpd with certificates made here (trustme), a server that
requires STARTTLS, one on implicit TLS, one that requires a login, and a password that never
travels in clear."""

from __future__ import annotations

import email
import ssl
from dataclasses import dataclass, field
from email import policy

import pytest
import trustme
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from pydantic import SecretStr

from app.config import Settings
from app.reports.send import deliver_week
from app.storage import report_runs
from tests.support.database import open_migrated
from tests.support.net import free_port
from tests.support.reports import NOW, WEEK, report_settings

USER, PASSWORD = "reports@example.com", "s3cret-pass"


@dataclass
class Mailroom:
    """What an aiosmtpd server saw: the messages taken, and every login with whether the
    connection was encrypted when it came."""

    messages: list[email.message.EmailMessage] = field(default_factory=list)
    logins: list[tuple[str, str, bool]] = field(default_factory=list)

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.messages.append(email.message_from_bytes(envelope.content, policy=policy.default))
        return "250 OK"

    def authenticator(self, server, session, envelope, mechanism, auth_data):
        """Record the login (a clear one too, where the server allows it) and take it."""
        assert isinstance(auth_data, LoginPassword)
        encrypted = server.transport.get_extra_info("ssl_object") is not None
        self.logins.append((auth_data.login.decode(), auth_data.password.decode(), encrypted))
        ok = (auth_data.login.decode(), auth_data.password.decode()) == (USER, PASSWORD)
        return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 535


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    """A CA of this test module's own; the server's certificate names 127.0.0.1 and localhost."""
    return trustme.CA()


@pytest.fixture
def trusted(ca, tmp_path, monkeypatch):
    """The client trusts the test CA (SSL_CERT_FILE, as OpenSSL tools read it)."""
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    monkeypatch.setenv("SSL_CERT_FILE", str(path))


@pytest.fixture
def server_context(ca) -> ssl.SSLContext:
    """The SMTP server's TLS context, with its certificate from the test CA."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


@pytest.fixture
def smtp_server():
    """Start an aiosmtpd server on a loopback port with the given options; stopped at the end."""
    started: list[Controller] = []

    def start(room: Mailroom, **options) -> int:
        controller = Controller(room, hostname="127.0.0.1", port=free_port(), **options)
        controller.start()
        started.append(controller)
        return controller.port

    yield start
    for controller in started:
        controller.stop()


def _settings(tmp_path, port: int, tls: str, user: str = "", password: str = "") -> Settings:
    """The report tests' settings with this TLS mode and login."""
    return report_settings(tmp_path, port).model_copy(
        update={"smtp_tls": tls, "smtp_user": user, "smtp_password": SecretStr(password)}
    )


def _deliver(report_db, settings):
    """Send the test week's email once (no waits between attempts); returns the outcome and
    the recorded attempts."""
    with open_migrated(report_db) as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=lambda s: None)
        runs = report_runs.history(db.cursor())
    return outcome, runs


def test_a_server_that_requires_starttls_gets_the_mail(
    report_db, tmp_path, trusted, server_context, smtp_server
):
    room = Mailroom()
    port = smtp_server(room, tls_context=server_context, require_starttls=True)
    outcome, _ = _deliver(report_db, _settings(tmp_path, port, "starttls"))
    assert outcome.status == "sent", outcome.detail
    assert len(room.messages) == 1 and WEEK in str(room.messages[0]["Subject"])


def test_without_tls_a_server_that_requires_starttls_refuses_and_it_is_recorded(
    report_db, tmp_path, server_context, smtp_server
):
    room = Mailroom()
    port = smtp_server(room, tls_context=server_context, require_starttls=True)
    outcome, runs = _deliver(report_db, _settings(tmp_path, port, "none"))
    assert outcome.status == "failed" and "530" in outcome.detail and not room.messages
    assert [r["status"] for r in runs] == ["failed"]  # a 5xx is final: no retries


def test_implicit_tls_with_a_login(report_db, tmp_path, trusted, server_context, smtp_server):
    room = Mailroom()
    # aiosmtpd does not count implicit TLS as TLS for its AUTH rule, so it allows AUTH in
    # clear here; the authenticator records whether each login came encrypted.
    port = smtp_server(
        room,
        ssl_context=server_context,
        authenticator=room.authenticator,
        auth_require_tls=False,
    )
    settings = _settings(tmp_path, port, "ssl", USER, PASSWORD)
    outcome, _ = _deliver(report_db, settings)
    assert outcome.status == "sent", outcome.detail
    assert room.logins == [(USER, PASSWORD, True)] and len(room.messages) == 1


def test_a_server_that_requires_auth_gets_the_login_over_starttls(
    report_db, tmp_path, trusted, server_context, smtp_server
):
    room = Mailroom()
    port = smtp_server(
        room,
        tls_context=server_context,
        require_starttls=True,
        authenticator=room.authenticator,
        auth_required=True,
        auth_require_tls=True,
    )
    good = _settings(tmp_path, port, "starttls", USER, PASSWORD)
    outcome, _ = _deliver(report_db, good)
    assert outcome.status == "sent", outcome.detail
    assert room.logins == [(USER, PASSWORD, True)] and len(room.messages) == 1


def test_a_bad_login_over_tls_is_final_and_recorded(
    report_db, tmp_path, trusted, server_context, smtp_server
):
    room = Mailroom()
    port = smtp_server(
        room,
        tls_context=server_context,
        authenticator=room.authenticator,
        auth_required=True,
    )
    bad = _settings(tmp_path, port, "starttls", USER, "no")
    outcome, runs = _deliver(report_db, bad)
    assert outcome.status == "failed" and "SMTP login refused (535)" in outcome.detail
    assert len(runs) == 1 and not room.messages  # one attempt: final
    assert room.logins and all(encrypted for *_, encrypted in room.logins)  # each mechanism


def test_a_password_is_never_sent_in_clear_even_to_loopback(report_db, tmp_path, smtp_server):
    room = Mailroom()
    # A server that would take a login in clear, so only the client can keep it from going.
    port = smtp_server(room, authenticator=room.authenticator, auth_require_tls=False)
    settings = _settings(tmp_path, port, "none", USER, PASSWORD)
    outcome, runs = _deliver(report_db, settings)
    assert room.logins == [] and room.messages == []  # the server never saw AUTH
    assert outcome.status == "failed" and "refusing to send the SMTP password" in outcome.detail
    assert "TOKENSHAPE_SMTP_TLS to starttls or ssl" in runs[0]["error"]
    assert PASSWORD not in outcome.detail and all(PASSWORD not in r["error"] for r in runs)


@pytest.mark.parametrize("mode", ["starttls", "ssl"])
def test_an_untrusted_certificate_is_a_clear_recorded_reason(
    report_db, tmp_path, server_context, smtp_server, mode
):
    room = Mailroom()  # the client trusts only the system's CAs: not the test CA
    options = {"tls_context": server_context} if mode == "starttls" else {}
    if mode == "ssl":
        options["ssl_context"] = server_context
    port = smtp_server(room, **options)
    outcome, runs = _deliver(report_db, _settings(tmp_path, port, mode))
    assert outcome.status == "failed" and not room.messages
    assert len(runs) == 1  # final: an untrusted certificate does not become trusted by waiting
    error = runs[0]["error"]
    assert f"certificate verify failed for 127.0.0.1:{port}" in error, error
    assert "set SSL_CERT_FILE" in error and "Traceback" not in error


def test_tls_to_a_port_without_tls_is_a_clear_reason(report_db, tmp_path, smtp_server):
    port = smtp_server(Mailroom())  # plain SMTP, no TLS at all
    outcome, runs = _deliver(report_db, _settings(tmp_path, port, "ssl"))
    assert outcome.status == "failed" and len(runs) == 1
    assert "TOKENSHAPE_SMTP_TLS=ssl what this port speaks?" in outcome.detail, outcome.detail
