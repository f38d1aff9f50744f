"""`tokenshape export`: a window of production traffic as a trace a benchmark replays (Mooncake,
AIPerf) or as canonical records (Parquet, CSV), from the file or from a running server."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from app.cli.common import command, iso_time, settings_for
from app.storage.database import Database

if TYPE_CHECKING:
    from collections.abc import Iterator

    from app.cli.common import Subparsers

FORMATS = ("mooncake", "vllm", "aiperf", "parquet", "csv")  # app.services.export.FORMATS
HASH_BLOCK = 512  # app.services.export.DEFAULT_HASH_BLOCK (kept lazy: the CLI starts fast)
SUMMARY_HEADER = "X-Tokenshape-Export"  # the summary as JSON (app/api/export.py)


def add_parser(subparsers: Subparsers) -> None:
    """Add `export`."""
    p = command(
        subparsers,
        "export",
        cmd_export,
        "Write a window of traffic as a replayable benchmark trace (Mooncake, AIPerf) or as "
        "records (Parquet, CSV); the summary on stderr says how close it is to the source.",
    )
    p.add_argument("--format", choices=FORMATS, default="mooncake", help="default: mooncake")
    p.add_argument("--start", type=iso_time, help="window start, ISO 8601 (default: a day ago)")
    p.add_argument("--end", type=iso_time, help="window end, exclusive (default: now)")
    for name in ("model", "engine", "gateway", "tenant"):
        p.add_argument(f"--{name}", action="append", help=f"only this {name} (repeat for several)")
    p.add_argument(
        "--status",
        action="append",
        choices=("ok", "error", "cancelled"),
        help="only requests of this status (repeat; default: all, as production saw them)",
    )
    p.add_argument(
        "--max-requests",
        type=int,
        help="at most N requests: a stratified sample keeping the ISL × OSL mix and the "
        "arrival pattern",
    )
    p.add_argument(
        "--speedup",
        type=float,
        default=1.0,
        help="compress time by F (24: a day replayed in an hour, same arrival pattern)",
    )
    p.add_argument(
        "--peak",
        type=float,
        help="the window's busiest hour with its rate scaled by N (2: next year's peak at "
        "double the traffic); the window defaults to the last 7 days",
    )
    p.add_argument(
        "--scale",
        type=float,
        default=1.0,
        help="scale the request rate by N (e.g. 1/sample rate to replay a sampled store's "
        "full rate)",
    )
    p.add_argument("--seed", type=int, default=0, help="sampling and prompt seed (default 0)")
    p.add_argument(
        "--hash-block",
        type=int,
        default=HASH_BLOCK,
        help="with --format vllm: prompt tokens per hash id (default 512, vLLM's "
        "--timed-trace-chunk-hash-size; 128 for SGLang's mooncake loader)",
    )
    p.add_argument(
        "--tokenizer",
        type=Path,
        help="with --format aiperf: a tokenizer.json to make each prompt's length exact",
    )
    p.add_argument("--out", type=Path, help="the file to write (default: standard output)")
    p.add_argument("--url", help="a running server's address (reads through GET /api/export)")
    p.add_argument("--token", help="a read token of that server (with --url)")


def _params(args: argparse.Namespace) -> list[tuple[str, str | int | float | bool | None]]:
    params: list[tuple[str, str | int | float | bool | None]] = [("format", args.format)]
    for key in ("start", "end"):
        if (value := getattr(args, key)) is not None:
            params.append((key, value.isoformat()))
    for key in ("model", "engine", "gateway", "tenant", "status"):
        params += [(key, v) for v in getattr(args, key) or ()]
    for key in ("max_requests", "speedup", "peak", "scale", "seed", "hash_block"):
        if (value := getattr(args, key)) is not None:
            params.append((key, str(value)))
    return params


@contextmanager
def _target(out: Path | None) -> Iterator[BinaryIO]:
    """Standard output, or a file written beside `out` and renamed when complete (a failed
    export leaves no half file under the asked name)."""
    if out is None:
        yield sys.stdout.buffer
        sys.stdout.flush()
        return
    part = out.with_name(out.name + ".partial")
    try:
        with part.open("wb") as fh:
            yield fh
        os.replace(part, out)
    finally:
        part.unlink(missing_ok=True)


def _write(chunks: Iterable[bytes], out: Path | None) -> int:
    size = 0
    with _target(out) as fh:
        for chunk in chunks:
            fh.write(chunk)
            size += len(chunk)
    return size


def _say(lines: Iterable[str], out: Path | None, size: int) -> None:
    where = f"{out} ({size / 1e6:,.1f} MB)" if out else "standard output"
    print(f"export written to {where}", file=sys.stderr)
    for line in lines:
        print(f"  {line}", file=sys.stderr)


def cmd_export(args: argparse.Namespace) -> int:
    """Write the export and print its summary on stderr."""
    if args.tokenizer and args.format != "aiperf":
        raise ValueError("--tokenizer only applies to --format aiperf")
    if args.hash_block != HASH_BLOCK and args.format != "vllm":
        raise ValueError("--hash-block only applies to --format vllm")
    if args.url:
        if args.tokenizer:
            raise ValueError("--tokenizer works on the file only; drop --url (or --tokenizer)")
        return _export_online(args)
    from app.analytics.filters import Filter
    from app.services import export

    settings = settings_for(args)
    flt = Filter(
        start=args.start,
        end=args.end,
        models=tuple(args.model or ()),
        engines=tuple(args.engine or ()),
        gateways=tuple(args.gateway or ()),
        tenants=tuple(args.tenant or ()),
        statuses=tuple(args.status or ()),
    )
    ask = export.ExportAsk(
        flt=flt,
        fmt=args.format,
        max_requests=args.max_requests,
        speedup=args.speedup,
        peak=args.peak,
        scale=args.scale,
        seed=args.seed,
        hash_block=args.hash_block,
    )
    tokenizer = export.load_tokenizer(args.tokenizer) if args.tokenizer else None
    extra: list[str] = []
    with Database(settings.db, read_only=True).open() as db:
        cur = db.cursor()
        the_plan = export.plan(cur, ask, datetime.now(UTC), tz=settings.tz)
        size = _write(
            export.chunks(cur, the_plan, tokenizer=tokenizer, report=extra.append), args.out
        )
    _say([*the_plan.summary.lines(), *extra], args.out, size)
    return 0


def _export_online(args: argparse.Namespace) -> int:
    """Stream GET /api/export of a running server into the file."""
    import httpx

    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    url = args.url.rstrip("/") + "/api/export"
    try:
        with httpx.stream(
            "GET", url, params=_params(args), headers=headers, timeout=httpx.Timeout(60, read=3600)
        ) as r:
            if r.status_code != 200:
                r.read()
                try:
                    detail = r.json().get("detail", r.text)
                except ValueError:
                    detail = r.text[:300]
                print(f"error: the server answered {r.status_code}: {detail}", file=sys.stderr)
                return 1
            summary = json.loads(r.headers.get(SUMMARY_HEADER, "{}"))
            size = _write(r.iter_bytes(), args.out)
    except httpx.HTTPError as exc:
        print(f"error: could not reach {args.url} ({exc}); is the server running?", file=sys.stderr)
        return 1
    _say(summary.get("lines", []), args.out, size)
    return 0
