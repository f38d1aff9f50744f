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

- catch-up pace (`--catchup`, on by default; `--catchup-only` runs only this): how fast stale
  hours are rebuilt, in hours/s and raw rows/s, for 8,000 scattered hours of one late row each
  (the 700 days above), the 700 days with no rollups at all (every hour stale, as after an
  upgrade that adds them) and the demo week the same way (~1,200 rows an hour). Three ways
  each: `rollups.rebuild` back to back at 24 hours a call (the old fixed batch: the reference
  in the same run), the server's own writer catching up on its mover thread (rollups' default
  batch) when idle, and the same with a shipper storing 100 rows every 0.25 s, whose answers'
  latency and rows' time to visibility say whether the catch-up holds ingest up. One call of
  each way is timed statement by statement. Each way stops after CATCHUP_CAP_S and is measured
  over what it did. Reported, not part of the bar; an older checkout runs this section too
  (it needs only the writer and `rebuild(max_hours=...)`), for the figures before a change.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import inspect
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
from app.dashboard.pages import compare as compare_page  # noqa: E402
from app.dashboard.pages import latency as latency_page  # noqa: E402
from app.dashboard.pages import notes as notes_page  # noqa: E402
from app.dashboard.pages import overview as overview_page  # noqa: E402
from app.dashboard.pages import rightsizing as rightsizing_page  # noqa: E402
from app.dashboard.pages import seasonal as seasonal_page  # noqa: E402
from app.dashboard.pages import shapes as shapes_page  # noqa: E402
from app.dashboard.pages import traffic as traffic_page  # noqa: E402
from app.services import demo  # noqa: E402
from app.sizing.slo import Fleet  # noqa: E402
from app.storage import rollups  # noqa: E402
from app.storage.batches import Batch  # noqa: E402
from app.storage.database import Database  # noqa: E402
from app.storage.write.store import RequestStore  # noqa: E402
from app.storage.write.writer import Writer  # noqa: E402
from ingest.records import RecordIn, to_rows  # noqa: E402

