"""The `tokenshape` command: serve, migrate, token, demo, import, prune and more."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from app.config import Settings
from app.storage.database import Database, DatabaseLocked


class Progress:
    """A one-line progress bar on stderr when it is a terminal; silent otherwise."""

    def __init__(self, label: str, total: int | None):
        self.label, self.total, self.done = label, total, 0
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()

    def advance(self, n: int) -> None:
        """Count n more units and redraw."""
        self.done += n
        if not self.tty:
            return
        rate = self.done / max(time.monotonic() - self.started, 1e-6)
        if self.total:
            share = min(self.done / self.total, 1.0)
            bar = "#" * int(share * 30)
            text = f"\r{self.label} [{bar:<30}] {share:6.1%} {self.done:,} ({rate:,.0f}/s)"
        else:
            text = f"\r{self.label} {self.done:,} ({rate:,.0f}/s)"
        sys.stderr.write(text)
        sys.stderr.flush()

    def close(self) -> None:
        """End the bar's line."""
        if self.tty:
            sys.stderr.write("\n")


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {k: v for k in ("db", "host", "port", "tz") if (v := getattr(args, k, None))}
    return Settings(**overrides)


def _open(settings: Settings) -> Database:
    return Database(settings.db).open()


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server (ingest, API, dashboard) until interrupted."""
    import uvicorn

    from app.main import create_app
    from app.server import logs
    from app.server.http_guard import guarded_protocol
    from app.server.tuning import tune_server_process

    settings = _settings(args)
    db = _open(settings)  # fail fast, with a clear line, if another process holds the file
    logs.configure(settings)
    print(f"tokenshape serving {settings.db} on http://{settings.host}:{settings.port}", flush=True)
    app = create_app(settings, db=db)
    tune_server_process()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=10,
        # httptools with a deadline and a size bound on headers (uvicorn has neither).
        http=guarded_protocol(settings.header_timeout_s),
        **logs.uvicorn_options(settings),
    )
    return 0


def cmd_migrate(args: argparse.Namespace) -> int:
    """Bring the database file to the newest schema."""
    settings = _settings(args)
    with _open(settings) as db:
        print(f"{settings.db} is at revision {db.revision}")
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    """Create, list, rotate or revoke API tokens."""
    from app.storage import tokens

    settings = _settings(args)
    with _open(settings) as db:
        cur = db.cursor()
        if args.action == "create":
            token, info = tokens.create(cur, args.gateway, args.scope)
            print(
                f"created token {info.id} for gateway '{info.gateway}' with scope "
                f"'{info.scope}'. It is shown only once; store it now:"
            )
            print(token)
        elif args.action == "list":
            rows = tokens.list_tokens(cur)
            if not rows:
                print("no tokens yet: tokenshape token create --gateway NAME --scope ingest")
            for t in rows:
                state = f"revoked {t.revoked_at:%Y-%m-%d}" if t.revoked_at else "active"
                used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
                print(
                    f"{t.id}  {t.display:<16} {t.gateway:<24} {t.scope:<7} "
                    f"created {t.created_at:%Y-%m-%d %H:%M}  used {used:<16}  {state}"
                )
        else:  # rotate or revoke a live token
            done = (tokens.rotate if args.action == "rotate" else tokens.revoke)(cur, args.id)
            if not done:
                print(
                    f"error: no active token with id {args.id!r} (see `tokenshape token list`)",
                    file=sys.stderr,
                )
                return 1
            if args.action == "revoke":
                print(f"revoked token {args.id}")
                return 0
            token, info = done
            print(
                f"rotated: token {args.id} is revoked; the new token {info.id} for gateway "
                f"'{info.gateway}' ({info.scope}) is shown only once; store it now:"
            )
            print(token)
    return 0


def _password(args: argparse.Namespace) -> str:
    """The new password: one line of stdin with --password-stdin, else asked twice."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    import getpass

    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        raise ValueError("the two passwords differ; nothing was changed")
    return first


