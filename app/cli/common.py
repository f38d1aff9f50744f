"""What every command shares: settings from the options, the database, --db, a progress bar."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from app.config import Settings
from app.storage.database import Database

if TYPE_CHECKING:
    # argparse's own name for what add_subparsers() returns; it is no public class.
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[argparse.Namespace], int]


def add_db(parser: argparse.ArgumentParser) -> None:
    """Declare --db on parser: the one place it is spelled out."""
    parser.add_argument("--db", type=Path, help="database file (default: TOKENSHAPE_DB)")


# The parent of every command that opens the database (--db first in its help).
DB = argparse.ArgumentParser(add_help=False)
add_db(DB)


def iso_time(text: str) -> datetime:
    """An option's ISO 8601 time, aware (UTC when it names no zone)."""
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use an ISO 8601 time, e.g. 2026-11-20T08:00 (UTC if no zone)"
        ) from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def command(
    subparsers: Subparsers,
    name: str,
    func: Handler,
    help_: str,
    *parents: argparse.ArgumentParser,
) -> argparse.ArgumentParser:
    """A sub-command with help_ as its help and description, --db, then parents' options."""
    parser = subparsers.add_parser(name, help=help_, description=help_, parents=[DB, *parents])
    parser.set_defaults(func=func)
    return parser


def settings_for(args: argparse.Namespace) -> Settings:
    """The settings (environment, .env), with the options given on the command line on top."""
    overrides = {k: v for k in ("db", "host", "port", "tz") if (v := getattr(args, k, None))}
    return Settings(**overrides)


def open_db(settings: Settings) -> Database:
    """The database file, opened (and migrated) for writing."""
    return Database(settings.db).open()


class Progress:
    """A one-line progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, label: str, total: int | None):
        self.label, self.total, self.done = label, total, 0
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()

    def advance(self, n: int) -> None:
        """Count n more units and redraw."""
        self.done += n
        if not self.tty:
            return
        rate = self.done / max(time.monotonic() - self.started, 1e-6)
        if self.total:
            share = min(self.done / self.total, 1.0)
            bar = "#" * int(share * 30)
            text = f"\r{self.label} [{bar:<30}] {share:6.1%} {self.done:,} ({rate:,.0f}/s)"
        else:
            text = f"\r{self.label} {self.done:,} ({rate:,.0f}/s)"
        sys.stderr.write(text)
        sys.stderr.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.tty:
            sys.stderr.write("\n")