END = datetime(2026, 11, 23, tzinfo=UTC)
SLACK = 1.5
YEAR_DAYS = 700  # 8,000 stale hours with a clean hour between each need 16,000 hours
BAR_S = 2.0
CATCHUP_CAP_S = 60.0  # a way that is not done by then is measured over what it did


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
    week = {"start": (END - timedelta(days=7)).isoformat(), "end": END.isoformat()}
    return {
        "Overview layout": lambda: overview_page.layout_for(
            db, {"window": "7d"}, END, "UTC", Fleet()
        ),
        "per-model table": lambda: overview.per_model(cur, flt, exact=False),
        "shapes (four)": lambda: shapes.four_shapes(cur, flt),
        "quantiles": lambda: shapes.quantiles(cur, flt),
        "filter choices": lambda: overview.dimension_values(cur),
        # Every other page whose content can depend on how many models and tenants there
        # are (Reports and Admin cannot), its layout and the callbacks that fill it.
        "Overview latency lines": lambda: overview_page.latency_outputs(
            db, week, END, "UTC", Fleet()
        ),
        "Shapes layout": lambda: shapes_page.layout_for(db, week, END),
        "Latency layout, split by tenant": lambda: latency_page.layout_for(
            db, week | {"split": "tenant"}, END, "UTC"
        ),
        "Latency load figures": lambda: latency_page.load_figures(db, week, END, "UTC"),
        "Traffic layout, split by model": lambda: traffic_page.layout_for(
            db, week | {"split": "model"}, END, "UTC"
        ),
        "Rightsizing fleet rows": lambda: rightsizing_page.fleet_rows(
            db, week, END, "UTC", Fleet()
        ),
        "Seasonal layout": lambda: seasonal_page.layout_for(db, {}, END, "UTC", 0.2),
        "Compare layout": lambda: compare_page.layout_for(db, week, END),
        "Notes layout": lambda: notes_page.layout_for(db, week, END, "UTC"),
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


def _scatter(db: Database, s: int) -> None:
    """One late request in each of `s` hours of the 700 days, never two adjacent."""
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
    _add(db, recs, "late")


def stale_hours(base_year: Path, work: Path, sizes: list[int], runs: int) -> dict:
    """The heat map and quantiles over a year with S scattered stale hours."""
    out: dict[str, dict[int, tuple[float, float, int]]] = {}
    for s in sizes:
        path = work / f"stale-{s}.duckdb"
        shutil.copy(base_year, path)
        with Database(path).open() as db:
            _scatter(db, s)  # marks each hour stale; no rebuild: the catch-up's work
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


# --- catch-up pace -----------------------------------------------------------------------


class _Timed:
    """A connection that adds up each statement's time (the first 90 characters name it)."""

    def __init__(self, con):
        self.con = con
        self.seconds: collections.Counter[str] = collections.Counter()
        self.count: collections.Counter[str] = collections.Counter()

    def execute(self, sql: str, params=None):
        key = " ".join(sql.split())[:90]
        t0 = time.perf_counter()
        try:
            return self.con.execute(sql, params) if params is not None else self.con.execute(sql)
        finally:
            self.seconds[key] += time.perf_counter() - t0
            self.count[key] += 1


def _unbuild(db: Database) -> None:
    """No rollups at all and every hour of raw rows stale, as after an upgrade adding them."""
    rollups.unbuild_all(db.connection)
    db.connection.execute("CHECKPOINT")


def _stale(con) -> dict:
    """Raw rows per stale hour."""
    rows = con.execute(
        f"SELECT d.hour, count(r.started_at) FROM (SELECT DISTINCT hour FROM rollup_dirty) d "
        f"LEFT JOIN requests r ON {rollups.UTC_HOUR.replace('started_at', 'r.started_at')} = "
        "d.hour GROUP BY d.hour"
    ).fetchall()
    return dict(rows)


def _fixed_batch(db: Database) -> dict:
    """`rollups.rebuild` back to back, 24 hours a call whatever they hold (the old batch)."""
    con = db.new_cursor()
    stale = _stale(con)
    extra = (
        {"max_rows": None} if "max_rows" in inspect.signature(rollups.rebuild).parameters else {}
    )
    timed = _Timed(con)
    calls: list[float] = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < CATCHUP_CAP_S:
        c0 = time.perf_counter()
        n = rollups.rebuild(timed if not calls else con, max_hours=24, settle_s=0, **extra)
        if not n:
            break
        calls.append(time.perf_counter() - c0)
    elapsed = time.perf_counter() - t0
    left = _stale(con)
    con.close()
    return _pace(stale, left, elapsed, calls, timed) | {"ingest": None}


def _writer(db: Database, shipper: bool) -> dict:
    """The server's writer catching up (its mover thread), a shipper storing meanwhile or
    not (each of its flushes wakes the mover up, which an idle server's catch-up lacks)."""
    stale = _stale(db.cursor())
    calls: list[float] = []
    timed: list[_Timed] = []
    original = rollups.rebuild

    def observed(con, *args, **kwargs):
        if not timed:
            timed.append(_Timed(con))
            con = timed[0]
        c0 = time.perf_counter()
        done = original(con, *args, **kwargs)
        if done:  # the calls that found nothing due are not the catch-up's
            calls.append(time.perf_counter() - c0)
        return done

    async def run() -> tuple[float, dict]:
        answers: list[float] = []
        visible: list[float] = []
        cur = db.cursor()
        writer = Writer(db, rollup_settle_s=0)
        await writer.start()
        t0 = time.perf_counter()
        k = 0
        try:
            while not shipper and time.perf_counter() - t0 < CATCHUP_CAP_S:
                if not cur.execute(
                    "SELECT count(*) FROM rollup_dirty WHERE hour < ?", [END]
                ).fetchone()[0]:
                    break
                await asyncio.sleep(0.05)
            while shipper and time.perf_counter() - t0 < CATCHUP_CAP_S:
                recs = [
                    RecordIn(
                        model="llama-3.1-8b-instruct",
                        isl=300,
                        osl=80,
                        request_id=f"probe-{k}-{i}",
                        started_at=(END + timedelta(minutes=k % 60, seconds=i)).isoformat(),
                    )
                    for i in range(100)
                ]
                rows, _ = to_rows(recs, list(range(100)), gateway="probe", received_at=END)
                a0 = time.perf_counter()
                await writer.submit(Batch("probe", "native", END, rows))
                answers.append(time.perf_counter() - a0)
                k += 1
                while (
                    cur.execute("SELECT count(*) FROM requests WHERE gateway = 'probe'").fetchone()[
                        0
                    ]
                    < 100 * k
                    and time.perf_counter() - a0 < 30
                ):
                    await asyncio.sleep(0.01)
                visible.append(time.perf_counter() - a0)
                if not cur.execute(
                    "SELECT count(*) FROM rollup_dirty WHERE hour < ?", [END]
                ).fetchone()[0]:
                    break
                await asyncio.sleep(max(0.0, 0.25 - (time.perf_counter() - a0)))
            elapsed = time.perf_counter() - t0
        finally:
            await writer.stop()
        if not shipper:
            return elapsed, None
        ms = sorted(a * 1000 for a in answers)
        vis = sorted(visible)
        return elapsed, {
            "answer_ms": (ms[len(ms) // 2], ms[-1]),
            "visible_s": (vis[len(vis) // 2], vis[-1]),
        }

    rollups.rebuild = observed
    try:
        elapsed, ingest = asyncio.run(run())
    finally:
        rollups.rebuild = original
    cur = db.cursor()
    left = {h: n for h, n in _stale(cur).items() if h in stale}
    return _pace(stale, left, elapsed, calls, timed[0] if timed else None) | {"ingest": ingest}


def _pace(stale: dict, left: dict, elapsed: float, calls: list[float], timed) -> dict:
    hours = len(stale) - len(left)
    rows = sum(stale.values()) - sum(left.values())
    calls = sorted(calls) or [0.0]
    return {
        "hours": hours,
        "of": len(stale),
        "rows": rows,
        "seconds": elapsed,
        "hours_s": hours / elapsed,
        "rows_s": rows / elapsed,
        "call_median": calls[len(calls) // 2],
        "call_max": calls[-1],
        "statements": timed,
    }


def catch_up(base_week: Path, base_year: Path, work: Path) -> dict:
    """Each scenario's pace, each way."""
    scenarios: dict[str, tuple[Path, Callable[[Database], None]]] = {
        "8,000 scattered hours, 1 late row each (700 days)": (
            base_year,
            lambda db: _scatter(db, 8000),
        ),
        "700 days, no rollups yet": (base_year, _unbuild),
        "the week (~1,200 rows an hour), no rollups yet": (base_week, _unbuild),
    }
    out: dict = {}
    for name, (base, make_stale) in scenarios.items():
        ways: dict[str, Callable[[Database], dict]] = {
            "24 hours a call": _fixed_batch,
            "the writer, idle": lambda db: _writer(db, shipper=False),
            "the writer, a shipper storing": lambda db: _writer(db, shipper=True),
        }
        for way, measure in ways.items():
            path = work / f"catchup-{len(out)}.duckdb"  # its own journal folder too
            shutil.copy(base, path)
            with Database(path).open() as db:
                make_stale(db)
                out[name, way] = measure(db)
            path.unlink()
    return out


def _catchup_report(table: dict) -> None:
    print("\nCatch-up pace (stale hours rebuilt; a shipper stores 100 rows every 0.25 s)")
    print(
        "| scenario | way | hours | raw rows | s | hours/s | rows/s | call median / max s "
        "| ingest answer p50 / max ms | rows visible p50 / max s |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (name, way), m in table.items():
        ingest = m["ingest"]
        answer = f"{ingest['answer_ms'][0]:.1f} / {ingest['answer_ms'][1]:.1f}" if ingest else ""
        seen = f"{ingest['visible_s'][0]:.2f} / {ingest['visible_s'][1]:.2f}" if ingest else ""
        print(
            f"| {name} | {way} | {m['hours']:,} of {m['of']:,} | {m['rows']:,} | "
            f"{m['seconds']:.1f} | {m['hours_s']:,.0f} | {m['rows_s']:,.0f} | "
            f"{m['call_median']:.2f} / {m['call_max']:.2f} | {answer} | {seen} |"
        )
    for (name, way), m in table.items():
        timed = m["statements"]
        if timed is None or way.endswith("storing"):  # the same call as when idle
            continue
        total = sum(timed.seconds.values())
        print(
            f"\nOne call, {name}, {way}: {total * 1000:.0f} ms in {sum(timed.count.values())} "
            "statements; the slowest:"
        )
        for key, sec in timed.seconds.most_common(8):
            print(f"  {sec * 1000:7.1f} ms  {timed.count[key]:2d}x  {key}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=200_000, help="demo rows of the base week")
    parser.add_argument("--models", default="1000,4000,16000")
    parser.add_argument("--stale", default="100,1000,8000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--catchup", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--catchup-only", action="store_true", help="only the catch-up pace")
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
        ok = True
        if not args.catchup_only:
            ok &= _report(
                "Distinct models and tenants",
                distinct_values(base, work, models, args.runs),
                "distinct",
            )
            ok &= _report(
                "Scattered stale hours", stale_hours(year, work, stale, args.runs), "stale hours"
            )
        if args.catchup or args.catchup_only:
            _catchup_report(catch_up(base, year, work))
    print(f"cardinality_ok={int(ok)}")


if __name__ == "__main__":
    main()
