"""The `tokenshape` command: serve, migrate, token, demo, import, prune and more.

Each command group lives in its own module with an `add_parser(subparsers)`; its command
functions import what they need when they run, so `tokenshape --help` stays fast."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable

from pydantic import ValidationError

from app.cli import (
    backup,
    demo,
    engines,
    export,
    goodput,
    imports,
    lake,
    migrate,
    perf,
    quarantine,
    reports,
    retention,
    serve,
    ship,
    sizing,
    tokens,
    users,
)

# Not `from app.cli import annotations`: here that name is __future__'s feature.
from app.cli.annotations import add_parser as add_annotations
from app.cli.serve import cmd_serve
from app.storage.database import (
    DatabaseLocked,
    DatabaseReadOnly,
    DatabaseTooNew,
    DatabaseUnreadable,
)

__all__ = ["build_parser", "cmd_serve", "main"]  # cmd_serve: what a compose `command:` must reach

# In the order `tokenshape --help` has always listed the commands.
REGISTER = (
    serve.add_parser,
    migrate.add_parser,
    tokens.add_parser,
    users.add_parser,
    demo.add_parser,
    retention.add_parser,
    backup.add_parser,
    imports.add_parser,
    sizing.add_recommend,
    ship.add_parser,
    reports.add_parser,
    sizing.add_seasonal,
    perf.add_parser,
    goodput.add_parser,
    engines.add_parser,
    add_annotations,
    sizing.add_money,
    lake.add_parser,
    export.add_parser,
    quarantine.add_parser,
)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="tokenshape",
        description="The real ISL x OSL shape of LLM serving traffic, and engines sized to it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for register in REGISTER:
        register(sub)
    return parser


def _recover_before_serving(args: argparse.Namespace) -> None:
    """Quarantine and rebuild a damaged database file or WAL before `serve` opens it, logging
    the damage where the server logs (a newer, read-only or locked file raises instead)."""
    from app.cli.common import settings_for
    from app.jobs.cron import check_setting
    from app.server import logs
    from app.storage.recovery import recover

    settings = settings_for(args)
    check_setting(settings.report_cron)  # a bad setting fails before the file is touched
    logs.configure(settings)
    recover(settings.db)


def main(argv: Iterable[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
        if args.func is cmd_serve:
            _recover_before_serving(args)
        return int(args.func(args) or 0)
    except DatabaseLocked as exc:
        print(f"error: {exc}", file=sys.stderr)
        if args.command in ("token", "user"):
            print(
                "while the server runs, manage tokens and users on its Admin page (/admin) "
                "or through /api/tokens and /api/users with an admin token",
                file=sys.stderr,
            )
        return 2
    except (DatabaseUnreadable, DatabaseTooNew, DatabaseReadOnly) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        print(f"error: invalid setting: {problems}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (`| head`): stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