def cmd_user(args: argparse.Namespace) -> int:
    """Add, list, change or remove dashboard users."""
    from app.storage import users

    settings = _settings(args)
    with _open(settings) as db:
        cur = db.cursor()
        if args.action == "list":
            rows = users.list_users(cur)
            if not rows:
                print("no users yet: tokenshape user add NAME --role admin")
            for u in rows:
                seen = f"{u.last_login_at:%Y-%m-%d %H:%M}" if u.last_login_at else "never"
                made = f"{u.created_at:%Y-%m-%d}"
                print(f"{u.name:<24} {u.role:<7} created {made}  last login {seen}")
            return 0
        if args.action == "add":
            user = users.add(cur, args.name, _password(args), args.role)
            print(f"added {user.name} as {user.role}")
            return 0
        if args.action == "passwd":
            done = users.set_password(cur, args.name, _password(args))
            what = "password changed; their sessions ended"
        elif args.action == "role":
            done = users.set_role(cur, args.name, args.role)
            what = f"now {args.role}; their sessions ended"
        else:
            done = users.remove(cur, args.name)
            what = "removed"
        if not done:
            print(
                f"error: no user named {args.name!r} (see `tokenshape user list`)", file=sys.stderr
            )
            return 1
        print(f"{args.name}: {what}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    """Seed deterministic synthetic traffic, optionally then serve it."""
    from app.services import demo

    settings = _settings(args)
    with _open(settings) as db:
        progress = Progress("demo", args.requests)
        started = time.monotonic()
        stats = demo.seed(
            db,
            requests=args.requests,
            days=args.days,
            seed=args.seed,
            tz=settings.tz,
            progress=progress.advance,
        )
        progress.close()
        print(
            f"demo: {stats.accepted:,} requests stored ({stats.duplicates:,} already there) "
            f"over {args.days} days in {settings.db} in {time.monotonic() - started:.1f} s"
        )
    if args.serve:
        return cmd_serve(args)
    return 0


def cmd_prune(args: argparse.Namespace) -> int:
    """Delete (or count, with --dry-run) requests and rejects past their retention."""
    from app.storage import retention

    settings = _settings(args)
    days = {"requests": settings.retention_days, "rejects": settings.reject_retention_days}
    names = {"requests": "TOKENSHAPE_RETENTION_DAYS", "rejects": "TOKENSHAPE_REJECT_RETENTION_DAYS"}
    if not any(days.values()):
        print(f"retention is off ({' and '.join(f'{n}=0' for n in names.values())}): nothing to do")
        return 0
    with _open(settings) as db:
        before = _file_bytes(settings.db)
        result = retention.prune(
            db.connection,
            datetime.now(UTC),
            request_days=days["requests"],
            reject_days=days["rejects"],
            dry_run=args.dry_run,
        )
    verb = "would delete" if args.dry_run else "deleted"
    for table in ("requests", "rejects"):
        if table not in result.cutoffs:
            print(f"{table}: kept forever ({names[table]}=0)")
            continue
        print(
            f"{table}: {verb} {result.deleted[table]:,} received before "
            f"{result.cutoffs[table]:%Y-%m-%d %H:%M} UTC ({names[table]}={days[table]})"
        )
    if not args.dry_run:
        after = _file_bytes(settings.db)
        print(
            f"{settings.db}: {before / 1e6:,.1f} MB before, {after / 1e6:,.1f} MB after "
            "(freed space is reused by new rows; the file rarely shrinks)"
        )
    return 0


def _file_bytes(path: Path) -> int:
    wal = path.with_name(path.name + ".wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


def cmd_backup(args: argparse.Namespace) -> int:
    """Write a consistent copy of the database: through a running server, or from the file."""
    from app.storage.backup import backup_name, backup_to

    if args.url:
        return _backup_online(args.url, args.token)
    settings = _settings(args)
    try:
        db = _open(settings)
    except DatabaseLocked as exc:
        print(
            f"error: {exc}\nA running server backs itself up: tokenshape backup --url "
            "http://HOST:PORT --token ADMIN_TOKEN",
            file=sys.stderr,
        )
        return 2
    with db:
        con = db.new_cursor()
        try:
            result = backup_to(con, backup_name(settings.db, datetime.now(UTC)))
        finally:
            con.close()
    print(
        f"backup written: {result.path} ({result.bytes / 1e6:,.1f} MB, "
        f"{result.requests:,} requests, {result.seconds:.1f} s)"
    )
    return 0


def _backup_online(url: str, token: str | None) -> int:
    import httpx

    if not token:
        print("error: backup --url needs --token with an admin token", file=sys.stderr)
        return 2
    try:
        r = httpx.post(
            url.rstrip("/") + "/api/admin/backup",
            headers={"Authorization": f"Bearer {token}"},
            timeout=3600,
        )
    except httpx.HTTPError as exc:
        print(f"error: could not reach {url} ({exc}); is the server running?", file=sys.stderr)
        return 1
    if r.status_code != 200:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text[:200]
        print(f"error: the server answered {r.status_code}: {detail}", file=sys.stderr)
        return 1
    out = r.json()
    print(
        f"backup written by the server: {out['path']} ({out['bytes'] / 1e6:,.1f} MB, "
        f"{out['requests']:,} requests, {out['seconds']:.1f} s)"
    )
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Load a file of records into the database."""
    from ingest import importer
    from ingest.formats import files

    settings = _settings(args)
    path = Path(args.file)
    if not path.is_file():
        print(f"error: {path} is not a file", file=sys.stderr)
        return 1
    fmt = files.detect(path) if args.format == "auto" else args.format
    gateway = args.gateway or files.default_gateway(path, fmt)
    with _open(settings) as db:
        progress = Progress(f"import {path.name}", None)
        started = time.monotonic()
        stats = importer.import_file(
            db,
            path,
            fmt,
            gateway=gateway,
            model=args.model,
            raw_chars=settings.reject_raw_chars,
            progress=progress.advance,
            tokenizer=Path(args.tokenizer) if args.tokenizer else None,
        )
        progress.close()
    print(
        f"import: {stats.accepted:,} stored, {stats.duplicates:,} duplicates, "
        f"{stats.rejected:,} rejected (see the rejects table) from {path} as {fmt}, "
        f"gateway '{gateway}', in {time.monotonic() - started:.1f} s"
    )
    if stats.first_errors:
        for line in stats.first_errors:
            print(f"  {line}")
    return 0


SPANS = {"h": 3600, "d": 86400, "w": 7 * 86400}


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
    from app.services.rightsizing import NoProfile

    settings = _settings(args)
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
    from app.services.rightsizing import recommend, recommendation_dict

    end = datetime.now(UTC)
    start = end - _since(args.since)
    r, code = _engine_report(
        args,
        lambda db, _settings: recommend(
            db,
            args.engine,
            start=start,
            end=end,
            coverage=args.coverage,
            granularity=args.granularity,
        ),
        recommendation_dict,
    )
    if r is None:
        return code
    if r.recommended:
        cur, rec = r.current, r.recommended
        print(f"  requests in the last {args.since}: {r.traffic.requests:,}")
        for name in ("max_input_len", "max_seq_len", "max_batch_size", "max_num_tokens"):
            now, after = getattr(cur, name), getattr(rec, name)
            print(f"  {name:<15} {_n(now):>10} -> {_n(after):>10}")
        print(
            f"  refused by the bounds: now {_n(r.rejected_current)}, "
            f"after {_n(r.rejected_recommended)}"
        )
        for framework, command in r.commands.items():
            print(f"  {framework}:")
            for line in command.splitlines():
                print(f"    {line}")
    for note in r.notes:
        print(f"  note: {note}")
    return 0


def cmd_seasonal(args: argparse.Namespace) -> int:
    """Print an engine's day/night plans (text, or JSON with --json)."""
    from app.services.rightsizing import seasonal, seasonal_dict
    from app.sizing.seasonal import window_label

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
        ),
        seasonal_dict,
    )
    if r is None:
        return code
    if r.result:
        print(f"  {r.requests:,} requests over {r.weeks} weeks, hours in {r.tz}")
        for plan in (r.result.static, r.result.hourly, r.result.split):
            if plan is None:
                continue
            windows = ", ".join(
                f"{window_label(c.hours)} max_seq_len {c.max_seq_len:,}" for c in plan.configs
            )
            cost = f", {plan.cost_week:,.0f} per week" if plan.cost_week is not None else ""
            print(
                f"  {plan.name:<9} {plan.gpu_hours_week:>8,.0f} GPU-hours/week{cost}  ({windows})"
            )
        if r.day_types:
            print(f"  weekdays/weekends: {r.day_types.verdict}")
        for block in r.commands:
            print(f"  {block['window']}:")
            print(f"    {block[next(k for k in block if k != 'window')]}")
    return 0


