"""`tokenshape quarantine list|ack`: damaged files moved aside at start, and the operator's
acknowledgement (works while the server runs: it reads and writes only the folder's notes)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.cli.common import command, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `quarantine list` and `quarantine ack`."""
    top = subparsers.add_parser(
        "quarantine",
        help="Damaged files moved aside (journal segments): list them, acknowledge them.",
        description="Damaged files tokenshape moved to the quarantine folder beside the "
        "database, with what was recovered and lost; /api/health shows them until acknowledged.",
    )
    sub = top.add_subparsers(dest="action", required=True)
    listing = command(sub, "list", cmd_list, "List quarantined files and what they cost.")
    listing.add_argument("--all", action="store_true", help="include acknowledged ones")
    ack = command(sub, "ack", cmd_ack, "Acknowledge quarantined files (they stay on disk).")
    ack.add_argument("name", nargs="?", help="one file's name (default: every one)")


def cmd_list(args: argparse.Namespace) -> int:
    """Print each quarantined file with its damage; exit 1 while any is unacknowledged."""
    from app.storage import quarantine

    folder = quarantine.folder_for(settings_for(args).db)
    units = quarantine.listed(folder)
    shown = [d for d in units if args.all or not d.acknowledged]
    if not shown:
        print(f"nothing to acknowledge in {folder}")
        return 0
    for damage in shown:
        state = "acknowledged" if damage.acknowledged else "NOT acknowledged"
        print(f"{damage.name} ({state}, {damage.at}): {damage.sentence()}")
    return 1 if any(not d.acknowledged for d in units) else 0


def cmd_ack(args: argparse.Namespace) -> int:
    """Acknowledge one or every quarantined file; exit 1 if a named one is not there."""
    from app.storage import quarantine

    folder = quarantine.folder_for(settings_for(args).db)
    done = quarantine.acknowledge(folder, args.name)
    if args.name and not done:
        print(f"error: no unacknowledged file named {args.name!r} in {folder}")
        return 1
    print(f"acknowledged {done} file(s); they stay in {folder} until you remove them")
    return 0
