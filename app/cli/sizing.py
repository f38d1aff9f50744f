"""`tokenshape recommend` and `tokenshape seasonal`: an engine sized to its recent traffic."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from app.cli.common import command, settings_for
from app.storage.database import Database

if TYPE_CHECKING:
    from app.cli.common import Subparsers
    from app.config import Settings
    from app.services.rightsizing import SeasonalReport
    from app.sizing.rightsize import Recommendation
    from app.sizing.seasonal import Seasonal

SPANS = {"h": 3600, "d": 86400, "w": 7 * 86400}
ENGINE = "engine name (with a stored profile)"


def add_recommend(subparsers: Subparsers) -> None:
    """Add `recommend`."""
    rec = command(
        subparsers, "recommend", cmd_recommend, "Rightsize an engine from its recent traffic."
    )
    rec.add_argument("--engine", required=True, help=ENGINE)
    rec.add_argument("--since", default="7d", help="window up to now: 24h, 7d, 2w (default 7d)")
    rec.add_argument(
        "--coverage", type=_coverage, default=0.999, help="share of requests to fit (default 0.999)"
    )
    rec.add_argument(
        "--granularity",
        type=_granularity,
        default=256,
        help="round bounds up to this (default 256)",
    )
    rec.add_argument("--json", action="store_true", help="print the recommendation as JSON")


def add_seasonal(subparsers: Subparsers) -> None:
    """Add `seasonal`."""
    sea = command(subparsers, "seasonal", cmd_seasonal, "Day/night engine plans for an engine.")
    sea.add_argument("--engine", required=True, help=ENGINE)
    _add_weeks(sea)
    sea.add_argument(
        "--headroom", type=_headroom, default=0.2, help="spare capacity per hour (default 0.2)"
    )
    sea.add_argument(
        "--weekends", action="store_true", help="also plan weekdays and weekends separately"
    )
    sea.add_argument("--json", action="store_true", help="print the plans as JSON")


def _since(text: str) -> timedelta:
    """'7d', '24h', '2w' as a timedelta."""
    unit = text[-1:].lower()
    if unit not in SPANS or not text[:-1].isdigit() or int(text[:-1]) < 1:
        raise ValueError(f"--since {text!r}: use a count and a unit, e.g. 24h, 7d or 2w")
    return timedelta(seconds=int(text[:-1]) * SPANS[unit])


def _coverage(text: str) -> float:
    """--coverage: a share strictly between 0.5 and 1."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.5 < value < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use a share between 0.5 and 1, e.g. 0.999")
    return value


def _headroom(text: str) -> float:
    """--headroom: a share of spare capacity, 0 to 2."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 2:
        raise argparse.ArgumentTypeError(f"{text!r}: use a share between 0 and 2, e.g. 0.2")
    return value


def _granularity(text: str) -> int:
    """--granularity: a positive whole number of tokens."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: use a positive number of tokens, e.g. 256")
    return int(text)


def _engine_report(
    args: argparse.Namespace,
    build: Callable[[Database, Settings], Any],
    as_dict: Callable[[Any], dict],
) -> tuple[Any, int]:
    """Build an engine's report from the database (read-only). Prints the JSON (--json) or the
    verdict line; returns (report, 0) when the caller prints the rest, else (None, exit code)."""
    from app.services.profiles import NoProfile

    settings = settings_for(args)
    with Database(settings.db, read_only=True).open() as db:
        try:
            r = build(db, settings)
        except NoProfile as exc:
            print(f"error: {exc}", file=sys.stderr)
            return None, 1
    if args.json:
        print(json.dumps(as_dict(r), indent=2, default=str))
        return None, 0
    print(f"{r.engine}: {r.verdict}")
    return r, 0


def cmd_recommend(args: argparse.Namespace) -> int:
    """Print an engine's rightsizing recommendation (text, or JSON with --json)."""
    from app.services.rightsizing import recommend, recommendation_dict, window_to
    from app.sizing.slo import Fleet

    start, end = window_to(datetime.now(UTC), _since(args.since))
    r, code = _engine_report(
        args,
        lambda db, settings: recommend(
            db,
            args.engine,
            start=start,
            end=end,
            coverage=args.coverage,
            granularity=args.granularity,
            tz=settings.tz,
            fleet=Fleet.of(settings),
        ),
        recommendation_dict,
    )
    if r is None:
        return code
    _print_recommendation(r, args.since, start, end)
    return 0