def cmd_ship(args: argparse.Namespace) -> int:
    """Ship an NDJSON log to a running server over HTTP."""
    from ingest.ship import ShipError, ship

    token = args.token or os.environ.get("TOKENSHAPE_SHIP_TOKEN", "")
    if not token:
        print("error: pass --token or set TOKENSHAPE_SHIP_TOKEN (an ingest token)", file=sys.stderr)
        return 2
    source = None if args.file == "-" else Path(args.file)
    if source is not None and not source.is_file():
        print(f"error: {source} is not a file", file=sys.stderr)
        return 1
    checkpoint = None
    if source is not None and not args.no_checkpoint:
        checkpoint = (
            Path(args.checkpoint)
            if args.checkpoint
            else source.with_name(source.name + ".tokenshape-ship")
        )
    if checkpoint is not None and not os.access(checkpoint.parent, os.W_OK):
        print(
            f"error: cannot write the checkpoint {checkpoint}: pass --checkpoint PATH in a "
            "writable directory, or --no-checkpoint",
            file=sys.stderr,
        )
        return 2
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
        )
    except ShipError as exc:
        progress.close()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # the file or the checkpoint
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


def cmd_report(args: argparse.Namespace) -> int:
    """Preview (write the .eml) or send the weekly email for a week."""
    from app.jobs.schedule import canonical_week, last_full_week
    from app.reports.build import report_for
    from app.reports.render import compose
    from app.reports.send import deliver_week, recipients_of

    settings = _settings(args)
    week = (
        canonical_week(args.week)
        if args.week
        else last_full_week(datetime.now(UTC), settings.report_tz)
    )
    to = [t for t in (args.to or "").split(",") if t.strip()]
    with _open(settings) as db:
        if args.action == "preview":
            report = report_for(db, settings, week)
            recipients = recipients_of(settings, to)[0] or ["(no recipients set)"]
            msg = compose(report, settings.smtp_from, recipients)
            out = Path(args.out or f"report-{week}.eml")
            out.write_bytes(msg.as_bytes())
            print(f"report {week}: {report.subject!r} written to {out} (not sent)")
            return 0
        outcome = deliver_week(db, settings, week, clock=lambda: datetime.now(UTC), to=to)
    print(f"report {week}: {outcome.status}: {outcome.detail}")
    return 0 if outcome.status in ("sent", "skipped") else 1


