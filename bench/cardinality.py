"""Cardinality benchmark (issue 26, class 4): no cost grows faster than the data.

Two families, each against its own smallest size measured in the same run (these machines are
shared and noisy: ratios, not absolute times):

- distinct values: N models (and N tenants) with one request each added to a demo week, then
  the Overview page's layout, the per-model table, /api/shapes' and /api/quantiles' work and
  the filter bar's choices, at N = 1k, 4k, 16k;
- scattered stale hours: one late request in each of S hours, never two adjacent, of 700
  demo days whose rollups are built (each hour stale until the catch-up rebuilds it), then
  the heat map and quantiles over all of it, at S = 100, 1k, 8k.

For each: seconds (median of --runs), Python's peak allocation (tracemalloc) and the answer's
size. The bar: time and memory grow no faster than the size (ratio to the smallest <= the
size ratio, with 50% slack for noise) and every call <= 2 s at the largest size. Prints a
table and, last, `cardinality_ok=<0|1>`.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.analytics import overview, shapes  # noqa: E402
from app.analytics.filters import Filter  # noqa: E402
from app.dashboard.pages import overview as overview_page  # noqa: E402
from app.services import demo  # noqa: E402
from app.sizing.slo import Fleet  # noqa: E402
from app.storage import rollups  # noqa: E402
from app.storage.batches import Batch  # noqa: E402
from app.storage.database import Database  # noqa: E402
from app.storage.write.store import RequestStore  # noqa: E402
from ingest.records import RecordIn, to_rows  # noqa: E402

END = datetime(2026, 11, 23, tzinfo=UTC)
SLACK = 1.5
YEAR_DAYS = 700  # 8,000 stale hours with a clean hour between each need 16,000 hours
BAR_S = 2.0


def _add(db: Database, recs: list[RecordIn], gateway: str) -> None:
    rows, rejects = to_rows(recs, list(range(len(recs))), gateway=gateway, received_at=END)
    assert not rejects
    RequestStore(db.connection).write([Batch(gateway, "native", END, rows)])


def _measure(call: Callable[[], object], runs: int) -> tuple[float, float, int]:
    """(median seconds, peak MiB allocated by Python, size of the answer's repr in KiB)."""
    times = []
    answer: object = None
    for _ in range(runs):
        t0 = time.perf_counter()
        answer = call()
        times.append(time.perf_counter() - t0)
    tracemalloc.start()
    call()
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return statistics.median(times), peak, len(repr(answer)) // 1024


def _page_calls(db: Database) -> dict[str, Callable[[], object]]:
    cur = db.cursor()
    flt = Filter(start=END - timedelta(days=7), end=END)
    return {
        "Overview layout": lambda: overview_page.layout_for(
            db, {"window": "7d"}, END, "UTC", Fleet()
        ),
        "per-model table": lambda: overview.per_model(cur, flt, exact=False),
        "shapes (four)": lambda: shapes.four_shapes(cur, flt),
        "quantiles": lambda: shapes.quantiles(cur, flt),
        "filter choices": lambda: overview.dimension_values(cur),
    }


def _year_calls(db: Database) -> dict[str, Callable[[], object]]:
    cur = db.cursor()
    return {
        "/api/heatmap (year)": lambda: shapes.heatmap(cur, Filter()),
        "/api/quantiles (year)": lambda: shapes.quantiles(cur, Filter()),
    }


def distinct_values(base: Path, work: Path, sizes: list[int], runs: int) -> dict:
    """Each call's measure at each number of distinct models and tenants."""
    out: dict[str, dict[int, tuple[float, float, int]]] = {}
    for n in sizes:
        path = work / f"models-{n}.duckdb"
        shutil.copy(base, path)
        with Database(path).open() as db:
            recs = [
                RecordIn(
                    model=f"model-{i:06d}",
                    tenant=f"tenant-{i:06d}",
                    isl=100 + i % 900,
                    osl=50 + i % 400,
                    ttft_ms=100.0 + i % 50,
                    request_id=f"card-{n}-{i}",
                    started_at=(END - timedelta(hours=30, seconds=i)).isoformat(),
                )
                for i in range(n)
            ]
            _add(db, recs, "card")
            rollups.rebuild(db.connection, settle_s=0)
            calls = _page_calls(db)
            for name, call in calls.items():
                out.setdefault(name, {})[n] = _measure(call, runs)
    return out


def stale_hours(base_year: Path, work: Path, sizes: list[int], runs: int) -> dict:
    """The heat map and quantiles over a year with S scattered stale hours."""
    out: dict[str, dict[int, tuple[float, float, int]]] = {}
    for s in sizes:
        path = work / f"stale-{s}.duckdb"
        shutil.copy(base_year, path)
        with Database(path).open() as db:
            step = max(2, (YEAR_DAYS * 24) // s)  # never two adjacent: each its own interval
            recs = [
                RecordIn(
                    model="llama-3.1-8b-instruct",
                    isl=500 + k,
                    osl=100,
                    request_id=f"late-{s}-{k}",
                    started_at=(END - timedelta(hours=2 + k * step, minutes=7)).isoformat(),
                )
                for k in range(s)
            ]
            _add(db, recs, "late")  # marks each hour stale; no rebuild: the catch-up's work
            calls = _year_calls(db)
            for name, call in calls.items():
                out.setdefault(name, {})[s] = _measure(call, runs)
    return out


def _report(title: str, table: dict, unit: str) -> bool:
    ok = True
    print(f"\n{title}")
    print(f"| call | {unit} | seconds | ratio | peak MiB | ratio | answer KiB |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, by_size in table.items():
        sizes = sorted(by_size)
        t0, m0, _ = by_size[sizes[0]]
        for size in sizes:
            t, m, kib = by_size[size]
            grow = size / sizes[0]
            t_ratio, m_ratio = t / t0 if t0 else 1.0, m / m0 if m0 else 1.0
            fine = (
                t_ratio <= grow * SLACK
                and m_ratio <= grow * SLACK
                and (size != sizes[-1] or t <= BAR_S)
            )
            ok &= fine
            print(
                f"| {name} | {size:,} | {t:.3f} | {t_ratio:.1f} | {m:.1f} | {m_ratio:.1f} | "
                f"{kib:,} |{'' if fine else ' **over the bar**'}"
            )
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="demo rows of the base week")
    parser.add_argument("--models", default="1000,4000,16000")
    parser.add_argument("--stale", default="100,1000,8000")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tokenshape-card-") as tmp:
        work = Path(tmp)
        base, year = work / "base.duckdb", work / "year.duckdb"
        t0 = time.perf_counter()
        with Database(base).open() as db:
            demo.seed(db, requests=args.rows, days=7, end=END)
        with Database(year).open() as db:
            demo.seed(db, requests=args.rows, days=YEAR_DAYS, end=END)
        print(
            f"seeded the week and the year ({args.rows:,} rows each) in "
            f"{time.perf_counter() - t0:.0f} s"
        )
        models = [int(x) for x in args.models.split(",")]
        stale = [int(x) for x in args.stale.split(",")]
        ok = _report(
            "Distinct models and tenants",
            distinct_values(base, work, models, args.runs),
            "distinct",
        )
        ok &= _report(
            "Scattered stale hours", stale_hours(year, work, stale, args.runs), "stale hours"
        )
    print(f"cardinality_ok={int(ok)}")


if __name__ == "__main__":
    main()
