"""Retention benchmark: does the database file stay flat under steady traffic?

Simulates `--days` days of `--per-day` requests (demo traffic, 0.5% rejects) written through
the server's real writer (journal, mover, group commit), the clock advanced a day at a time and
the daily retention job's prune (TOKENSHAPE_RETENTION_DAYS=`--retention`) run in a worker
thread at the start of each day, while that day's traffic is being written.
The reference, measured in the same run, is the same traffic without pruning. Prints the file
size per day for both, and as the last line `retention_ratio=<final size / size at the end of
the first retention window>` (flat is ~1.0; unpruned growth would be days / retention).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.jobs.retention import RetentionJob  # noqa: E402
from app.services.demo import generate  # noqa: E402
from app.storage.batches import Batch, Reject  # noqa: E402
from app.storage.database import Database  # noqa: E402
from app.storage.write.writer import Writer  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CHUNK = 50_000


@dataclass
class Day:
    """The state after one simulated day (and its prune)."""

    rows: int
    file_bytes: int
    deleted: int
    prune_s: float


def file_bytes(path: Path) -> int:
    """The database file plus its WAL."""
    wal = path.with_name(path.name + ".wal")
    return sum(p.stat().st_size for p in (path, wal) if p.exists())


async def simulate(path: Path, days: int, per_day: int, retention: int | None) -> list[Day]:
    """Write `days` of traffic through the writer; each day's prune (none when retention is
    None, only the checkpoint) runs in a worker thread while that day's traffic comes in, as
    the server's daily job does."""
    db = Database(path).open()
    writer = Writer(db)
    await writer.start()
    now = [T0]
    job = RetentionJob(
        db, request_days=retention or 0, reject_days=retention or 0, clock=lambda: now[0]
    )

    def prune() -> tuple[int, float]:
        started = time.perf_counter()
        if retention:
            deleted = job.prune_now().deleted.get("requests", 0)
        else:  # the reference gets the same checkpoint, so sizes compare like for like
            con = db.new_cursor()
            con.execute("CHECKPOINT")
            con.close()
            deleted = 0
        return deleted, time.perf_counter() - started

    out: list[Day] = []
    try:
        for d in range(days):
            now[0] = T0 + timedelta(days=d)  # the day starts: its prune runs while rows arrive
            pruning = asyncio.ensure_future(asyncio.to_thread(prune))
            end = T0 + timedelta(days=d + 1)
            for start in range(0, per_day, CHUNK):
                n = min(CHUNK, per_day - start)
                rows = generate(n, days=1, seed=7, end=end, offset=d * per_day + start)
                rejects = [
                    Reject(i, "isl", "isl: must be >= 0", '{"isl": -1}') for i in range(n // 200)
                ]
                await writer.submit(Batch("bench", "native", end, rows, rejects))
            deleted, prune_s = await pruning
            while writer.unmoved_rows or writer.pending_rows:
                await asyncio.sleep(0.01)
            # fetchall, not fetchone: a result left unread keeps its transaction open, and
            # DuckDB cannot reuse the blocks an open transaction might still read.
            rows = db.cursor().execute("SELECT count(*) FROM requests").fetchall()[0][0]
            out.append(Day(rows, file_bytes(path), deleted, prune_s))
    finally:
        await writer.stop()
        db.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30, help="simulated days (default 30)")
    parser.add_argument("--per-day", type=int, default=200_000, help="requests a day (200,000)")
    parser.add_argument("--retention", type=int, default=7, help="retention in days (default 7)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        pruned = asyncio.run(
            simulate(Path(tmp) / "pruned.duckdb", args.days, args.per_day, args.retention)
        )
        kept = asyncio.run(simulate(Path(tmp) / "kept.duckdb", args.days, args.per_day, None))
        elapsed = time.perf_counter() - started
    print(
        f"{args.days} days x {args.per_day:,} requests/day through the writer, "
        f"retention {args.retention} days (reference: no retention); {elapsed:.0f} s in all"
    )
    print(f"{'day':>4} {'rows':>11} {'file MB':>8} {'deleted':>9} {'prune s':>8} {'ref MB':>8}")
    for d, (p, k) in enumerate(zip(pruned, kept, strict=True), start=1):
        print(
            f"{d:>4} {p.rows:>11,} {p.file_bytes / 1e6:>8.1f} {p.deleted:>9,} "
            f"{p.prune_s:>8.2f} {k.file_bytes / 1e6:>8.1f}"
        )
    window = pruned[min(args.retention, args.days) - 1].file_bytes
    final, ref = pruned[-1].file_bytes, kept[-1].file_bytes
    print(
        f"final {final / 1e6:.1f} MB vs {window / 1e6:.1f} MB at day {args.retention} "
        f"(the first retention window); without retention {ref / 1e6:.1f} MB "
        f"({final / ref:.2f} of it)"
    )
    steady = [p.file_bytes / 1e6 for p in pruned[args.retention + 1 :]]
    if steady:
        print(
            f"days {args.retention + 2}-{args.days} (each holds {args.retention} days plus the "
            f"day being written): {min(steady):.1f}-{max(steady):.1f} MB"
        )
    print(f"retention_ratio={final / window:.2f}")


if __name__ == "__main__":
    main()
