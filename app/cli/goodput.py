"""`tokenshape goodput`: the SLO ledger of the stored requests, without a server."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from app.cli.common import command, iso_time, settings_for
from app.storage.database import Database

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `goodput`."""
    p = command(
        subparsers,
        "goodput",
        cmd_goodput,
        "Goodput against the latency SLOs, per engine, and why requests missed.",
    )
    p.add_argument("--engine", action="append", help="only this engine (repeat for several)")
    p.add_argument("--start", type=iso_time, help="window start, ISO 8601 (default: 7 days ago)")
    p.add_argument("--end", type=iso_time, help="window end, exclusive (default: now)")
    p.add_argument("--json", action="store_true", help="print the whole ledger as JSON")


def _pct(value: Any) -> str:
    return "–" if value is None else f"{value:.1%}"


def cmd_goodput(args: argparse.Namespace) -> int:
    """Print each engine's goodput against its target and the shapes that miss most."""
    from app.analytics.filters import Filter
    from app.services import slo
    from app.sizing.slo import Fleet

    end = args.end or datetime.now(UTC)
    start = args.start or end - timedelta(days=7)
    if start >= end:
        raise ValueError("--start must be before --end")
    settings = settings_for(args)
    flt = Filter(start=start, end=end, engines=tuple(args.engine or ()))
    with Database(settings.db, read_only=True).open() as db:
        rep = slo.report(db, flt, Fleet.of(settings), tz=settings.tz)
        out = slo.report_dict(rep, flt)
    if args.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    print(f"window {start.isoformat()} to {end.isoformat()} (exact, from raw rows)")
    if not out["set"]:
        print(out["how_to_set"])
        return 0
    totals = out["totals"]
    print(
        f"all: goodput {_pct(totals['goodput'])} of {totals['requests']:,.0f} requests with an "
        f"SLO (target {_pct(totals['target'])}); {totals['not_measured']:,.0f} not measured, "
        f"{totals['no_slo']:,.0f} without an SLO"
        + (" (estimated from sampled rows)" if out["sampled"] else "")
    )
    for row in out["by_engine"]:
        print(row["words"])
    if out["misses"]:
        print("request shapes that miss:")
        for miss in out["misses"][:10]:
            print(f"  {miss['words']}")
    return 0
