"""`tokenshape ship`: send an NDJSON log (a file, a growing file, stdin) to a running server."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import Progress

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `ship` (no --db: it talks to a server, never to the file)."""
    shp = subparsers.add_parser(
        "ship",
        help="Ship an NDJSON log to a running server.",
        description="Ship an NDJSON log (a file, a growing file or - for stdin) to a server.",
    )
    shp.set_defaults(func=cmd_ship)
    shp.add_argument("file", help="the NDJSON file, or - for standard input")
    shp.add_argument("--url", default="http://127.0.0.1:8050", help="the server's address")
    shp.add_argument("--token", help="an ingest token (default: TOKENSHAPE_SHIP_TOKEN)")
    shp.add_argument("--format", default="ndjson", choices=["ndjson", "litellm"])
    shp.add_argument("--batch", type=int, default=1000, help="records per request (default 1000)")
    shp.add_argument("--follow", action="store_true", help="keep shipping what is appended")
    shp.add_argument("--checkpoint", help="where to keep the acknowledged offset")
    shp.add_argument(
        "--no-checkpoint", action="store_true", help="start from the beginning, keep no state"
    )
    shp.add_argument(
        "--give-up-after",
        type=_seconds,
        default=600.0,
        metavar="SECONDS",
        help="stop (exit status 3) when a batch has not been taken for this long, the server "
        "down or failing all along (default 600; 0: retry forever)",
    )


GAVE_UP = 3  # exit status: the server did not take a batch within --give-up-after


def _seconds(text: str) -> float:
    """A --give-up-after value: seconds, 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: use seconds, 0 or more (0: never give up)")
    return value


def cmd_ship(args: argparse.Namespace) -> int:
    """Ship an NDJSON log to a running server over HTTP."""
    token = args.token or os.environ.get("TOKENSHAPE_SHIP_TOKEN", "")
    if not token:
        print("error: pass --token or set TOKENSHAPE_SHIP_TOKEN (an ingest token)", file=sys.stderr)
        return 2
    source = None if args.file == "-" else Path(args.file)
    if source is not None and not source.is_file():
        print(f"error: {source} is not a file", file=sys.stderr)
        return 1
    checkpoint = _checkpoint(args, source)
    if checkpoint is not None and not os.access(checkpoint.parent, os.W_OK):
        print(
            f"error: cannot write the checkpoint {checkpoint}: pass --checkpoint PATH in a "
            "writable directory, or --no-checkpoint",
            file=sys.stderr,
        )
        return 2
    return _ship(args, source, token, checkpoint)


def _checkpoint(args: argparse.Namespace, source: Path | None) -> Path | None:
    """Where the acknowledged offset is kept: --checkpoint, else beside the file; stdin has none."""
    if source is None or args.no_checkpoint:
        return None
    if args.checkpoint:
        return Path(args.checkpoint)
    return source.with_name(source.name + ".tokenshape-ship")


def _ship(
    args: argparse.Namespace, source: Path | None, token: str, checkpoint: Path | None
) -> int:
    """Ship with a progress bar; print the totals, or the error (exit status 1, or 3 when it
    gave up on a server that kept failing)."""
    from ingest.ship import ShipError, ShipGaveUp, ship

    progress = Progress(f"ship {args.file}", None)
    started = time.monotonic()
    try:
        stats = ship(
            source,
            args.url,
            token,
            fmt=args.format,
            batch=args.batch,
            follow=args.follow,
            checkpoint=checkpoint,
            progress=progress.advance,
            give_up_after=args.give_up_after,
        )
    except ShipGaveUp as exc:  # what was acknowledged is in the checkpoint: a rerun resumes
        progress.close()
        print(f"ship: {exc}", file=sys.stderr)
        return GAVE_UP
    except (ShipError, OSError) as exc:  # OSError: the file or the checkpoint
        progress.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    progress.close()
    print(
        f"ship: {stats.accepted:,} accepted, {stats.duplicates:,} duplicates, "
        f"{stats.rejected:,} rejected in {stats.batches:,} batches ({stats.retries} retries) "
        f"in {time.monotonic() - started:.1f} s"
    )
    for line in stats.first_errors:
        print(f"  {line}")
    return 0
