"""`tokenshape demo`: seed deterministic synthetic traffic, optionally then serve it."""

from __future__ import annotations

import argparse
import time
from typing import TYPE_CHECKING

from app.cli.common import Progress, command, open_db, settings_for
from app.cli.serve import cmd_serve, server_options
from app.jobs.cron import check_setting

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `demo`."""
    demo = command(subparsers, "demo", cmd_demo, "Seed deterministic synthetic traffic.")
    demo.add_argument("--days", type=int, default=14, help="days of traffic (default 14)")
    demo.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    demo.add_argument(
        "--requests",
        type=int,
        help="rows to store (up to 10,000,000; default: the platform's traffic at --sample-rate, "
        "about 331,000 rows for 14 days); the traffic they stand for is requests / sample-rate",
    )
    demo.add_argument(
        "--sample-rate",
        type=float,
        help="probability each request is kept, 0 < p <= 1 (default 0.01; 1, every request, "
        "with --requests)",
    )
    demo.add_argument("--tz", help="time zone of the daily rhythm (default: TOKENSHAPE_TZ)")
    demo.add_argument("--serve", action="store_true", help="serve the data afterwards")
    server_options(demo)


def cmd_demo(args: argparse.Namespace) -> int:
    """Seed deterministic synthetic traffic, optionally then serve it."""
    from app.services import demo

    settings = settings_for(args)
    if args.serve:  # a schedule that cannot run fails before the seeding, not after
        check_setting(settings.report_cron)
    rows, rate, _ = demo.plan(args.requests, args.sample_rate, args.days, settings.tz)
    with open_db(settings) as db:
        progress = Progress("demo", rows)
        started = time.monotonic()
        stats = demo.seed(
            db,
            requests=args.requests,
            sample_rate=args.sample_rate,
            days=args.days,
            seed=args.seed,
            tz=settings.tz,
            progress=progress.advance,
        )
        progress.close()
        sampled = f", a {rate:.2%} sample of {stats.represented:,.0f}" if rate < 1 else ""
        print(
            f"demo: {stats.accepted:,} requests stored ({stats.duplicates:,} already there"
            f"{sampled}) over {args.days} days in {settings.db} in "
            f"{time.monotonic() - started:.1f} s"
        )
    if args.serve:
        return cmd_serve(args)
    return 0
