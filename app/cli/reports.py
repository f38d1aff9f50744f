"""`tokenshape report`: preview (as an .eml file) or send the weekly rightsizing email, from the
file or through a running server's API (--url, --token)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import DB, command, open_db, settings_for
from app.storage.database import DatabaseLocked

if TYPE_CHECKING:
    from app.cli.common import Subparsers
    from app.config import Settings
    from app.storage.database import Database

REPORT_HEADER = "X-Tokenshape-Report"  # app/api/reports.py (kept lazy: the CLI starts fast)


def add_parser(subparsers: Subparsers) -> None:
    """Add `report` and its actions: send, preview."""
    rep = command(subparsers, "report", cmd_report, "Preview or send the weekly rightsizing email.")
    week = argparse.ArgumentParser(add_help=False, parents=[DB])
    week.add_argument("--week", help="ISO week, e.g. 2026-W47 (default: the last full week)")
    week.add_argument("--to", help="comma-separated recipients (default: TOKENSHAPE_REPORT_TO)")
    week.add_argument("--url", help="a running server's address: preview or send through its API")
    week.add_argument(
        "--token", help="a token of that server (with --url): admin to send, read to preview"
    )
    actions = rep.add_subparsers(dest="action", required=True)
    send = actions.add_parser(
        "send", help="send a week's email (a week already sent is skipped)", parents=[week]
    )
    send.add_argument(
        "--test",
        action="store_true",
        help="send a test copy: one attempt, subject marked [test], not recorded (the week's "
        "real email still goes out)",
    )
    preview = actions.add_parser(
        "preview", help="write a week's email to an .eml file, unsent", parents=[week]
    )
    preview.add_argument("--out", help="the .eml file to write (default: report-WEEK.eml)")


def cmd_report(args: argparse.Namespace) -> int:
    """Preview (write the .eml) or send the weekly email for a week."""
    from app.jobs.schedule import canonical_week, last_full_week
    from app.reports.send import deliver_week, send_test

    if args.token and not args.url:
        raise ValueError("--token goes with --url (the server's address); drop it or add --url")
    if args.url:
        return _online(args)
    settings = settings_for(args)
    week = (
        canonical_week(args.week)
        if args.week
        else last_full_week(datetime.now(UTC), settings.report_tz)
    )
    to = [t.strip() for t in (args.to or "").split(",") if t.strip()]
    try:
        db = open_db(settings)
    except DatabaseLocked as exc:  # the server holds the file: its API is the way through
        print(
            f"error: {exc}\nWhile the server runs, go through it: tokenshape report "
            f"{args.action} --url http://HOST:PORT --token "
            f"{'ADMIN_TOKEN' if args.action == 'send' else 'READ_TOKEN'}",
            file=sys.stderr,
        )
        return 2
    with db:
        if args.action == "preview":
            return _preview(db, settings, week, to, args.out)
        if args.test:
            from app.reports.send import recipients_of

            outcome = send_test(db, settings, week, to or recipients_of(settings)[0])
        else:
            outcome = deliver_week(db, settings, week, clock=lambda: datetime.now(UTC), to=to)
    print(f"report {week}: {outcome.status}: {outcome.detail}")
    return 0 if outcome.status in ("sent", "skipped") else 1


def _warn_links(links: dict) -> None:
    """Say on stderr when the email's links will not lead to the dashboard."""
    if not links.get("ok", True):
        print(f"warning: {links.get('message')}", file=sys.stderr)


def _preview(db: Database, settings: Settings, week: str, to: list[str], out: str | None) -> int:
    """Write the week's email to an .eml file without sending it."""
    from app.reports.build import report_for
    from app.reports.links import check_links
    from app.reports.render import compose
    from app.reports.send import recipients_of

    report = report_for(db, settings, week)
    recipients = recipients_of(settings, to)[0] or ["(no recipients set)"]
    msg = compose(report, settings.smtp_from, recipients)
    path = Path(out or f"report-{week}.eml")
    path.write_bytes(msg.as_bytes())
    print(f"report {week}: {report.subject!r} written to {path} (not sent)")
    verdict = check_links(settings.public_url, "public_url" in settings.model_fields_set, None)
    _warn_links({"ok": verdict.ok, "message": verdict.message})
    return 0


def _detail(r) -> str:  # an httpx.Response
    try:
        return str(r.json().get("detail", r.text))
    except ValueError:
        return r.text[:300]


def _online(args: argparse.Namespace) -> int:
    """Preview or send through a running server (GET /api/reports/preview, POST
    /api/reports/send)."""
    import httpx

    base = args.url.rstrip("/")
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    try:
        if args.action == "preview":
            params = {"format": "eml", **({"week": args.week} if args.week else {})}
            if args.to:
                params["to"] = args.to
            r = httpx.get(
                f"{base}/api/reports/preview", params=params, headers=headers, timeout=300
            )
        else:
            body = {
                "week": args.week,
                "to": [t.strip() for t in (args.to or "").split(",") if t.strip()] or None,
                "test": bool(args.test),
            }
            # Long enough for the retries the server makes on temporary SMTP failures.
            r = httpx.post(f"{base}/api/reports/send", json=body, headers=headers, timeout=600)
    except httpx.HTTPError as exc:
        print(f"error: could not reach {args.url} ({exc}); is the server running?", file=sys.stderr)
        return 1
    if args.action == "preview":
        if r.status_code != 200:
            print(f"error: the server answered {r.status_code}: {_detail(r)}", file=sys.stderr)
            return 1
        meta = json.loads(r.headers.get(REPORT_HEADER, "{}"))
        week = meta.get("week", args.week or "week")
        path = Path(args.out or f"report-{week}.eml")
        path.write_bytes(r.content)
        print(f"report {week}: {meta.get('subject')!r} written to {path} (not sent)")
        _warn_links(meta.get("links", {}))
        return 0
    if r.status_code not in (200, 502):
        print(f"error: the server answered {r.status_code}: {_detail(r)}", file=sys.stderr)
        return 1
    out = r.json()
    print(f"report {out['week']}: {out['status']}: {out['detail']}")
    return 0 if out["status"] in ("sent", "skipped") else 1
