"""`tokenshape backup`: a consistent copy of the database, by a running server or from the file."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.cli.common import command, open_db, settings_for
from app.storage.database import DatabaseLocked

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `backup`."""
    bak = command(
        subparsers, "backup", cmd_backup, "Write a consistent copy of the database to backups/."
    )
    bak.add_argument("--url", help="a running server's address: it writes the copy itself")
    bak.add_argument("--token", help="an admin token (with --url)")


def cmd_backup(args: argparse.Namespace) -> int:
    """Write a consistent copy of the database: through a running server, or from the file."""
    from app.services import backups

    if args.url:
        return _backup_online(args.url, args.token)
    settings = settings_for(args)
    try:
        db = open_db(settings)
    except DatabaseLocked as exc:  # the server holds the file: point at the way through it
        print(
            f"error: {exc}\nA running server backs itself up: tokenshape backup --url "
            "http://HOST:PORT --token ADMIN_TOKEN",
            file=sys.stderr,
        )
        return 2
    with db:
        result = backups.backup(db, backups.target_for(db, datetime.now(UTC)))
    print(
        f"backup written: {result.path} ({result.bytes / 1e6:,.1f} MB, "
        f"{result.requests:,} requests, {result.seconds:.1f} s)"
    )
    return 0


def _backup_online(url: str, token: str | None) -> int:
    """Ask a running server to write the copy itself (POST /api/admin/backup)."""
    import httpx

    if not token:
        print("error: backup --url needs --token with an admin token", file=sys.stderr)
        return 2
    try:
        r = httpx.post(
            url.rstrip("/") + "/api/admin/backup",
            headers={"Authorization": f"Bearer {token}"},
            timeout=3600,
        )
    except httpx.HTTPError as exc:
        print(f"error: could not reach {url} ({exc}); is the server running?", file=sys.stderr)
        return 1
    if r.status_code != 200:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text[:200]
        print(f"error: the server answered {r.status_code}: {detail}", file=sys.stderr)
        return 1
    out = r.json()
    print(
        f"backup written by the server: {out['path']} ({out['bytes'] / 1e6:,.1f} MB, "
        f"{out['requests']:,} requests, {out['seconds']:.1f} s)"
    )
    return 0
