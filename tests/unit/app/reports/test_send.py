"""Sending the weekly email (app/reports/send) when it cannot be sent: failures are recorded."""

from __future__ import annotations

import pytest

from app.reports.send import deliver_week
from app.storage import report_runs
from tests.support.database import open_migrated
from tests.support.net import free_port
from tests.support.reports import NOW, WEEK, report_settings


def test_an_unreachable_server_is_a_recorded_failure(report_db, tmp_path):
    settings = report_settings(tmp_path, free_port())  # nothing listens there
    with open_migrated(report_db) as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=lambda s: None)
        assert outcome.status == "failed" and "ConnectionRefused" in outcome.detail
        runs = report_runs.history(db.cursor())
        assert len(runs) == 3 and {r["status"] for r in runs} == {"failed"}
        assert not report_runs.sent(db.cursor(), WEEK)  # the next tick tries again


def test_weeks_are_strict_and_only_past_ones_are_sent(report_db, tmp_path):
    from app.jobs.schedule import canonical_week

    for bad in ("2026-w47", "2026-W047", " 2026-W47", "9999-W52", "2026-W54"):
        with pytest.raises(ValueError, match="ISO week such as 2026-W47"):
            canonical_week(bad)
    settings = report_settings(tmp_path, free_port())
    with open_migrated(report_db) as db, pytest.raises(ValueError, match="has not ended yet"):
        deliver_week(db, settings, "2026-W48", clock=lambda: NOW)


def test_a_password_is_never_sent_unencrypted(report_db, tmp_path):
    settings = report_settings(tmp_path, free_port(), smtp_user="u", smtp_password="p")
    settings = settings.model_copy(update={"smtp_host": "mail.example.com"})
    with open_migrated(report_db) as db:
        outcome = deliver_week(db, settings, WEEK, clock=lambda: NOW, sleep=lambda s: None)
    assert outcome.status == "failed" and "unencrypted" in outcome.detail
    assert "'p'" not in repr(settings)  # SecretStr: the password never shows
