"""`tokenshape engine list|show|set|unset|delete|history|restore`: engine profiles from the command
line, their recorded changes, and a deleted profile brought back."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from app.cli.common import command, open_db, settings_for
from app.storage.database import Database

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def add_parser(subparsers: Subparsers) -> None:
    """Add `engine` and its actions."""
    eng = subparsers.add_parser(
        "engine",
        help="List, show and edit engine profiles (SLOs, cost, replicas, bounds).",
        description="List, show and edit engine profiles (SLOs, cost, replicas, bounds). "
        "Fields are those of PUT /api/engines/{name}; see docs/reference/api.md.",
    )
    actions = eng.add_subparsers(dest="action", required=True)
    command(actions, "list", cmd_list, "list engines with a stored profile")
    show = command(actions, "show", cmd_show, "print an engine's profile as JSON")
    show.add_argument("name", help="engine name")
    put = command(
        actions,
        "set",
        cmd_set,
        "set fields of an engine's profile (created when new): field=value ...",
    )
    put.add_argument("name", help="engine name")
    put.add_argument(
        "fields",
        nargs="*",
        metavar="field=value",
        help="e.g. slo_ttft_ms=500 slo_itl_ms=50 slo_percentile=95 cost_per_gpu_hour=4.5 "
        "replicas=3 (values are JSON where they parse as JSON, else text)",
    )
    put.add_argument("--file", help="a JSON file with the whole profile (fields add to it)")
    unset = command(actions, "unset", cmd_unset, "remove fields from an engine's profile")
    unset.add_argument("name", help="engine name")
    unset.add_argument("fields", nargs="+", metavar="field", help="e.g. slo_e2e_ms")
    delete = command(
        actions,
        "delete",
        cmd_delete,
        "delete an engine's profile (its traffic stays; `engine restore` brings it back)",
    )
    delete.add_argument("name", help="engine name")
    hist = command(actions, "history", cmd_history, "list an engine profile's recorded changes")
    hist.add_argument("name", help="engine name")
    hist.add_argument("--json", action="store_true", help="print the versions as JSON")
    restore = command(
        actions,
        "restore",
        cmd_restore,
        "restore an engine profile that was deleted (refused when it has a newer one)",
    )
    restore.add_argument("name", help="engine name")


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_fields(items: list[str]) -> dict[str, Any]:
    """'a=1 b=x' as {'a': 1, 'b': 'x'}; ValueError names an item without '='."""
    out: dict[str, Any] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ValueError(f"{item!r}: write field=value, e.g. slo_ttft_ms=500")
        out[name.strip()] = _value(value)
    return out


def cmd_list(args: argparse.Namespace) -> int:
    """Print each engine with its model, GPUs, SLO and replicas."""
    from app.services.profiles import stored_build, stored_profiles

    with Database(settings_for(args).db, read_only=True).open() as db:
        for name, p in sorted(stored_profiles(db).items()):
            slo = ", ".join(
                f"{k.removeprefix('slo_')}={p[k]}"
                for k in ("slo_ttft_ms", "slo_itl_ms", "slo_e2e_ms", "slo_percentile")
                if p.get(k) is not None
            )
            gpus = stored_build(p)[1].replace("×", "x")
            print(
                f"{name}\t{p.get('hf_model') or p.get('model')}\t{gpus}\t"
                f"replicas={p.get('replicas', '-')}\t{slo or 'no SLO'}"
            )
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    """Print an engine's stored profile."""
    from app.services.profiles import stored_profile

    with Database(settings_for(args).db, read_only=True).open() as db:
        p = stored_profile(db, args.name)
    if p is None:
        print(f"error: engine {args.name!r} has no profile", file=sys.stderr)
        return 1
    print(json.dumps(p, indent=2, sort_keys=True))
    return 0


def _save(args: argparse.Namespace, change: dict[str, Any], drop: tuple[str, ...] = ()) -> int:
    from app.services.profiles import save_profile, stored_profile

    with open_db(settings_for(args)) as db:
        data = {**(stored_profile(db, args.name) or {}), **change}
        data = {k: v for k, v in data.items() if k not in drop}
        try:
            profile = save_profile(db, args.name, data, None, datetime.now(UTC))
        except ValueError as exc:
            print(f"error: {_words(str(exc), args.name)}", file=sys.stderr)
            return 2
    print(json.dumps(profile.model_dump(mode="json", exclude_none=True), indent=2, sort_keys=True))
    return 0


def _words(problem: str, engine: str) -> str:
    """Pydantic's words for the two mistakes a command line makes, in the command's terms."""
    field, _, message = problem.partition(": ")
    if message.startswith("Extra inputs are not permitted"):
        return (
            f"{field} is not a profile field: `tokenshape engine show {engine}` lists an "
            "engine's fields, the HTTP API reference (PUT /api/engines/{name}) all of them"
        )
    if message.startswith("Field required"):
        return f"{field} is required: a new engine needs at least model=… and gpu=…"
    return problem


def cmd_set(args: argparse.Namespace) -> int:
    """Merge field=value pairs (and --file) into an engine's profile and save it."""
    try:
        change: dict[str, Any] = {}
        if args.file:
            with open(args.file, encoding="utf-8") as fh:
                change = json.load(fh)
            if not isinstance(change, dict):
                raise ValueError(f"{args.file}: a profile is a JSON object")
        change.update(parse_fields(args.fields))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if not change:
        print("error: give field=value pairs or --file", file=sys.stderr)
        return 2
    return _save(args, change)


def cmd_unset(args: argparse.Namespace) -> int:
    """Remove fields from an engine's profile."""
    return _save(args, {}, tuple(args.fields))


def cmd_history(args: argparse.Namespace) -> int:
    """Print an engine profile's changes, newest first: time, author, what changed."""
    from app.services.profiles import history

    with Database(settings_for(args).db, read_only=True).open() as db:
        versions = history(db, args.name, 1000)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "seq": v.seq,
                        "at": v.at.astimezone(UTC).isoformat(),
                        "author": v.author,
                        "action": v.action,
                        "summary": v.summary,
                        "before": v.before,
                        "after": v.after,
                    }
                    for v in versions
                ],
                indent=2,
                sort_keys=True,
            )
        )
        return 0
    if not versions:
        print(f"engine {args.name!r} has no recorded profile changes", file=sys.stderr)
        return 0
    for v in versions:
        print(f"{v.at.astimezone(UTC):%Y-%m-%d %H:%M:%S}Z\t{v.author}\t{v.action}\t{v.summary}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    """Delete an engine's profile, keeping it in the history."""
    from app.services.profiles import delete_profile

    with open_db(settings_for(args)) as db:
        if not delete_profile(db, args.name, datetime.now(UTC)):
            print(f"error: engine {args.name!r} has no profile to delete", file=sys.stderr)
            return 1
    print(f"{args.name}: profile deleted; `tokenshape engine restore {args.name}` brings it back")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """Restore the profile an engine's last change deleted."""
    from app.services.profiles import NoDeletedProfile, RestoreConflict, restore_profile

    with open_db(settings_for(args)) as db:
        try:
            version = restore_profile(db, args.name, datetime.now(UTC))
        except (RestoreConflict, NoDeletedProfile) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(f"{args.name}: {version.summary}")
    return 0
