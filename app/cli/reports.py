"""`tokenshape report`: preview (as an .eml file) or send the weekly rightsizing email."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import DB, command, open_db, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers
    from app.config import Settings
    from app.storage.database import Database


def add_parser(subparsers: Subparsers) -> None:
    """Add `report` and its actions: send, preview."""
    rep = command(subparsers, "report", cmd_report, "Preview or send the weekly rightsizing email.")
    week = argparse.ArgumentParser(add_help=False, parents=[DB])
    week.add_argument("--week", help="ISO week, e.g. 2026-W47 (default: the last full week)")
    week.add_argument("--to", help="comma-separated recipients (default: TOKENSHAPE_REPORT_TO)")
    actions = rep.add_subparsers(dest="action", required=True)
    actions.add_parser(
        "send", help="send a week's email (a week already sent is skipped)", parents=[week]
    )
    preview = actions.add_parser(
        "preview", help="write a week's email to an .eml file, unsent", parents=[week]
    )
    preview.add_argument("--out", help="the .eml file to write (default: report-WEEK.eml)")


def cmd_report(args: argparse.Namespace) -> int:
    """Preview (write the .eml) or send the weekly email for a week."""
    from app.jobs.schedule import canonical_week, last_full_week
    from app.reports.send import deliver_week

    settings = settings_for(args)
    week = (
        canonical_week(args.week)
        if args.week
        else last_full_week(datetime.now(UTC), settings.report_tz)
    )
    to = [t for t in (args.to or "").split(",") if t.strip()]
    with open_db(settings) as db:
        if args.action == "preview":
            return _preview(db, settings, week, to, args.out)
        outcome = deliver_week(db, settings, week, clock=lambda: datetime.now(UTC), to=to)
    print(f"report {week}: {outcome.status}: {outcome.detail}")
    return 0 if outcome.status in ("sent", "skipped") else 1


def _preview(db: Database, settings: Settings, week: str, to: list[str], out: str | None) -> int:
    """Write the week's email to an .eml file without sending it."""
    from app.reports.build import report_for
    from app.reports.render import compose
    from app.reports.send import recipients_of

    report = report_for(db, settings, week)
    recipients = recipients_of(settings, to)[0] or ["(no recipients set)"]
    msg = compose(report, settings.smtp_from, recipients)
    path = Path(out or f"report-{week}.eml")
    path.write_bytes(msg.as_bytes())
    print(f"report {week}: {report.subject!r} written to {path} (not sent)")
    return 0
