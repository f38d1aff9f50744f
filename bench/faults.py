"""Faults benchmark: concurrent `tokenshape ship` clients while the server is kill -9ed.

Ten shippers (the real CLI client, one process each) send NDJSON files with deterministic
request ids to a `tokenshape serve` subprocess, which is killed with SIGKILL twice mid-stream
and restarted on the same database. Afterwards the stored rows are compared with the sent set:
nothing lost, nothing doubled. The last line is `faults_lost=<n> faults_doubled=<n>`.

`tests/integration/test_faults.py` runs the same scenario with fewer records.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import duckdb
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._server import (  # noqa: E402
    clean_env,
    create_token,
    free_port,
    start_server,
    stop_server,
    tokenshape,
)

GATEWAYS = ("edge-a", "edge-b")
SHIP_LINE = re.compile(
    r"ship: ([\d,]+) accepted, ([\d,]+) duplicates, ([\d,]+) rejected .*\((\d+) retries\)"
)


@dataclass
class FaultRun:
    """What was sent, what the database holds afterwards, and what the shippers saw."""

    sent: int = 0
    stored: int = 0
    distinct: int = 0
    lost: int = 0  # sent but not stored
    extra: int = 0  # stored but never sent
    kills: int = 0
    seconds: float = 0.0
    accepted: int = 0  # answered as new
    duplicates: int = 0  # re-sent after a crash and recognised
    retries: int = 0
    downtime: list[float] = field(default_factory=list)
    resent: int = 0  # records shipped again from the start after the kills
    resent_accepted: int = 0  # of those, stored again (must be 0)
    resent_duplicates: int = 0

    @property
    def doubled(self) -> int:
        """Rows stored more than once for the same (gateway, request_id)."""
        return self.stored - self.distinct


def write_logs(workdir: Path, shippers: int, per_shipper: int) -> list[Path]:
    """One NDJSON file per shipper with deterministic request ids.

    Shipper k sends as gateway GATEWAYS[k % 2] and ids `req-{k // 2}-{i}`: the two gateways
    share every id, so only (gateway, request_id) tells the records apart."""
    line = (
        '{"request_id":"req-%d-%d","started_at":"2026-11-20T%02d:%02d:%02d.%03dZ",'
        '"model":"llama-3.1-8b-instruct","engine":"chat-8b","tenant":"team-%d",'
        '"isl":%d,"osl":%d,"ttft_ms":%.1f,"e2e_ms":%.1f,"status":"ok"}\n'
    )
    paths = []
    for k in range(shippers):
        path = workdir / f"shipper-{k}.ndjson"
        with path.open("w") as fh:
            for i in range(per_shipper):
                s = i % 86_400
                fh.write(
                    line
                    % (
                        k // 2,
                        i,
                        s // 3600,
                        s // 60 % 60,
                        s % 60,
                        i % 1000,
                        i % 7,
                        50 + i * 37 % 4000,
                        1 + i * 13 % 900,
                        40.0 + i % 200,
                        900.0 + i % 5000,
                    )
                )
        paths.append(path)
    return paths


def _ship(path: Path, url: str, token: str, batch: int, out: IO[str], *extra: str):
    """One `tokenshape ship` process (the token in its environment, not on its command line)."""
    return subprocess.Popen(
        [*tokenshape(), "ship", str(path), "--url", url, "--batch", str(batch), *extra],
        cwd=ROOT,
        env=clean_env(TOKENSHAPE_SHIP_TOKEN=token),
        stdout=out,
        stderr=subprocess.STDOUT,
    )


def _shipped(k: int, proc: subprocess.Popen, out: IO[str]) -> tuple[int, int, int]:
    """(accepted, duplicates, retries) from a finished shipper's summary line."""
    out.seek(0)
    text = out.read()
    match = SHIP_LINE.search(text)
    if proc.returncode != 0 or match is None:
        raise RuntimeError(f"shipper {k} exited with {proc.returncode}: {text[-600:]}")
    accepted, duplicates, _, retries = (int(g.replace(",", "")) for g in match.groups())
    return accepted, duplicates, retries


def _progress(paths: list[Path]) -> float:
    """Share of all bytes the server has acknowledged, from the shippers' checkpoints."""
    total = done = 0
    for path in paths:
        total += path.stat().st_size
        try:
            done += json.loads(path.with_name(path.name + ".tokenshape-ship").read_text())["offset"]
        except (OSError, ValueError, KeyError):
            pass  # not written yet, or being replaced right now
    return done / total if total else 1.0


