"""The weekly email against a real SMTP server (aiosmtpd on loopback), sent by a serving app."""

from __future__ import annotations

import email
import re
import time
from datetime import UTC, datetime
from email import policy

import pytest
from aiosmtpd.controller import Controller

from app.jobs.schedule import (
    last_full_week,
    week_bounds,
)
from app.reports.send import deliver_week
from app.services import demo
from app.storage import report_runs
from app.storage.engines import put_profile
from tests.support.database import open_migrated
from tests.support.net import free_port
from tests.support.reports import NOW, WEEK, report_settings
from tests.support.server import serve


class Inbox:
    """An aiosmtpd handler keeping what arrives; it can refuse the first deliveries."""

    def __init__(self, refuse: int = 0):
        self.messages: list[tuple[list[str], email.message.EmailMessage]] = []
        self.refuse = refuse

    async def handle_DATA(self, server, session, envelope):  # noqa: N802 (aiosmtpd's name)
        if self.refuse:
            self.refuse -= 1
            return "451 4.3.0 try again later"
        msg = email.message_from_bytes(envelope.content, policy=policy.default)
        self.messages.append((list(envelope.rcpt_tos), msg))
        return "250 OK"


@pytest.fixture
def smtp():
    """A real SMTP server on a loopback port."""
    inbox = Inbox()
    controller = Controller(inbox, hostname="127.0.0.1", port=free_port())
    controller.start()
    try:
        yield controller, inbox
    finally:
        controller.stop()


def test_the_email_arrives_with_the_apis_numbers(smtp, report_db, tmp_path):
    controller, inbox = smtp
    settings = report_settings(tmp_path, controller.port)
    with open_migrated(report_db) as db:  # the team that runs llm-70b gets it too
        cur = db.cursor()
        profile = demo.DEMO_PROFILES["llm-70b"] | {"report_to": "llm-team@example.com"}
        put_profile(cur, "llm-70b", profile, NOW)

    # The server's clock is the edge of the world here: pinned to NOW, a Wednesday after the
    # week the data covers (with the real clock this test could only run in that one week).
    def server_clock() -> datetime:
        return NOW

    gen = serve(settings, clock=server_clock)  # its schedule is due for the last full week:
    live = next(gen)  # it sends by itself
    try:
        deadline = time.monotonic() + 60
        while not inbox.messages and time.monotonic() < deadline:
            time.sleep(0.1)
        assert last_full_week(server_clock(), "UTC") == WEEK or pytest.skip("clock moved")
        (rcpts, msg) = inbox.messages[0]
        assert sorted(rcpts) == ["lead@example.com", "llm-team@example.com", "oncall@example.com"]
        # The subject leads with the money the plans save within the engines' SLOs.
        subject = re.fullmatch(
            rf"tokenshape {WEEK}: saves \$([\d,]+)/month within the SLO: (\d+) engines, .*",
            str(msg["Subject"]),
        )
        assert subject and int(subject.group(1).replace(",", "")) > 0, msg["Subject"]
        assert int(subject.group(2)) == len(demo.DEMO_PROFILES)
        assert msg.get_content_type() == "multipart/alternative"
        parts = {p.get_content_type(): p.get_content() for p in msg.iter_parts()}
        assert set(parts) == {"text/plain", "text/html"}
        assert "GPU-hours/month" in parts["text/plain"] and "cost/month" in parts["text/html"]
        start, end = week_bounds(WEEK, "UTC")
        with live.client() as c:
            for engine in ("chat-8b", "llm-70b", "code-7b"):
                api = c.get(
                    f"/api/engines/{engine}/recommendation",
                    params={"start": start.isoformat(), "end": end.isoformat()},
                ).json()
                for key in ("max_input_len", "max_seq_len"):
                    value = f"{api['recommended'][key]:,}"
                    assert value in parts["text/html"] and value in parts["text/plain"], (
                        engine,
                        key,
                    )
                assert engine in parts["text/plain"]
        # A second run for the same week (the CLI, a restart) sends nothing.
        clock = lambda: datetime.now(UTC)  # noqa: E731
        again = deliver_week(live.db, settings, WEEK, clock=clock, sleep=lambda s: None)
        assert again.status == "skipped" and len(inbox.messages) == 1
        runs = report_runs.history(live.db.cursor())
        assert [(r["week"], r["status"]) for r in runs] == [(WEEK, "sent")]
        with live.client() as c:
            health = c.get("/api/health").json()["reports"]
        assert health["last_week"] == WEEK and health["last_status"] == "sent"
    finally:
        gen.close()


def test_temporary_failures_are_retried_and_recorded(smtp, report_db, tmp_path):
    controller, inbox = smtp
    inbox.refuse = 1  # one 451, then the message is taken
    settings = report_settings(tmp_path, controller.port)
    waits: list[float] = []
    with open_migrated(report_db) as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=waits.append)
        assert outcome.status == "sent" and len(inbox.messages) == 1 and waits == [5.0]
        statuses = [(r["attempt"], r["status"]) for r in report_runs.history(db.cursor())]
        assert sorted(statuses) == [(1, "failed"), (2, "sent")]
