"""Export benchmark: `tokenshape export` against DuckDB writing the same rows itself.

A window of stored requests leaves as a trace or as records (app/services/export.py). Measured
on a seeded demo database (`tokenshape demo --requests N --sample-rate 1`, 7 days) in this run:
(a) reference: DuckDB's own `COPY (SELECT the record's columns … ORDER BY started_at) TO …
    (FORMAT parquet, COMPRESSION zstd)` of the whole window, the floor for a Parquet export;
(b) `--format parquet` and `--format csv` of the same window, in process (plan + every chunk);
(c) `--format mooncake` of the window, `--max-requests 10000` of it (the stratified sample and
    its fidelity figures), and `--peak 3` (the busiest hour, three times over);
(d) `--format aiperf` with 10,000 synthetic prompts;
(e) memory: the `tokenshape export` process's peak RSS writing the whole window and a tenth
    of it (each a subprocess of its own): the export streams batches, so it must not grow with
    the window.
Last lines: `parquet_over_copy=<(b)/(a)>` (bar ≤ 3), `rss_whole_over_tenth=…` (bar ≤ 1.5).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.analytics.export import RECORD_COLUMNS  # noqa: E402
from app.analytics.filters import Filter  # noqa: E402
from app.services import export  # noqa: E402
from app.storage.database import Database  # noqa: E402


def _export(db: Database, ask: export.ExportAsk, now: datetime) -> tuple[float, int, str]:
    """Seconds, bytes and the summary's first line of one export, in process."""
    t = time.perf_counter()
    cur = db.cursor()
    the_plan = export.plan(cur, ask, now)
    size = sum(len(c) for c in export.chunks(cur, the_plan))
    return time.perf_counter() - t, size, the_plan.summary.lines()[0]


# Started from a small launcher: a child forked from this process would count this process's
# pages in its peak RSS until it execs.
LAUNCH = (
    "import os, subprocess, sys; p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, "
    "stderr=subprocess.DEVNULL); _, s, r = os.wait4(p.pid, 0); "
    "print(os.waitstatus_to_exitcode(s), r.ru_maxrss)"
)


def _rss_mb(args: list[str]) -> float:
    """Peak resident memory of a `tokenshape export` subprocess, in MB."""
    cmd = [sys.executable, "-c", LAUNCH, sys.executable, "-m", "app.cli", "export", *args]
    code, kb = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert code == "0", args
    return int(kb) / 1024


def main() -> int:
    """Seed the demo, run each export and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2_000_000, help="rows to seed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "export.duckdb"
        t = time.perf_counter()
        seed = ["demo", "--db", str(path), "--days", "7", "--sample-rate", "1"]
        seed += ["--requests", str(args.requests)]
        cmd = [sys.executable, "-m", "app.cli", *seed]
        subprocess.run(cmd, check=True, cwd=ROOT, stdout=subprocess.DEVNULL)
        print(f"seeded {args.requests:,} rows in {time.perf_counter() - t:.1f} s")
        with Database(path, read_only=True).open() as db:
            cur = db.cursor()
            span = "SELECT min(started_at), max(started_at) FROM requests"
            first, last = cur.execute(span).fetchone()
            start, end = first, last + timedelta(seconds=1)
            now = end
            n = cur.execute("SELECT count(*) FROM requests").fetchone()[0]
            target = Path(tmp) / "copy.parquet"
            t = time.perf_counter()
            cur.execute(
                f"COPY (SELECT {', '.join(RECORD_COLUMNS)} FROM requests "
                "WHERE started_at >= ? AND started_at < ? ORDER BY started_at, request_id) "
                f"TO '{target}' (FORMAT parquet, COMPRESSION zstd)",
                [start, end],
            )
            copy_s = time.perf_counter() - t
            print(f"(a) DuckDB COPY to Parquet: {n:,} rows in {copy_s:.2f} s")
            whole = Filter(start=start, end=end)
            runs = {
                "parquet": export.ExportAsk(whole, "parquet"),
                "csv": export.ExportAsk(whole, "csv"),
                "mooncake": export.ExportAsk(whole, "mooncake"),
                "mooncake 10k": export.ExportAsk(whole, "mooncake", max_requests=10_000),
                "peak 3": export.ExportAsk(whole, "mooncake", peak=3),
                "aiperf 10k": export.ExportAsk(whole, "aiperf", max_requests=10_000),
            }
            took = {}
            for name, ask in runs.items():
                s, size, head = _export(db, ask, now)
                took[name] = s
                print(f"{name:>12}: {s:6.2f} s, {size / 1e6:7.1f} MB  ({head})")
        tenth = start + (end - start) / 10
        whole_args = ["--db", str(path), "--start", start.isoformat(), "--end", end.isoformat()]
        tenth_args = ["--db", str(path), "--start", start.isoformat(), "--end", tenth.isoformat()]
        out = ["--format", "parquet", "--out", str(Path(tmp) / "x.parquet")]
        rss_whole, rss_tenth = _rss_mb(whole_args + out), _rss_mb(tenth_args + out)
        print(f"peak RSS of the CLI: whole window {rss_whole:.0f} MB, a tenth {rss_tenth:.0f} MB")
        print(f"rows_per_s_parquet={n / took['parquet']:,.0f}")
        print(f"rows_per_s_mooncake={n / took['mooncake']:,.0f}")
        print(f"parquet_over_copy={took['parquet'] / copy_s:.2f}")
        print(f"rss_whole_over_tenth={rss_whole / rss_tenth:.2f}")
        print(f"measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
