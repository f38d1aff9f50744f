"""The rollup catch-up (app/storage/rollups.py `rebuild`, tiers.py `replace`, the writer's
`_rebuild_rollups`): batches bounded by rows, not by a count of hours; only the cells that
changed are written; the result equals a rebuild from scratch whatever the batches, a
concurrent write or a kill -9 in the middle; and the writer comes straight back while a
backlog remains."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from app.services import demo
from app.storage import rollups, tiers
from app.storage.database import Database
from app.storage.schema import DERIVED, KINDS, TIERS
from app.storage.write.writer import REBUILD_EVERY_S, Writer
from tests.support.database import copy_database, open_migrated
from tests.support.records import record, store

TZ = "Europe/Berlin"
END = datetime(2026, 10, 27, tzinfo=UTC)  # the 4 days hold Berlin's 25-hour day (Oct 25)
H = timedelta(hours=1)
ROOT = Path(__file__).resolve().parents[4]


@pytest.fixture(scope="module")
def template(tmp_path_factory, db_template) -> Path:
    """Four days of demo traffic with their rollups built, days in Berlin's zone."""
    path = copy_database(db_template, tmp_path_factory.mktemp("catchup") / "c.duckdb")
    with open_migrated(path) as db:
        demo.seed(db, requests=4000, days=4, tz=TZ, end=END)
    return path


@pytest.fixture
def db(template, tmp_path) -> Iterator[Database]:
    with open_migrated(copy_database(template, tmp_path / "c.duckdb")) as database:
        yield database


def _late_rows(db: Database) -> list[datetime]:
    """Late requests in 30 built hours, in an hour before the demo and one after it (hours and
    days never built) and in Berlin's repeated hour; returns the hours they dirty. Half of
    them repeat a stored request's dimensions and values (they land in cells that exist),
    half are new cells (another gateway, NULL engine or tenant)."""
    at = [END - (3 * k + 2) * H + timedelta(minutes=11) for k in range(30)]
    at += [
        END - 9 * 24 * H + timedelta(minutes=5),
        END + 2 * H,
        datetime(2026, 10, 25, 0, 40, tzinfo=UTC),
    ]
    by_gateway: dict[str, list[dict]] = {}
    cur = db.cursor()
    for i, t in enumerate(at):
        like = cur.execute(
            "SELECT gateway, model, engine, tenant, status, isl, osl, ttft_ms, itl_ms, e2e_ms "
            "FROM requests WHERE started_at >= ? AND started_at < ? ORDER BY request_id LIMIT 1",
            [t.replace(minute=0), t.replace(minute=0) + H],
        ).fetchone()
        if i % 2 == 0 and like is not None:
            gateway, model, engine, tenant, status, isl, osl, ttft, itl, e2e = like
            rec = record(
                i,
                "late",
                started_at=t.isoformat(),
                model=model,
                engine=engine,
                tenant=tenant,
                status=status,
                isl=isl,
                osl=osl,
                ttft_ms=ttft,
                itl_ms=itl,
                e2e_ms=e2e,
            )
        else:
            gateway = "late"
            rec = record(
                i,
                "late",
                started_at=t.isoformat(),
                isl=4000 + 17 * i,
                osl=3 + i,
                engine=None if i % 4 == 1 else "chat-8b",
                tenant=None if i % 3 == 0 else "team-late",
            )
        by_gateway.setdefault(gateway, []).append(rec)
    for gateway, recs in by_gateway.items():
        assert store(db, recs, gateway=gateway) == len(recs)
    assert len(by_gateway) > 1
    return sorted({t.replace(minute=0) for t in at})


def _state(con) -> dict[str, list[tuple]]:
    """Every tier's rows (and which hours are held, and in which day), in key order."""
    out = {}
    for tier in (*TIERS, *DERIVED):
        for kind in KINDS:
            name = tiers.table(tier, kind)
            cols = ", ".join(tiers.columns(tier, kind))
            out[name] = con.execute(f"SELECT {cols} FROM {name} ORDER BY ALL").fetchall()
    out["rollup_hours"] = con.execute(
        "SELECT hour, day, source, in_full, in_nt, in_day FROM rollup_hours ORDER BY ALL"
    ).fetchall()
    return out


def _assert_same(got: dict, want: dict) -> None:
    """Equal row for row: keys and counts exactly, sums to rounding (summed in other orders)."""
    for name, rows in want.items():
        assert len(got[name]) == len(rows), name
        for a, b in zip(got[name], rows, strict=True):
            for x, y in zip(a, b, strict=True):
                if isinstance(y, float):
                    assert math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-6), (name, a, b)
                else:
                    assert x == y, (name, a, b)


