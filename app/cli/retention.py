"""`tokenshape prune`: delete (or count) requests and rejects past their retention, now."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import command, open_db, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers
    from app.services.retention import PruneResult

NAMES = {"requests": "TOKENSHAPE_RETENTION_DAYS", "rejects": "TOKENSHAPE_REJECT_RETENTION_DAYS"}
TIER_NAMES = (
    "TOKENSHAPE_ROLLUP_HOURLY_DAYS",
    "TOKENSHAPE_ROLLUP_HOURLY_NT_DAYS",
    "TOKENSHAPE_ROLLUP_DAILY_DAYS",
)


def add_parser(subparsers: Subparsers) -> None:
    """Add `prune`."""
    prune = command(
        subparsers, "prune", cmd_prune, "Delete requests and rejects past their retention now."
    )
    prune.add_argument("--dry-run", action="store_true", help="only count what would be deleted")


def cmd_prune(args: argparse.Namespace) -> int:
    """Delete (or count, with --dry-run) requests and rejects past their retention."""
    from app.services import retention

    settings = settings_for(args)
    days = {"requests": settings.retention_days, "rejects": settings.reject_retention_days}
    if not any(days.values()) and not any(settings.tier_days):
        off = [*NAMES.values(), *TIER_NAMES]
        print(f"retention is off ({', '.join(f'{n}=0' for n in off)}): nothing to do")
        return 0
    with open_db(settings) as db:
        before = _file_bytes(settings.db)
        result = retention.prune(
            db,
            datetime.now(UTC),
            request_days=days["requests"],
            reject_days=days["rejects"],
            dry_run=args.dry_run,
            tz=settings.tz,
            tier_days=settings.tier_days,
        )
    _print_result(result, days, args.dry_run)
    if not args.dry_run:
        after = _file_bytes(settings.db)
        print(
            f"{settings.db}: {before / 1e6:,.1f} MB before, {after / 1e6:,.1f} MB after "
            "(freed space is reused by new rows; the file rarely shrinks)"
        )
    return 0


def _print_result(result: PruneResult, days: dict[str, int], dry_run: bool) -> None:
    """A line per table: what was (or would be) deleted, or that it is kept forever."""
    verb = "would delete" if dry_run else "deleted"
    for table in ("requests", "rejects"):
        if table not in result.cutoffs:
            print(f"{table}: kept forever ({NAMES[table]}=0)")
            continue
        print(
            f"{table}: {verb} {result.deleted[table]:,} received before "
            f"{result.cutoffs[table]:%Y-%m-%d %H:%M} UTC ({NAMES[table]}={days[table]})"
            + (" (whole hours, kept in the rollups)" if table == "requests" else "")
        )
    for tier, dropped in result.tiers.items():
        unit = "days" if tier == "daily" else "hours"
        print(f"rollups {tier}: dropped {dropped:,} {unit} past their retention")


def _file_bytes(path: Path) -> int:
    """The database's size on disk, its write-ahead log included."""
    wal = path.with_name(path.name + ".wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())