def _print_recommendation(r: Recommendation, since: str, start: datetime, end: datetime) -> None:
    """The status, the bounds now and after, the refusals, the warnings, the whole-day
    commands and the notes."""
    from app.sizing.status import engine_status

    state = engine_status(r)
    print(f"  status: {state.label} ({state.reason})")
    print(f"  window: {start.isoformat()} to {end.isoformat()}")
    if r.recommended:
        cur, rec = r.current, r.recommended
        print(f"  requests in the last {since}: {r.traffic.requests:,}")
        for name in ("max_input_len", "max_seq_len", "max_batch_size", "max_num_tokens"):
            now, after = getattr(cur, name), getattr(rec, name)
            print(f"  {name:<15} {_n(now):>10} -> {_n(after):>10}")
        print(
            f"  refused by the bounds: now {_n(r.rejected_current)}, "
            f"after {_n(r.rejected_recommended)}"
        )
        for warning in r.warnings:
            print(f"  warning: {warning}")
        print("  whole-day build:")
        for framework, script in r.commands.items():
            print(f"  {framework}:")
            for line in script.splitlines():
                print(f"    {line}")
    for note in r.notes:
        print(f"  note: {note}")


def cmd_seasonal(args: argparse.Namespace) -> int:
    """Print an engine's day/night plans (text, or JSON with --json)."""
    from app.services.rightsizing import seasonal, seasonal_dict
    from app.sizing.slo import Fleet

    r, code = _engine_report(
        args,
        lambda db, settings: seasonal(
            db,
            args.engine,
            now=datetime.now(UTC),
            tz=settings.tz,
            weeks=args.weeks,
            headroom=args.headroom,
            threshold=settings.seasonal_threshold,
            day_types=args.weekends,
            fleet=Fleet.of(settings),
        ),
        seasonal_dict,
    )
    if r is None:
        return code
    if r.result:
        _print_plans(r, r.result)
    return 0


def _print_plans(r: SeasonalReport, result: Seasonal) -> None:
    """A line per plan (static, hourly, split), the weekday verdict and the engine commands."""
    from app.sizing.seasonal import window_label
    from app.sizing.slo import money

    print(f"  {r.requests:,} requests over {r.weeks} weeks, hours in {r.tz}")
    if r.slo:
        print(f"  SLO: {r.slo.words()} ({r.slo.source})")
    for plan in (result.now, result.static, result.hourly, result.split):
        if plan is None:
            continue
        windows = ", ".join(
            f"{window_label(c.hours)} max_seq_len {c.max_seq_len:,}" for c in plan.configs
        )
        cost = (
            f", {money(plan.cost_month, r.currency)}/month" if plan.cost_month is not None else ""
        )
        print(
            f"  {plan.name:<9} peak {max(plan.replicas):>3} replicas, "
            f"{plan.gpu_hours_month:>8,.0f} GPU-hours/month{cost}  ({windows})"
        )
    if r.day_types:
        print(f"  weekdays/weekends: {r.day_types.verdict}")
    whole = r.whole_day
    if whole is not None and whole.commands:
        framework = next(iter(whole.commands))
        print("  whole-day build (as `tokenshape recommend` over the same window):")
        for line in whole.commands[framework].splitlines():
            print(f"    {line}")
    two = r.verdict.startswith("Run two engines")
    for block in r.commands:
        # Per-window builds are a recommendation only when the verdict is two engines.
        print(f"  {block['build']}{'' if two else ' (not recommended: see the verdict)'}:")
        print(f"    {block[next(iter(block))]}")


def _add_weeks(parser: argparse.ArgumentParser) -> None:
    """--weeks: whole weeks up to now, 1 to 12."""
    parser.add_argument(
        "--weeks",
        type=int,
        choices=range(1, 13),
        default=4,
        metavar="1..12",
        help="whole weeks up to now (default 4)",
    )


def add_money(subparsers: Subparsers) -> None:
    """Add `money`."""
    mon = command(
        subparsers,
        "money",
        cmd_money,
        "GPU-hours and money per engine now and planned, within the SLO.",
    )
    _add_weeks(mon)
    mon.add_argument("--json", action="store_true", help="print as JSON")


def cmd_money(args: argparse.Namespace) -> int:
    """Print each engine's plans per month and the fleet's total to save."""
    from app.services.economics import fleet_money, money_dict
    from app.sizing.slo import Fleet, money

    settings = settings_for(args)
    with Database(settings.db, read_only=True).open() as db:
        m = fleet_money(
            db, now=datetime.now(UTC), tz=settings.tz, fleet=Fleet.of(settings), weeks=args.weeks
        )
    if args.json:
        print(json.dumps([money_dict(e) for e in m.engines], indent=2, default=str))
        return 0
    for e in m.engines:
        print(e.verdict)
        for p in e.plans:
            cost = f"  {money(p.cost_month, e.currency)}/month" if p.cost_month is not None else ""
            print(
                f"  {p.name:<9} peak {p.peak_replicas:>3} replicas  "
                f"{p.gpu_hours_month:>8,.0f} GPU-hours/month{cost}  ({p.label})"
            )
    print(f"fleet: {m.headline()}")
    return 0


def _n(value: int | None) -> str:
    """A count with thousands separators, or a dash for none."""
    return "–" if value is None else f"{value:,}"