def _from_scratch(db: Database, tmp_path: Path) -> dict:
    """The same raw rows rolled up in a copy that never had rollups."""
    db.close()
    copy = copy_database(db.path, tmp_path / "scratch" / "s.duckdb")
    db.open()
    with open_migrated(copy) as other:
        con = other.cursor()
        rollups.unbuild_all(con, settled=False)
        rollups.rebuild_all(con, TZ)
        return _state(con)


def _rows_in(con, hours: list[datetime]) -> int:
    row = con.execute(
        f"SELECT count(*) FROM requests WHERE {rollups.UTC_HOUR} IN "
        "(SELECT unnest(?::TIMESTAMPTZ[]))",
        [hours],
    ).fetchone()
    return row[0]


def test_batches_are_bounded_by_rows_and_end_equal_to_a_rebuild_from_scratch(db, tmp_path):
    """Small budgets: every batch holds the oldest due hours whose rows (plus HOUR_ROWS each)
    fit it, one hour alone when it holds more; after all of them every tier (built hours,
    new hours and days, a 25-hour day, NULL engine and tenant) equals a rebuild from scratch."""
    dirtied = _late_rows(db)
    cur = db.cursor()
    budget = 400
    batches = []
    while True:
        cur.execute("BEGIN TRANSACTION")
        due = rollups.due_hours(cur, settle_s=0, max_rows=budget)
        cur.execute("COMMIT")
        if not due:
            break
        rows = _rows_in(cur, due)
        assert len(due) == 1 or rows + rollups.HOUR_ROWS * len(due) <= budget
        assert rollups.rebuild(cur, settle_s=0, tz=TZ, max_rows=budget) == len(due)
        batches.append(due)
    assert sorted(h for b in batches for h in b) == dirtied  # oldest first, each once
    assert len(batches) > 3 and max(len(b) for b in batches) > 1
    assert rollups.hour_counts(cur)[1] == 0
    _assert_same(_state(cur), _from_scratch(db, tmp_path))


def test_the_hour_cap_holds_whatever_the_rows(db):
    _late_rows(db)
    cur = db.cursor()
    assert rollups.rebuild(cur, settle_s=0, tz=TZ, max_hours=5, max_rows=None) == 5
    assert rollups.rebuild(cur, settle_s=3600, tz=TZ) == 0  # marked just now: not settled


def test_a_rebuild_writes_only_the_cells_that_changed(db):
    """An hour marked again with nothing new keeps every row where it is; a late request
    rewrites the few cells it lands in (one per measure and bin), not its hour or its day."""
    cur = db.cursor()
    cur.execute("SET checkpoint_threshold = '10GB'")  # no vacuum moving rows between looks
    # Threads add a sum's terms in a varying order: its last bit can differ, and such a cell is
    # rewritten (harmless); on one thread a recomputed cell is bit for bit what it was.
    cur.execute("SET threads = 1")
    hour = END - 30 * H

    def placed() -> dict[str, set]:
        out = {}
        for tier in (*TIERS, *DERIVED):
            for kind in KINDS:
                name = tiers.table(tier, kind)
                out[name] = {r[0] for r in cur.execute(f"SELECT rowid FROM {name}").fetchall()}
        return out

    before = placed()
    cur.execute("INSERT INTO rollup_dirty VALUES (?, get_current_timestamp())", [hour])
    assert rollups.rebuild(cur, settle_s=0, tz=TZ) == 1
    assert placed() == before
    assert rollups.hour_counts(cur)[1] == 0

    store(db, [record(1, "one", started_at=(hour + timedelta(minutes=3)).isoformat())], "one")
    assert rollups.rebuild(cur, settle_s=0, tz=TZ) == 1
    after = placed()
    day_rows = cur.execute(
        "SELECT count(*) FROM rollup_day_values WHERE hour = (SELECT day FROM rollup_hours "
        "WHERE hour = ?)",
        [hour],
    ).fetchone()[0]
    assert day_rows > 100  # the day has many cells; the request touches at most five
    for name, rowids in after.items():
        rewritten = len(rowids - before[name])
        assert rewritten <= 5, (name, rewritten)
        assert len(before[name] - rowids) <= rewritten  # a new cell replaces none
    assert after["rollup_values"] != before["rollup_values"]