def _verify(db: Path, shippers: int, per_shipper: int, run: FaultRun) -> None:
    """Compare the stored keys with the sent ones."""
    keys = [
        (GATEWAYS[k % 2], f"req-{k // 2}-{i}") for k in range(shippers) for i in range(per_shipper)
    ]
    sent = pa.table({"gateway": [g for g, _ in keys], "request_id": [r for _, r in keys]})
    con = duckdb.connect(str(db), read_only=True)
    try:
        con.register("sent", sent)
        run.sent = sent.num_rows
        run.stored, run.distinct = con.execute(
            "SELECT count(*), count(DISTINCT (gateway, request_id)) FROM requests"
        ).fetchone()
        run.lost = con.execute(
            "SELECT count(*) FROM sent s ANTI JOIN requests r "
            "ON r.gateway = s.gateway AND r.request_id = s.request_id"
        ).fetchone()[0]
        run.extra = con.execute(
            "SELECT count(*) FROM requests r ANTI JOIN sent s "
            "ON r.gateway = s.gateway AND r.request_id = s.request_id"
        ).fetchone()[0]
    finally:
        con.close()


def run_kill_scenario(
    workdir: Path,
    *,
    shippers: int = 10,
    per_shipper: int = 100_000,
    batch: int = 1000,
    kill_at: tuple[float, ...] = (0.3, 0.65),
    report=lambda line: None,
) -> FaultRun:
    """Ship while the server is kill -9ed at each share of `kill_at`; verify the stored set."""
    db = workdir / "faults.duckdb"
    tokens = {gw: create_token(db, gw) for gw in GATEWAYS}
    paths = write_logs(workdir, shippers, per_shipper)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    run = FaultRun()
    with (workdir / "server.log").open("ab") as log:
        server = start_server(db, port, log)
        started = time.monotonic()
        outs = [(workdir / f"shipper-{k}.out").open("w+") for k in range(shippers)]
        procs = [
            _ship(path, url, tokens[GATEWAYS[k % 2]], batch, outs[k])
            for k, path in enumerate(paths)
        ]
        try:
            pending = list(kill_at)
            while any(p.poll() is None for p in procs):
                share = _progress(paths)
                if pending and share >= pending[0]:
                    pending.pop(0)
                    os.kill(server.pid, signal.SIGKILL)  # batches are in flight right now
                    server.wait()
                    run.kills += 1
                    down = time.monotonic()
                    server = start_server(db, port, log)
                    run.downtime.append(time.monotonic() - down)
                    report(
                        f"kill -9 #{run.kills} at {share:.0%} acknowledged; "
                        f"restarted in {run.downtime[-1]:.1f} s"
                    )
                time.sleep(0.02)
            run.seconds = time.monotonic() - started
            for k, (p, out) in enumerate(zip(procs, outs, strict=True)):
                accepted, duplicates, retries = _shipped(k, p, out)
                run.accepted += accepted
                run.duplicates += duplicates
                run.retries += retries
            # Every key the restarted server knows came through crashes and recoveries: two
            # files shipped again from the start must be recognised record by record.
            for k in range(min(2, shippers)):
                with (workdir / f"resend-{k}.out").open("w+") as out:
                    p = _ship(paths[k], url, tokens[GATEWAYS[k % 2]], batch, out, "--no-checkpoint")
                    p.wait()
                    accepted, duplicates, _ = _shipped(k, p, out)
                run.resent += per_shipper
                run.resent_accepted += accepted
                run.resent_duplicates += duplicates
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                p.wait()
            for out in outs:
                out.close()
            stop_server(server)
    _verify(db, shippers, per_shipper, run)
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--shippers", type=int, default=10)
    parser.add_argument("--records", type=int, default=100_000, help="records per shipper")
    parser.add_argument("--batch", type=int, default=1000, help="records per request")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tokenshape-faults-") as tmp:
        print(
            f"{args.shippers} shippers x {args.records:,} records, batches of {args.batch:,}, "
            "server kill -9ed twice",
            flush=True,
        )
        run = run_kill_scenario(
            Path(tmp),
            shippers=args.shippers,
            per_shipper=args.records,
            batch=args.batch,
            report=lambda line: print(line, flush=True),
        )
    print(
        f"shipped {run.sent:,} records in {run.seconds:.1f} s ({run.sent / run.seconds:,.0f}/s "
        f"with {run.kills} kills); shippers saw {run.accepted:,} accepted, "
        f"{run.duplicates:,} duplicates (re-sent after a crash), {run.retries} retries"
    )
    print(
        f"shipped {run.resent:,} of them again from the start: {run.resent_accepted:,} stored "
        f"again, {run.resent_duplicates:,} recognised as duplicates"
    )
    print(
        f"stored {run.stored:,} rows, {run.distinct:,} distinct (gateway, request_id); "
        f"{run.extra} never sent"
    )
    print(f"faults_lost={run.lost} faults_doubled={run.doubled}")
    if run.lost or run.doubled or run.extra or run.resent_accepted:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
