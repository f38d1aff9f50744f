"""Exactly-once email in the uncertain case (issue 26, class 2): an SMTP server that takes the
whole message and never answers the final dot leaves the week "possibly sent" — never retried
by itself, shown in health, /metrics and on the Reports page, resent only by an admin — while
a failure before DATA is still retried."""

from __future__ import annotations

import asyncio
import email
import socket
import threading
from email import policy

import pytest
from aiosmtpd.controller import Controller

from app.dashboard.pages import reports as reports_page
from app.reports.send import deliver_week, resend_week
from app.services import report_runs
from tests.support.database import open_migrated
from tests.support.net import free_port
from tests.support.reports import NOW, WEEK, report_settings


class StallingInbox:
    """Keeps every message it is sent, then answers the final dot only when told to (never,
    for the stalled ones): the server has the email, the client hears nothing."""

    def __init__(self, stall: int):
        self.stall = stall
        self.messages: list[email.message.EmailMessage] = []
        self.release = threading.Event()

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        self.messages.append(email.message_from_bytes(envelope.content, policy=policy.default))
        if self.stall:
            self.stall -= 1
            while not self.release.is_set():
                await asyncio.sleep(0.05)
        return "250 OK"


@pytest.fixture
def stalling():
    inbox = StallingInbox(stall=1)
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller, inbox
    finally:
        inbox.release.set()
        controller.stop()


def test_a_server_silent_after_data_makes_the_week_possibly_sent_and_never_retried(
    stalling, report_db, tmp_path
):
    controller, inbox = stalling
    settings = report_settings(tmp_path, controller.port)
    waits: list[float] = []
    with open_migrated(report_db) as db:
        outcome = deliver_week(
            db, settings, WEEK, clock=lambda: NOW, sleep=waits.append, timeout=1.0
        )
        assert outcome.status == "possibly-sent" and "may have delivered" in outcome.detail
        assert len(inbox.messages) == 1 and waits == []  # one copy, no retry
        # Asked again (the scheduler every 30 minutes, the CLI, the API): skipped.
        for _ in range(3):
            again = deliver_week(db, settings, WEEK, clock=lambda: NOW, timeout=1.0)
            assert again.status == "skipped"
        assert len(inbox.messages) == 1
        (doubt,) = report_runs.in_doubt(db, NOW)
        assert doubt["week"] == WEEK and doubt["status"] == "possibly-sent"
        # The Reports page says so (with a Resend for admins only).
        block = str(reports_page._doubt_block(db, NOW).to_plotly_json())
        assert "Possibly sent" in block and WEEK in block and "an admin can resend" in block
        # An admin resends it, knowingly: the second copy goes out and the week is sent.
        inbox.release.set()
        resent = resend_week(db, settings, WEEK, clock=lambda: NOW, timeout=5.0)
        assert resent.status == "sent" and len(inbox.messages) == 2
        assert report_runs.in_doubt(db, NOW) == []
        assert resend_week(db, settings, WEEK, clock=lambda: NOW).status == "skipped"
        statuses = sorted(r["status"] for r in report_runs.history(db))
        assert statuses == ["possibly-sent, resent", "sent"]


def test_a_failure_before_data_is_still_retried(report_db, tmp_path):
    # Nothing listens: the connection is refused before anything is sent, three times.
    port = free_port()
    probe = socket.socket()
    assert probe.connect_ex(("127.0.0.1", port)) != 0
    probe.close()
    settings = report_settings(tmp_path, port)
    waits: list[float] = []
    with open_migrated(report_db) as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=waits.append)
        assert outcome.status == "failed" and waits == [5.0, 30.0]
        assert report_runs.in_doubt(db, NOW) == []


def test_health_and_metrics_show_a_week_in_doubt_until_it_is_resent(stalling, report_db, tmp_path):
    from app.storage import report_runs as runs_table
    from tests.support.server import serve

    controller, inbox = stalling
    settings = report_settings(tmp_path, controller.port)
    with open_migrated(report_db) as db:
        runs_table.record(
            db.cursor(),
            week=WEEK,
            recipients=["lead@example.com"],
            status="possibly-sent",
            attempt=1,
            started_at=NOW,
            finished_at=NOW,
            error="no answer after DATA",
        )
    inbox.release.set()
    inbox.stall = 0
    for live in serve(settings, clock=lambda: NOW):
        with live.client() as c:
            health = c.get("/api/health").json()
            assert health["status"] == "warning" and health["reports"]["in_doubt"] == [WEEK]
            assert "may have been sent" in health["problem"]
            assert 'tokenshape_report_runs{status="possibly-sent"} 1.0' in c.get("/metrics").text
        with live.client(live.token("admin", gateway="ops")) as c:
            r = c.post("/api/reports/send", json={"week": WEEK, "resend": True})
            assert r.status_code == 200 and r.json()["status"] == "sent", r.text
            assert c.get("/api/health").json()["reports"]["in_doubt"] == []
    assert len(inbox.messages) == 1
