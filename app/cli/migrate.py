"""`tokenshape migrate`: bring the database file to the newest schema."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.cli.common import command, open_db, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `migrate`."""
    command(subparsers, "migrate", cmd_migrate, "Migrate the database file to the newest schema.")


def cmd_migrate(args: argparse.Namespace) -> int:
    """Bring the database file to the newest schema (opening it migrates it)."""
    settings = settings_for(args)
    with open_db(settings) as db:
        print(f"{settings.db} is at revision {db.revision}")
    return 0
