"""Query benchmark: the API's heat map and quantiles against DuckDB directly and against pandas.

Seeds N demo rows (default 10,000,000; `tokenshape demo` also builds the hourly rollups), then
measures median latencies of
(a) the analytics functions run directly on a DuckDB connection in this process (reference),
(b) the same views through the running server's JSON API (`/api/heatmap`, `/api/quantiles`),
(c) what a user would do without tokenshape: load the window's rows into pandas and compute
    the same heat map (numpy histogram2d) and quantiles,
and, for comparison, (a) with exact quantiles from raw rows (`exact=true`).
(a) and (b) are timed in alternation, one call each in turn, so a change in this shared
machine's load moves both alike; (a) reads a copy of the file, which the server holds.
Both windows are a day or longer, so the quantiles come from the rollups (within ±0.99%).
Last line: `query_ratio=<api/duckdb>` (bar <= 1.5, goal <= 1.1); pandas must be >= 10x slower.
"""

from __future__ import annotations

import argparse
import http.client
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlencode

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.analytics import shapes  # noqa: E402
from app.analytics.bins import LOG2_EDGES  # noqa: E402
from app.analytics.filters import Filter  # noqa: E402
from app.services import demo  # noqa: E402
from app.storage.database import Database  # noqa: E402
from bench._server import served  # noqa: E402

END = datetime(2026, 11, 23, tzinfo=UTC)
CASES = {
    "all rows": ({}, Filter()),
    "7 days, one engine": (
        {"start": "2026-11-16T00:00:00Z", "end": "2026-11-23T00:00:00Z", "engine": "llm-70b"},
        Filter(start=datetime(2026, 11, 16, tzinfo=UTC), end=END, engines=("llm-70b",)),
    ),
}


def median_ms(fn, repeat: int) -> float:
    fn()  # warm
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def alternating_ms(first, second, repeat: int) -> tuple[float, float]:
    """Median milliseconds of two calls timed in turn (after one warm-up call each)."""
    first(), second()
    a: list[float] = []
    b: list[float] = []
    for _ in range(repeat):
        for fn, times in ((first, a), (second, b)):
            t0 = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(a), statistics.median(b)


def pandas_view(con, flt: Filter) -> None:
    """Load the rows, then compute the heat map and quantiles in pandas/numpy."""
    where, params = flt.where()
    frame = con.execute(
        f"SELECT isl, osl, ttft_ms, itl_ms, e2e_ms FROM requests WHERE {where}", params
    ).df()
    edges = np.asarray([*LOG2_EDGES, np.inf])
    np.histogram2d(frame["isl"], frame["osl"], bins=[edges, edges])
    frame[["isl", "osl", "ttft_ms", "itl_ms", "e2e_ms"]].quantile([0.5, 0.9, 0.99, 0.999])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument(
        "--db", type=Path, help="a database this benchmark seeded before (skips the seeding)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tokenshape-qbench-") as tmp:
        path = args.db or Path(tmp) / "q.duckdb"
        if args.db is None:
            t0 = time.perf_counter()
            with Database(path).open() as db:
                demo.seed(db, requests=args.rows, days=14, end=END)
            print(f"seeded {args.rows:,} demo rows in {time.perf_counter() - t0:.0f} s")

        reference: dict[str, float] = {}
        exact_ms: dict[str, float] = {}
        pandas_ms: dict[str, float] = {}
        api: dict[str, float] = {}
        copy = Path(tmp) / "reference.duckdb"
        shutil.copy(path, copy)
        with Database(copy).open(run_migrations=False) as db, served(path, 8791):
            cur = db.cursor()
            for name, (params, flt) in CASES.items():
                # A fresh connection per window: the slow measurements below outlast keep-alive.
                client = http.client.HTTPConnection("127.0.0.1", 8791, timeout=120)

                def call(params=params, client=client):
                    for route in ("/api/heatmap", "/api/quantiles"):
                        client.request("GET", f"{route}?{urlencode(params)}")
                        response = client.getresponse()
                        body = response.read()
                        if response.status != 200:
                            raise SystemExit(f"{route} answered {response.status}: {body[:200]!r}")

                reference[name], api[name] = alternating_ms(
                    lambda flt=flt: (shapes.heatmap(cur, flt), shapes.quantiles(cur, flt)),
                    call,
                    args.repeat,
                )
                exact_ms[name] = median_ms(
                    lambda flt=flt: (
                        shapes.heatmap(cur, flt),
                        shapes.quantiles(cur, flt, exact=True),
                    ),
                    3,
                )
                pandas_ms[name] = median_ms(lambda flt=flt: pandas_view(cur, flt), 3)

        worst = 0.0
        for name in CASES:
            ratio = api[name] / reference[name]
            worst = max(worst, ratio)
            print(
                f"{name:<20} heat map + quantiles: duckdb {reference[name]:8.1f} ms  "
                f"api {api[name]:8.1f} ms ({ratio:.2f}x)  pandas {pandas_ms[name]:9.1f} ms "
                f"({pandas_ms[name] / api[name]:.1f}x slower than the api)  "
                f"exact quantiles, duckdb {exact_ms[name]:8.1f} ms"
            )
        print(f"query_ratio={worst:.3f}")


if __name__ == "__main__":
    main()
