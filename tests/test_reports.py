"""The weekly email against a real SMTP server (aiosmtpd on loopback), its schedule and HTML."""

from __future__ import annotations

import asyncio
import email
import os
import shutil
import time
from datetime import UTC, datetime, timedelta
from email import policy

import pytest
from aiosmtpd.controller import Controller

from app.config import Settings
from app.jobs.cron import parse_cron
from app.jobs.schedule import (
    ReportScheduler,
    last_full_week,
    next_fire,
    week_bounds,
)
from app.reports.build import build_report
from app.reports.render import render
from app.reports.send import deliver_week
from app.services import demo
from app.storage import report_runs
from app.storage.database import Database
from app.storage.engines import put_profile
from tests.conftest import free_port, serve

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)  # a Wednesday: the last full week is 2026-W47
WEEK = "2026-W47"


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


def _settings(tmp_path, port: int, **extra) -> Settings:
    return Settings(
        db=tmp_path / "r.duckdb",
        port=free_port(),
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_tls="none",
        smtp_from="tokenshape@example.com",
        report_to="lead@example.com, oncall@example.com",
        _env_file=None,
        **extra,
    )


@pytest.fixture
def seeded(tmp_path):
    """Two weeks of demo traffic ending at NOW, with the demo engine profiles."""
    path = tmp_path / "r.duckdb"
    with Database(path).open() as db:
        demo.seed(db, requests=20000, days=14, end=NOW)
    return path


def test_the_email_arrives_with_the_apis_numbers(smtp, seeded, tmp_path):
    controller, inbox = smtp
    settings = _settings(tmp_path, controller.port)
    with Database(seeded).open() as db:  # the team that runs llm-70b gets it too
        cur = db.cursor()
        profile = demo.DEMO_PROFILES["llm-70b"] | {"report_to": "llm-team@example.com"}
        put_profile(cur, "llm-70b", profile, NOW)
    gen = serve(settings)  # its schedule is due for the last full week: it sends by itself
    live = next(gen)
    try:
        deadline = time.monotonic() + 60
        while not inbox.messages and time.monotonic() < deadline:
            time.sleep(0.1)
        assert last_full_week(datetime.now(UTC), "UTC") == WEEK or pytest.skip("clock moved")
        (rcpts, msg) = inbox.messages[0]
        assert sorted(rcpts) == ["lead@example.com", "llm-team@example.com", "oncall@example.com"]
        assert msg["Subject"].startswith(f"tokenshape {WEEK}: 3 engines, ")
        assert msg.get_content_type() == "multipart/alternative"
        parts = {p.get_content_type(): p.get_content() for p in msg.iter_parts()}
        assert set(parts) == {"text/plain", "text/html"}
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


def test_temporary_failures_are_retried_and_recorded(smtp, seeded, tmp_path):
    controller, inbox = smtp
    inbox.refuse = 1  # one 451, then the message is taken
    settings = _settings(tmp_path, controller.port)
    waits: list[float] = []
    with Database(seeded).open() as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=waits.append)
        assert outcome.status == "sent" and len(inbox.messages) == 1 and waits == [5.0]
        statuses = [(r["attempt"], r["status"]) for r in report_runs.history(db.cursor())]
        assert sorted(statuses) == [(1, "failed"), (2, "sent")]


def test_an_unreachable_server_is_a_recorded_failure(seeded, tmp_path):
    settings = _settings(tmp_path, free_port())  # nothing listens there
    with Database(seeded).open() as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=lambda s: None)
        assert outcome.status == "failed" and "ConnectionRefused" in outcome.detail
        runs = report_runs.history(db.cursor())
        assert len(runs) == 3 and {r["status"] for r in runs} == {"failed"}
        assert not report_runs.sent(db.cursor(), WEEK)  # the next tick tries again


def test_names_from_the_data_are_escaped_in_the_html(seeded):
    with Database(seeded).open() as db:
        put_profile(
            db.cursor(),
            "<script>alert(1)</script>",
            {"model": "llama-3.1-8b", "gpu": "H100"},
            NOW,
        )
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1)
        html, _ = render(report)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()  # and no script of its own