class _Interleaved:
    """The rebuild's connection; just before it clears the dirty marks, `meanwhile` runs
    (another connection committing a write of its own)."""

    def __init__(self, con, meanwhile):
        self.con = con
        self.meanwhile = meanwhile

    def execute(self, sql, params=None):
        if sql.startswith("DELETE FROM rollup_dirty") and self.meanwhile:
            self.meanwhile()
            self.meanwhile = None
        return self.con.execute(sql, params) if params is not None else self.con.execute(sql)


def test_marks_made_during_a_rebuild_stay_dirty_and_their_rows_are_counted_next(db, tmp_path):
    """One transaction: a request stored into an hour while that hour's rebuild runs is not in
    the rebuild's rows, and its mark survives the rebuild's clearing, so the next rebuild
    counts it."""
    hours = _late_rows(db)
    target = hours[3]

    def write_meanwhile():
        late = record(0, "meanwhile", started_at=(target + timedelta(minutes=50)).isoformat())
        assert store(db, [late], gateway="meanwhile") == 1

    cur = db.cursor()
    done = rollups.rebuild(_Interleaved(cur, write_meanwhile), settle_s=0, tz=TZ)
    assert done >= 4
    left = [r[0] for r in cur.execute("SELECT DISTINCT hour FROM rollup_dirty").fetchall()]
    assert target in left
    rollups.rebuild_all(cur, TZ)
    _assert_same(_state(cur), _from_scratch(db, tmp_path))


class _Clock:
    """The writer module's clock: monotonic time that only the test moves."""

    def __init__(self):
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


def test_the_writer_comes_straight_back_while_a_backlog_remains(db, monkeypatch):
    """A backlog bigger than one batch is rebuilt call after call without the loop's wait
    (the mover is woken); once nothing is due the next look is REBUILD_EVERY_S away."""
    from app.storage.write import writer as module

    clock = _Clock()
    monkeypatch.setattr(module, "time", clock)
    t0 = datetime(2026, 9, 1, tzinfo=UTC)
    backlog = rollups.REBUILD_MAX_HOURS + 50  # more than one batch, by rows or by hours
    recs = [record(i, "old", started_at=(t0 + i * H).isoformat()) for i in range(backlog)]
    store(db, recs, gateway="old")
    w = Writer(db, rollup_settle_s=0, tz=TZ)
    con = db.new_cursor()
    try:
        done = []
        while rollups.hour_counts(con)[1]:
            w._move_wanted.clear()
            w._rebuild_rollups(con)
            assert w._move_wanted.is_set() and w._rebuild_due <= clock.now
            done.append(backlog - rollups.hour_counts(con)[1])
        first = rollups.REBUILD_ROWS // (1 + rollups.HOUR_ROWS)  # hours of one row each
        assert done == [first, backlog]
        w._move_wanted.clear()
        w._rebuild_rollups(con)  # nothing due
        assert not w._move_wanted.is_set()
        assert w._rebuild_due == clock.now + REBUILD_EVERY_S
        w._rebuild_rollups(con)  # not yet due: no look at all
        clock.now += REBUILD_EVERY_S
        w._rebuild_rollups(con)
        assert w._rebuild_due == clock.now + REBUILD_EVERY_S
    finally:
        con.close()
        w._executor.shutdown()


CATCH_UP = """
import sys
from app.storage import rollups
from app.storage.database import Database
db = Database(__import__("pathlib").Path(sys.argv[1])).open()
con = db.new_cursor()
while rollups.rebuild(con, settle_s=0, tz=sys.argv[2], max_rows=60):
    print("committed", flush=True)
print("finished", flush=True)
"""


def test_a_kill_9_during_the_catch_up_loses_nothing_and_doubles_nothing(db, tmp_path):
    """The catch-up killed with SIGKILL between or inside its transactions: reopened, the
    hours it committed are clean, the rest still dirty, and finishing the catch-up gives
    every tier as a rebuild from scratch does (no half-applied difference in a day)."""
    hours = _late_rows(db)
    db.close()
    child = subprocess.Popen(
        [sys.executable, "-c", CATCH_UP, str(db.path), TZ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    try:
        for _ in range(4):
            assert child.stdout.readline().strip() == "committed"
        child.send_signal(signal.SIGKILL)  # in its fifth transaction, or just after
    finally:
        child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL
    db.open()
    cur = db.cursor()
    left = rollups.hour_counts(cur)[1]
    assert 0 < left <= len(hours) - 4
    rollups.rebuild_all(cur, TZ)
    _assert_same(_state(cur), _from_scratch(db, tmp_path))