def _n(value: int | None) -> str:
    return "–" if value is None else f"{value:,}"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of every subcommand."""
    parser = argparse.ArgumentParser(
        prog="tokenshape",
        description="The real ISL x OSL shape of LLM serving traffic, and engines sized to it.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, func: Callable, help_: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help_, description=help_)
        p.add_argument("--db", type=Path, help="database file (default: TOKENSHAPE_DB)")
        p.set_defaults(func=func)
        return p

    def server_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--host", help="bind address (default: TOKENSHAPE_HOST or 127.0.0.1)")
        p.add_argument("--port", type=int, help="port (default: TOKENSHAPE_PORT or 8050)")

    server_opts(add("serve", cmd_serve, "Run the server: ingest, API and dashboard."))
    add("migrate", cmd_migrate, "Migrate the database file to the newest schema.")

    tok = add("token", cmd_token, "Create, list, rotate or revoke API tokens.")
    tsub = tok.add_subparsers(dest="action", required=True)
    create = tsub.add_parser("create", help="create a token (printed once, last line)")
    create.add_argument("--gateway", required=True, help="gateway name the token ships as")
    create.add_argument("--scope", required=True, choices=["ingest", "read", "admin"])
    tsub.add_parser("list", help="list tokens (never their secrets) with their last use")
    revoke = tsub.add_parser("revoke", help="revoke a token by id")
    revoke.add_argument("id", help="token id from `tokenshape token list`")
    rotate = tsub.add_parser("rotate", help="replace a token by a new one (old one revoked)")
    rotate.add_argument("id", help="token id from `tokenshape token list`")
    for p in (create, revoke, rotate, tsub.choices["list"]):
        p.add_argument("--db", type=Path, help="database file (default: TOKENSHAPE_DB)")

    usr = add("user", cmd_user, "Add, list, change or remove dashboard users.")
    usub = usr.add_subparsers(dest="action", required=True)
    uadd = usub.add_parser("add", help="add a user (password asked, or --password-stdin)")
    uadd.add_argument("name", help="user name for the login form")
    uadd.add_argument("--role", required=True, choices=["viewer", "admin"])
    upass = usub.add_parser("passwd", help="change a user's password")
    upass.add_argument("name")
    urole = usub.add_parser("role", help="change a user's role")
    urole.add_argument("name")
    urole.add_argument("role", choices=["viewer", "admin"])
    urem = usub.add_parser("remove", help="remove a user (their sessions end)")
    urem.add_argument("name")
    for p in (uadd, upass):
        p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    for p in (uadd, upass, urole, urem, usub.add_parser("list", help="list users")):
        p.add_argument("--db", type=Path, help="database file (default: TOKENSHAPE_DB)")

    demo = add("demo", cmd_demo, "Seed deterministic synthetic traffic.")
    demo.add_argument("--days", type=int, default=14, help="days of traffic (default 14)")
    demo.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    demo.add_argument(
        "--requests", type=int, default=300_000, help="number of requests (default 300,000)"
    )
    demo.add_argument("--tz", help="time zone of the daily rhythm (default: TOKENSHAPE_TZ)")
    demo.add_argument("--serve", action="store_true", help="serve the data afterwards")
    server_opts(demo)

    prune = add("prune", cmd_prune, "Delete requests and rejects past their retention now.")
    prune.add_argument("--dry-run", action="store_true", help="only count what would be deleted")

    bak = add("backup", cmd_backup, "Write a consistent copy of the database to backups/.")
    bak.add_argument("--url", help="a running server's address: it writes the copy itself")
    bak.add_argument("--token", help="an admin token (with --url)")

    imp = add("import", cmd_import, "Import a file of request records.")
    imp.add_argument("file", help="the file to import")
    imp.add_argument("--gateway", help="gateway name to store the records under")
    imp.add_argument(
        "--format",
        default="auto",
        choices=["auto", "ndjson", "csv", "parquet", "azure", "genai-perf", "aiperf"],
        help="file format (default: from the extension and header)",
    )
    imp.add_argument("--model", help="model name for formats that carry none (azure)")
    imp.add_argument(
        "--tokenizer",
        help="a Hugging Face tokenizer.json to count GenAI-Perf tokens (else they are estimated)",
    )

    rec = add("recommend", cmd_recommend, "Rightsize an engine from its recent traffic.")
    rec.add_argument("--engine", required=True, help="engine name (with a stored profile)")
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

    shp = sub.add_parser(
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

    rep = add("report", cmd_report, "Preview or send the weekly rightsizing email.")
    rsub = rep.add_subparsers(dest="action", required=True)
    send = rsub.add_parser("send", help="send a week's email (a week already sent is skipped)")
    preview = rsub.add_parser("preview", help="write a week's email to an .eml file, unsent")
    for p in (send, preview):
        p.add_argument("--db", type=Path, help="database file (default: TOKENSHAPE_DB)")
        p.add_argument("--week", help="ISO week, e.g. 2026-W47 (default: the last full week)")
        p.add_argument("--to", help="comma-separated recipients (default: TOKENSHAPE_REPORT_TO)")
    preview.add_argument("--out", help="the .eml file to write (default: report-WEEK.eml)")

    sea = add("seasonal", cmd_seasonal, "Day/night engine plans for an engine.")
    sea.add_argument("--engine", required=True, help="engine name (with a stored profile)")
    sea.add_argument(
        "--weeks",
        type=int,
        choices=range(1, 13),
        default=4,
        metavar="1..12",
        help="whole weeks up to now (default 4)",
    )
    sea.add_argument(
        "--headroom", type=_headroom, default=0.2, help="spare capacity per hour (default 0.2)"
    )
    sea.add_argument(
        "--weekends", action="store_true", help="also plan weekdays and weekends separately"
    )
    sea.add_argument("--json", action="store_true", help="print the plans as JSON")
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    """Entry point of the console script."""
    parser = build_parser()
    args = parser.parse_args(list(argv) if argv is not None else None)
    try:
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


if __name__ == "__main__":
    sys.exit(main())
