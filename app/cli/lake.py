"""`tokenshape lake`: tokenshape's rollups computed by Apache Spark where the logs already are.

`lake rollup` runs the PySpark job shipped in app/lake/job.py over Parquet or NDJSON logs
(any Hadoop path) and writes the hourly and daily tiers as Parquet with manifests; `lake spec`
writes the spec file that job needs when submitted by hand (Databricks, EMR, Kubernetes)."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli import lake_sync

if TYPE_CHECKING:
    from app.cli.common import Subparsers

MAPPING_HELP = (
    "column mapping: a YAML file, or a shipped one by name: identity (the default), "
    "litellm, otel-file"
)


def add_parser(subparsers: Subparsers) -> None:
    """Add `lake` and its subcommands."""
    lake = subparsers.add_parser(
        "lake",
        help="Compute rollups with Apache Spark from a data lake's request logs.",
        description="Compute rollups with Apache Spark from a data lake's request logs.",
    )
    sub = lake.add_subparsers(dest="lake_command", required=True, metavar="SUBCOMMAND")

    roll = sub.add_parser(
        "rollup",
        help="Run the Spark job: logs in, hourly and daily rollup tiers out (Parquet).",
        description="Run the Spark job: logs in, hourly and daily rollup tiers out (Parquet).",
    )
    roll.add_argument(
        "--input",
        required=True,
        action="append",
        help="logs: a path or glob Hadoop reads (s3a://, gs://, abfss://, files); repeatable",
    )
    roll.add_argument("--output", required=True, help="folder the tiers are written under")
    roll.add_argument(
        "--from", dest="start", help="first hour, ISO 8601 (a time without zone is in --tz)"
    )
    roll.add_argument("--to", dest="end", help="end hour, exclusive (ISO 8601)")
    roll.add_argument(
        "--master",
        default="local[*]",
        help="Spark master: local[N] runs here; yarn, k8s://…, spark://… go to spark-submit",
    )
    roll.add_argument("--columns", default="identity", help=MAPPING_HELP)
    roll.add_argument("--tiers", default="hourly,daily", help="hourly, daily or both (default)")
    roll.add_argument("--tz", default="UTC", help="time zone of the daily tier's days")
    roll.add_argument(
        "--format",
        choices=["parquet", "json"],
        help="input format (default: the mapping's, else parquet); json is NDJSON",
    )
    roll.add_argument(
        "--received-at",
        help="receive time (ISO 8601) of rows without started_at, and the bound of the "
        "future a started_at may lie in (default: now)",
    )
    roll.add_argument(
        "--conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting (spark.hadoop.fs.s3a.endpoint=…, spark.executor.memory=…)",
    )
    roll.set_defaults(func=cmd_rollup)

    spec = sub.add_parser(
        "spec",
        help="Write the spec file app/lake/job.py runs by, for spark-submit by hand.",
        description="Write the spec file app/lake/job.py runs by, for spark-submit by hand.",
    )
    spec.add_argument("--columns", default="identity", help=MAPPING_HELP)
    spec.add_argument("--out", default="spec.json", help="where to write it (default spec.json)")
    spec.set_defaults(func=cmd_spec)
    # `lake import` (the Parquet tiers into DuckDB) and `lake push` (one node's rollups to a
    # central one, through POST /v1/rollups).
    lake_sync.add_import_parser(sub)
    lake_sync.add_push_parser(sub)


def _conf(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--conf {pair!r}: give KEY=VALUE")
        out[key.strip()] = value
    return out


def _received(text: str | None) -> datetime:
    if not text:
        return datetime.now(UTC)
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--received-at {text!r} is not an ISO 8601 time") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _spec(columns: str) -> dict:
    from app.lake import mapping, spec

    return spec.build(mapping.load(columns))


def cmd_spec(args: argparse.Namespace) -> int:
    """Write the job's spec (constants, exact edges, tables, mapping) as JSON."""
    from app.lake import spec

    path = spec.write(_spec(args.columns), Path(args.out))
    print(f"lake spec: {path} (mapping {args.columns})")
    return 0


def cmd_rollup(args: argparse.Namespace) -> int:
    """Run the Spark job over the logs and print what it read and wrote."""
    from app.lake import runner

    built = _spec(args.columns)  # the mapping checked before any JVM starts
    tiers = tuple(t.strip() for t in args.tiers.split(",") if t.strip())
    if not tiers or any(t not in ("hourly", "daily") for t in tiers):
        raise ValueError(f"--tiers takes hourly and/or daily, not {args.tiers!r}")
    conf = _conf(args.conf)
    try:
        runner.check_runtime()
    except runner.LakeUnavailable as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    options = {
        "inputs": list(args.input),
        "output": args.output,
        "fmt": args.format or built["mapping"].get("format", "parquet"),
        "start": args.start,
        "end": args.end,
        "tiers": tiers,
        "tz": args.tz,
        "received_at": _received(args.received_at),
    }
    if runner.is_local(args.master):
        summary = runner.run_local(built, args.master, conf, **options)
    else:
        try:
            summary = runner.run_submit(built, args.master, conf, **options)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    rows = summary["rows"]
    invalid = ", ".join(f"{k}: {v:,}" for k, v in rows["invalid"].items()) or "none"
    print(
        f"lake rollup: {rows['read']:,} rows read, {rows['used']:,} used "
        f"({rows['duplicates']:,} duplicates, {rows['outside_window']:,} outside the window, "
        f"{rows['skipped_by_where']:,} skipped by the mapping's where); invalid: {invalid}"
    )
    covered = summary.get("covered")
    print(
        "  hours covered: "
        + (f"{covered['from']} to {covered['to']}" if covered else "none (no rows)")
    )
    print("  rows written: " + json.dumps(summary["tables"]) + f" under {args.output}")
    ran = summary.get("spark") or {}
    print(f"  Spark {ran.get('version')} on {ran.get('master')}, {ran.get('executors')} executors")
    return 0
