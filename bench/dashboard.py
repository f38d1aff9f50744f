"""Dashboard benchmark: navigation to the Shapes page's heat map being drawn, in Chromium.

Seeds N demo rows (default 10,000,000), serves them, and times in headless Chromium from
`page.goto` to the heat map's cells in the DOM, over the whole data set. Prints each run and,
as the last line, `dashboard_ms=<median>` (bar <= 2000 on this machine, goal <= 1000).
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.services import demo  # noqa: E402
from app.storage.database import Database  # noqa: E402
from bench._server import served  # noqa: E402

CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--path", default="/shapes?window=all")
    parser.add_argument(
        "--db", type=Path, help="an already seeded database to serve (skips seeding; not changed)"
    )
    parser.add_argument(
        "--warm",
        action="store_true",
        help="reuse one browser context (a returning user's cache) instead of a fresh one per load",
    )
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="tokenshape-dbench-") as tmp:
        path = Path(tmp) / "d.duckdb"
        if args.db:
            shutil.copy(args.db, path)
        else:
            t0 = time.perf_counter()
            with Database(path).open() as db:
                demo.seed(db, requests=args.rows, days=14, end=datetime(2026, 11, 23, tzinfo=UTC))
            print(f"seeded {args.rows:,} demo rows in {time.perf_counter() - t0:.0f} s")
        times: list[float] = []
        with served(path, 8792) as server, sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=CHROMIUM_ARGS)
            context = browser.new_context(viewport={"width": 1366, "height": 768})
            for run in range(args.runs + 1):
                if args.warm:
                    page = context.new_page()
                else:
                    page = browser.new_page(viewport={"width": 1366, "height": 768})
                started = time.perf_counter()
                page.goto(server.url + args.path)
                page.locator("#shapes-heatmap .heatmaplayer").wait_for(timeout=120_000)
                elapsed = (time.perf_counter() - started) * 1000
                # Let the page finish (its tables) before the next run, so runs do not overlap.
                page.locator("#shapes-quantiles").wait_for(timeout=120_000)
                page.close()
                if run:  # the first load warms caches, as a user's second visit would
                    times.append(elapsed)
                    print(f"run {run}: {elapsed:,.0f} ms")
            browser.close()
        kind = "warm (one browser context)" if args.warm else "cold (a fresh context each)"
        print(f"loads: {kind}")
        print(f"dashboard_ms={statistics.median(times):.0f}")


if __name__ == "__main__":
    main()
