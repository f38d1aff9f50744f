"""`tokenshape lake import` and `tokenshape lake push`: the lake job's rollups into this node's
tiers, and this node's own rollups to a central node (app/services/lake.py does the work).

Both are added to the `lake` group of app/cli/lake.py by `add_import_parser(sub)` and
`add_push_parser(sub)`, with `sub` that group's subparsers."""

from __future__ import annotations

import argparse
import os
import re
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from app.cli.common import Progress, command, open_db, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers
    from app.services.lake import ImportResult, PushRound

GAVE_UP = 3  # exit status: the central node did not take a request within --give-up-after
_SPAN = re.compile(r"^(\d+)([hdw])$")
_UNITS = {"h": 3600, "d": 86400, "w": 7 * 86400}


def add_import_parser(lake_subparsers: Subparsers) -> None:
    """Add `lake import PATH [--origin NAME]` to the `lake` group."""
    imp = command(
        lake_subparsers,
        "import",
        cmd_import,
        "Import the lake job's rollups (a folder, s3:// or gs://) into the rollup tiers.",
    )
    imp.add_argument(
        "path",
        help="the lake job's --output: a folder, or s3://… gs://… (needs DuckDB's httpfs)",
    )
    imp.add_argument("--origin", help="name the hours are recorded under (default: the path)")


def add_push_parser(lake_subparsers: Subparsers) -> None:
    """Add `lake push --url URL --token TOKEN [--since …] [--every SECONDS]` to `lake`."""
    push = command(
        lake_subparsers,
        "push",
        cmd_push,
        "Push this node's own hourly rollups to a central tokenshape (POST /v1/rollups).",
    )
    push.add_argument("--url", required=True, help="the central node, e.g. https://central:8050")
    push.add_argument(
        "--token", help="an ingest token of the central node (default: TOKENSHAPE_PUSH_TOKEN)"
    )
    push.add_argument(
        "--since",
        type=_since,
        help="first hour: ISO 8601 (no zone: UTC) or a span back from now: 24h, 7d, 2w "
        "(default: every hour the full-grain rollups hold)",
    )
    push.add_argument(
        "--every",
        type=_positive,
        metavar="SECONDS",
        help="push again every SECONDS, only the hours rebuilt since (default: once)",
    )
    push.add_argument(
        "--origin", help="this node's name at the central node (default: the host name)"
    )
    push.add_argument(
        "--hours",
        type=int,
        default=24,
        metavar="N",
        help="hours per request (default 24; a request the central node finds too big is halved)",
    )
    push.add_argument(
        "--give-up-after",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="stop (exit status 3) when a request has not been taken for this long "
        "(default 600; 0: retry forever)",
    )


def _since(text: str) -> datetime:
    """--since: an ISO 8601 time (no zone: UTC) or a span back from now."""
    span = _SPAN.match(text.strip().lower())
    if span:
        return datetime.now(UTC) - timedelta(seconds=int(span[1]) * _UNITS[span[2]])
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r}: use ISO 8601 (2026-11-20T00:00Z) or a span: 24h, 7d, 2w"
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when


def _positive(text: str) -> float:
    """--every: seconds, more than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: use seconds, more than 0")
    return value


def _seconds(text: str) -> float:
    """--give-up-after: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: use seconds, 0 or more (0: never give up)")
    return value


def _rows(rows: dict[str, int]) -> str:
    return ", ".join(f"{table} {n:,}" for table, n in sorted(rows.items())) or "no rows"


def describe_import(result: ImportResult, path: str, seconds: float) -> list[str]:
    """The lines `lake import` prints about what it wrote."""
    lines = [
        f"lake import: {result.hours:,} hours and {result.days:,} days (from daily rows only) "
        f"from {path} as origin {result.origin!r}, gateways {', '.join(result.gateways) or 'none'}"
        f" in {seconds:.1f} s: {_rows(result.rows)}"
    ]
    if result.skipped_hours or result.skipped_days:
        lines.append(
            f"  left as they were: {result.skipped_hours:,} hours, {result.skipped_days:,} days"
        )
    lines += [f"  {note}" for note in result.notes[:10]]
    return lines


def cmd_import(args: argparse.Namespace) -> int:
    """Import the lake job's rollups into the tiers."""
    from app.services import lake

    settings = settings_for(args)
    path = str(args.path)
    origin = args.origin or path
    with open_db(settings) as db:
        progress = Progress("lake import (hours)", None)
        started = time.monotonic()
        try:
            result = lake.import_path(
                db, path, tz=settings.tz, origin=origin, progress=progress.advance
            )
        except (lake.LakeError, lake.LakeBusy) as exc:
            progress.close()
            print(f"error: {exc}", file=sys.stderr)
            return 2
        progress.close()
    for line in describe_import(result, path, time.monotonic() - started):
        print(line)
    return 0


def describe_push(out: PushRound, url: str, origin: str) -> str:
    """The line `lake push` prints about one round."""
    if not out.hours or out.first is None or out.last is None:
        return f"lake push: nothing new to push to {url}"
    span = f"{out.first:%Y-%m-%d %H:00} to {out.last + timedelta(hours=1):%Y-%m-%d %H:00} UTC"
    return (
        f"lake push: {out.hours:,} hours ({span}) in {out.requests} requests to {url} as "
        f"origin {origin!r}: {_rows(out.rows)}"
    )


def push_rounds(
    args: argparse.Namespace,
    *,
    rounds: int | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> int:
    """Push once, or every --every seconds (`rounds`: stop after that many; for tests);
    the database is opened for each round only."""
    from app.services import lake

    token = args.token or os.environ.get("TOKENSHAPE_PUSH_TOKEN", "")
    if not token:
        print("error: pass --token or set TOKENSHAPE_PUSH_TOKEN (an ingest token)", file=sys.stderr)
        return 2
    if args.hours < 1:
        print("error: --hours must be 1 or more", file=sys.stderr)
        return 2
    settings = settings_for(args)
    origin = args.origin or lake.default_origin()
    pusher = lake.Pusher(args.url, token, origin, give_up_after=args.give_up_after, sleep=sleep)
    built_after: datetime | None = None
    done = 0
    try:
        while True:
            try:
                with open_db(settings) as db:
                    out = lake.push_round(
                        db,
                        pusher,
                        tz=settings.tz,
                        since=args.since,
                        built_after=built_after,
                        hours_per_request=args.hours,
                    )
                built_after = out.built_until
                print(describe_push(out, args.url, origin), flush=True)
            except lake.PushError as exc:
                print(f"error: {exc}", file=sys.stderr, flush=True)
                if args.every is None:
                    return GAVE_UP if isinstance(exc, lake.PushGaveUp) else 1
                # On a schedule: the next round sends this one's hours again.
            done += 1
            if args.every is None or (rounds is not None and done >= rounds):
                return 0
            sleep(args.every)
    finally:
        pusher.close()


def cmd_push(args: argparse.Namespace) -> int:
    """Push this node's clean hourly rollups to a central node."""
    return push_rounds(args)
