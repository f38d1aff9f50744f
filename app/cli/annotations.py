"""`tokenshape annotate TEXT` and `tokenshape annotations list|delete`: notes on the timeline
that every time chart marks, beside the engines' profile changes."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from app.cli.common import command, iso_time, open_db, settings_for
from app.storage.database import Database

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `annotate` and `annotations`."""
    note = command(
        subparsers,
        "annotate",
        cmd_annotate,
        'Add a note to the timeline ("deployed vLLM 0.33"); every time chart marks it.',
    )
    note.add_argument("text", help="one line, at most 500 characters")
    note.add_argument(
        "--at", type=iso_time, help="when it happened, ISO 8601 (default: now; UTC if no zone)"
    )
    note.add_argument("--engine", help="the engine it is about (default: the whole fleet)")
    group = subparsers.add_parser(
        "annotations",
        help="List or delete notes (profile changes are listed too).",
        description="List or delete notes; profile changes are listed beside them.",
    )
    actions = group.add_subparsers(dest="action", required=True)
    listing = command(actions, "list", cmd_list, "list notes and profile changes in a window")
    listing.add_argument(
        "--start", type=iso_time, help="window start, ISO 8601 (default: 30 days ago)"
    )
    listing.add_argument("--end", type=iso_time, help="window end (default: none)")
    listing.add_argument("--engine", help="this engine's and the fleet-wide ones only")
    listing.add_argument("--json", action="store_true", help="print them as JSON")
    delete = command(actions, "delete", cmd_delete, "delete a note by its id")
    delete.add_argument("id", help="the note's id (from `tokenshape annotations list`)")


def cmd_annotate(args: argparse.Namespace) -> int:
    """Store a note and print it."""
    from app.services.annotations import add_note

    with open_db(settings_for(args)) as db:
        try:
            note = add_note(db, args.text, datetime.now(UTC), at=args.at, engine=args.engine)
        except ValueError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    print(f"{note.id}\t{note.at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z\t{note.text}")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """Print the window's notes and profile changes, oldest first."""
    from app.services.annotations import between, window

    try:
        start, end = window(args.start, args.end, datetime.now(UTC))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with Database(settings_for(args).db, read_only=True).open() as db:
        found = between(db, start, end, args.engine)
    if args.json:
        print(json.dumps([a.as_dict() for a in found], indent=2))
        return 0
    for a in found:
        print(
            f"{a.id}\t{a.at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z\t{a.author}\t"
            f"{a.engine or '-'}\t{a.text}"
        )
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete a note."""
    from app.services.annotations import delete_note

    if args.id.startswith("profile:"):
        print(
            f"error: {args.id!r} is a profile change, which stays in the engine's history; "
            "undo it with `tokenshape engine set` or `tokenshape engine restore`",
            file=sys.stderr,
        )
        return 2
    with open_db(settings_for(args)) as db:
        if not delete_note(db, args.id):
            print(
                f"error: no note has id {args.id!r}; `tokenshape annotations list` lists them",
                file=sys.stderr,
            )
            return 1
    print(f"deleted note {args.id}")
    return 0