def test_the_schedule_keeps_local_time_across_dst():
    cron = parse_cron("0 8 * * 1")  # Mondays 08:00 in Berlin
    before = datetime(2026, 10, 19, 7, 0, tzinfo=UTC)  # Mon 09:00 CEST: just after a fire
    first = next_fire(cron, before, "Europe/Berlin")
    assert first == datetime(2026, 10, 26, 7, 0, tzinfo=UTC)  # 08:00 CET, after the change
    summer = next_fire(cron, datetime(2026, 10, 12, 0, 0, tzinfo=UTC), "Europe/Berlin")
    assert summer == datetime(2026, 10, 12, 6, 0, tzinfo=UTC)  # 08:00 CEST
    with pytest.raises(ValueError, match="hour"):
        parse_cron("0 25 * * 1")
    assert last_full_week(datetime(2026, 10, 26, 7, tzinfo=UTC), "Europe/Berlin") == "2026-W43"


def test_the_scheduler_fires_at_local_times_with_an_injected_clock():
    now = [datetime(2026, 10, 18, 12, 0, tzinfo=UTC)]  # a Sunday, the server just started
    done: set[str] = set()
    sends: list[tuple[str, datetime]] = []

    async def fake_sleep(seconds: float) -> None:
        now[0] += timedelta(seconds=seconds)

    def send(week, _stop):
        sends.append((week, now[0]))
        done.add(week)
        return "sent"

    scheduler = ReportScheduler(
        parse_cron("0 8 * * 1"),
        "Europe/Berlin",
        send,
        done.__contains__,
        lambda: now[0],
        fake_sleep,
    )
    asyncio.run(scheduler.run(rounds=3))
    assert sends == [
        ("2026-W41", datetime(2026, 10, 18, 12, 0, tzinfo=UTC)),  # missed while down: caught up
        ("2026-W42", datetime(2026, 10, 19, 6, 0, tzinfo=UTC)),  # Monday 08:00 CEST
        ("2026-W43", datetime(2026, 10, 26, 7, 0, tzinfo=UTC)),  # Monday 08:00 CET
    ]


def test_a_failed_week_is_tried_again_until_it_is_sent():
    now = [datetime(2026, 11, 23, 8, 0, tzinfo=UTC)]  # Monday 08:00: W47 is due
    attempts: list[datetime] = []

    async def fake_sleep(seconds: float) -> None:
        now[0] += timedelta(seconds=seconds)

    def send(week, _stop):
        attempts.append(now[0])
        if len(attempts) < 3:
            raise OSError("connection refused")
        return "sent"

    scheduler = ReportScheduler(
        parse_cron("0 8 * * 1"),
        "UTC",
        send,
        lambda w: len(attempts) >= 3,
        lambda: now[0],
        fake_sleep,
    )
    asyncio.run(scheduler.run(rounds=3))
    assert [a - attempts[0] for a in attempts] == [
        timedelta(0),
        timedelta(minutes=30),
        timedelta(minutes=60),
    ]
    assert "OSError" in str(scheduler.last) or scheduler.last == "sent"


CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="Debian chromium not installed")
def test_the_html_renders_at_mail_client_width(seeded, tmp_path):
    from playwright.sync_api import sync_playwright

    with Database(seeded).open() as db:
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1)
    html, _ = render(report)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"])
        page = browser.new_page(viewport={"width": 600, "height": 800})
        page.set_content(html)
        width = page.evaluate("document.documentElement.scrollWidth")
        page.screenshot(path=str(tmp_path / "report.png"), full_page=True)
        if os.environ.get("TOKENSHAPE_SCREENSHOTS"):
            page.screenshot(
                path=os.environ["TOKENSHAPE_SCREENSHOTS"] + "/report.png", full_page=True
            )
        browser.close()
    assert width <= 620  # no sideways scrolling at a mail client's width


def test_weeks_are_strict_and_only_past_ones_are_sent(seeded, tmp_path):
    from app.jobs.schedule import canonical_week

    for bad in ("2026-w47", "2026-W047", " 2026-W47", "9999-W52", "2026-W54"):
        with pytest.raises(ValueError, match="ISO week such as 2026-W47"):
            canonical_week(bad)
    settings = _settings(tmp_path, free_port())
    with Database(seeded).open() as db, pytest.raises(ValueError, match="has not ended yet"):
        deliver_week(db, settings, "2026-W48", clock=lambda: NOW)


def test_a_password_is_never_sent_unencrypted(seeded, tmp_path):
    settings = _settings(tmp_path, free_port(), smtp_user="u", smtp_password="p")
    settings = settings.model_copy(update={"smtp_host": "mail.example.com"})
    with Database(seeded).open() as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=lambda s: None)
    assert outcome.status == "failed" and "unencrypted" in outcome.detail
    assert "'p'" not in repr(settings)  # SecretStr: the password never shows
