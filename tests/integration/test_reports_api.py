"""`tokenshape report preview|send` while the server runs: through /api/reports over HTTP, to
a real SMTP server (aiosmtpd on loopback); without --url, the locked file says to use it."""

from __future__ import annotations

import email
from email import policy

from app.reports.send import send_test
from app.storage import report_runs
from tests.integration.test_reports_smtp import smtp  # noqa: F401 (the fixture)
from tests.support.cli import cli
from tests.support.database import open_migrated
from tests.support.net import free_port
from tests.support.reports import NOW, WEEK, report_settings
from tests.support.server import served

QUIET = {"retention_days": 0, "reject_retention_days": 0, "plans_refresh_s": 0}


def _settings(tmp_path, port):
    """The report settings without TOKENSHAPE_REPORT_TO: the schedule stays quiet, the CLI
    and the API name their recipients."""
    return report_settings(tmp_path, port, **QUIET).model_copy(update={"report_to": ""})


def test_the_cli_previews_and_sends_through_the_running_server(smtp, report_db, tmp_path):  # noqa: F811
    controller, inbox = smtp
    settings = _settings(tmp_path, controller.port)
    with served(settings, clock=lambda: NOW) as live:
        admin, read = live.token("admin"), live.token("read")
        # The file is the server's: the CLI says how to go through it, with no traceback.
        locked = cli("report", "send", "--db", str(report_db), "--week", WEEK, check=False)
        assert locked.returncode == 2 and "Traceback" not in locked.stderr
        assert "tokenshape report send --url http://HOST:PORT --token ADMIN_TOKEN" in locked.stderr
        url = ["--url", live.url]
        out = tmp_path / "preview.eml"
        preview = cli("report", "preview", *url, "--token", read, "--week", WEEK, "--out", str(out))
        assert f"report {WEEK}: 'tokenshape {WEEK}: saves $" in preview.stdout
        # The links' verdict rides along: this server has no TOKENSHAPE_PUBLIC_URL.
        assert "warning: TOKENSHAPE_PUBLIC_URL is not set" in preview.stderr
        eml = email.message_from_bytes(out.read_bytes(), policy=policy.default)
        subject = str(eml["Subject"])
        assert subject.startswith(f"tokenshape {WEEK}: saves $")
        # Sending needs an admin token; a read token is refused in words.
        refused = cli(
            "report", "send", *url, "--token", read, "--week", WEEK, "--to", "a@x.io", check=False
        )
        assert refused.returncode == 1 and "403" in refused.stderr and "admin" in refused.stderr
        sent = cli("report", "send", *url, "--token", admin, "--week", WEEK, "--to", "a@x.io")
        assert f"report {WEEK}: sent: sent to a@x.io" in sent.stdout
        assert [(r, str(m["Subject"])) for r, m in inbox.messages] == [(["a@x.io"], subject)]
        again = cli("report", "send", *url, "--token", admin, "--week", WEEK, "--to", "a@x.io")
        assert f"report {WEEK}: skipped: the email for {WEEK} was sent already" in again.stdout
        # A test copy goes out after all, marked, and is not recorded as the week's email.
        test = cli(
            "report", "send", "--test", *url, "--token", admin, "--week", WEEK, "--to", "b@x.io"
        )
        assert "sent: sent to b@x.io" in test.stdout
        assert str(inbox.messages[-1][1]["Subject"]) == f"[test] {subject}"
        runs = report_runs.history(live.db.cursor())
        assert [(r["week"], r["status"], r["recipients"]) for r in runs] == [
            (WEEK, "sent", "a@x.io")
        ]


def test_the_api_says_what_is_wrong_in_words(smtp, report_db, tmp_path):  # noqa: F811
    controller, _ = smtp
    settings = _settings(tmp_path, controller.port)
    with served(settings, clock=lambda: NOW) as live, live.client(live.token("admin")) as c:
        later = c.post("/api/reports/send", json={"week": "2026-W49"})
        assert later.status_code == 400 and "has not ended yet" in later.json()["detail"]
        bad = c.get("/api/reports/preview", params={"week": "2026-w47"})
        assert bad.status_code == 400 and "ISO week such as 2026-W47" in bad.json()["detail"]
        nobody = c.post("/api/reports/send", json={"week": WEEK})
        assert nobody.json()["status"] == "skipped" and "TOKENSHAPE_REPORT_TO" in nobody.text
        preview = c.get("/api/reports/preview", params={"week": WEEK}).json()
        assert preview["subject"].endswith(preview["summary"])
        assert preview["money"].startswith("Fleet: $")
        assert len(preview["engines"]) == 4 and all(e["sentence"] for e in preview["engines"])
        assert preview["links"]["set"] is False and not preview["links"]["ok"]


def test_an_smtp_failure_is_said_in_words(report_db, tmp_path):
    settings = report_settings(tmp_path, free_port())  # nothing listens there
    with open_migrated(report_db) as db:
        outcome = send_test(db, settings, WEEK, ["a@x.io"])
        assert outcome.status == "failed"
        assert outcome.detail.startswith("nothing accepts connections at 127.0.0.1:")
        assert "TOKENSHAPE_SMTP_HOST" in outcome.detail
        assert report_runs.history(db.cursor()) == []  # a test is never the week's email
