"""Rollup tiers: a window answered from each tier (daily, hourly without tenant, hourly at
full grain) equals the same window answered from raw rows, across the end of daylight saving
time in the configured zone, and what a tier cannot answer is said, never guessed."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analytics import overview, shapes, traffic
from app.analytics import rollups as rollup_source
from app.analytics.filters import Filter
from app.services import demo
from app.storage import tiers
from app.storage.database import Database
from tests.support.database import copy_database, open_migrated

TZ = "America/New_York"
END = datetime(2026, 11, 5, 5, tzinfo=UTC)  # midnight in New York; DST ended Nov 1, 06:00 UTC
H = timedelta(hours=1)
# Local days Oct 29 .. Nov 4 whole (one of 25 hours), ragged ends of 37 and 13 minutes.
WINDOW = Filter(
    start=datetime(2026, 10, 28, 4, 37, tzinfo=UTC), end=datetime(2026, 11, 4, 23, 13, tzinfo=UTC)
)


@pytest.fixture(scope="module")
def template(tmp_path_factory, db_template) -> Iterator:
    path = copy_database(db_template, tmp_path_factory.mktemp("tiers") / "t.duckdb")
    with open_migrated(path) as db:
        demo.seed(db, requests=12_000, days=9, tz=TZ, end=END)
    return path


@pytest.fixture
def db(template, tmp_path) -> Iterator[Database]:
    with open_migrated(copy_database(template, tmp_path / "t.duckdb")) as database:
        yield database


def _drop(db: Database, *tier_names: str) -> None:
    """Take tiers away as their retention would (the rows and the hours' flags)."""
    cur = db.cursor()
    flags = {"hourly": "in_full", "hourly_nt": "in_nt", "daily": "in_day"}
    for tier in tier_names:
        for kind in tiers.KINDS:
            cur.execute(f"DELETE FROM {tiers.table(tier, kind)}")
        cur.execute(f"UPDATE rollup_hours SET {flags[tier]} = false")


def _raw(monkeypatch):
    ctx = monkeypatch.context()
    m = ctx.__enter__()
    m.setattr(rollup_source, "split", lambda cur, flt: None)
    m.setattr(rollup_source, "local_split", lambda cur, flt, tz, seconds=3600: None)
    return ctx


def _answers(cur, flt: Filter) -> dict:
    rates = traffic.rates(cur, flt, "1d", TZ)
    return {
        "days": rates["requests"].tolist(),
        "buckets": rates["bucket"].tolist(),
        "tokens": rates["input_tokens"].tolist(),
        "heatmap": shapes.heatmap(cur, flt, bins="log2").counts,
        "kpis": overview.kpis(cur, flt, exact=False),
    }


@pytest.mark.parametrize(
    ("dropped", "used"),
    [
        ((), {"daily", "hourly_nt"}),  # the days the window cuts are read by the hour
        (("daily",), {"hourly_nt"}),
        (("daily", "hourly_nt"), {"hourly"}),
    ],
)
def test_each_tier_answers_a_window_as_raw_rows_do(db, monkeypatch, dropped, used):
    _drop(db, *dropped)
    cur = db.cursor()
    sp = rollup_source.local_split(cur, WINDOW, TZ, 86400)
    assert sp is not None and set(sp.tiers) == used | {"raw"}  # raw: the ragged ends
    assert sp.note is None
    got = _answers(cur, WINDOW)
    ctx = _raw(monkeypatch)
    try:
        want = _answers(cur, WINDOW)
    finally:
        ctx.__exit__(None, None, None)
    assert got["days"] == want["days"]
    # Oct 28 (from 00:37 local) to Nov 4 (to 18:13 local): eight local days.
    assert len(got["days"]) == 8, got["buckets"]
    assert got["tokens"] == want["tokens"]
    assert np.array_equal(np.asarray(got["heatmap"]), np.asarray(want["heatmap"]))
    for key in ("requests", "input_tokens", "output_tokens"):
        assert got["kpis"][key] == want["kpis"][key]
    for key, value in want["kpis"].items():
        if key.endswith(("_p50", "_p95", "_p99")) and value is not None:
            assert got["kpis"][key] == pytest.approx(value, rel=0.0099 + 1e-12), key


def test_the_daily_tier_holds_local_days_of_23_to_25_hours(db):
    cur = db.cursor()
    hours = dict(
        cur.execute(
            "SELECT day, count(*) FROM rollup_hours WHERE day >= ? GROUP BY day",
            [datetime(2026, 10, 30, tzinfo=UTC)],
        ).fetchall()
    )
    # The day DST ended (Nov 1 in New York) holds 25 UTC hours, its start is local midnight.
    nov1 = datetime(2026, 11, 1, 4, tzinfo=UTC)
    assert hours[nov1] == 25
    assert cur.execute("SELECT count(DISTINCT hour) FROM rollup_day_shapes").fetchone()[0] >= 8


def test_hourly_buckets_never_read_the_daily_tier(db):
    sp = rollup_source.local_split(db.cursor(), WINDOW, TZ, 3600)
    assert sp is not None and "daily" not in sp.tiers and "hourly_nt" in sp.tiers


def test_a_tenant_filter_reads_full_grain_and_says_what_it_could_not_count(db, monkeypatch):
    cur = db.cursor()
    tenant = cur.execute("SELECT tenant FROM requests GROUP BY 1 ORDER BY count(*) DESC").fetchone()
    flt = Filter(start=datetime(2026, 10, 28, 5, tzinfo=UTC), end=WINDOW.end, tenants=(tenant[0],))
    sp = rollup_source.split(cur, flt)
    assert sp is not None and set(sp.tiers) == {"hourly", "raw"} and sp.note is None
    # The full-grain tier loses the hours before Nov 2 (as its retention would).
    cut = datetime(2026, 11, 2, tzinfo=UTC)
    for kind in tiers.KINDS:
        cur.execute(f"DELETE FROM {tiers.table('hourly', kind)} WHERE hour < ?", [cut])
    cur.execute("UPDATE rollup_hours SET in_full = false WHERE hour < ?", [cut])
    sp = rollup_source.split(cur, flt)
    assert sp is not None and sp.note is not None
    assert "not counted" in sp.note and "tenants are kept only" in sp.note
    assert "2026-11-02 00:00" in sp.note  # the end of what it could not count
    assert "hourly rollups (full grain)" in sp.source()
    got = shapes.heatmap(cur, flt).total
    ctx = _raw(monkeypatch)
    try:
        kept = Filter(start=cut, end=WINDOW.end, tenants=flt.tenants)
        want = shapes.heatmap(cur, kept).total
    finally:
        ctx.__exit__(None, None, None)
    assert got == want > 0  # exactly what the tier still holds, nothing invented


def test_a_day_cut_by_the_window_is_read_from_hours_not_whole(db):
    cur = db.cursor()
    sp = rollup_source.split(cur, WINDOW)
    assert sp is not None
    days = [p for p in sp.parts if p.tier == "daily"]
    # Whole local days only: Oct 28 (cut at 04:37 UTC = 00:37 local) is read by the hour.
    assert days and min(p.lo for p in days) == datetime(2026, 10, 29, 4, tzinfo=UTC)


def test_pages_and_the_api_say_which_tier_answered(db):

    cur = db.cursor()
    text = rollup_source.coverage(cur, WINDOW)
    assert text == "Answered from raw rows, hourly rollups (without tenant), daily rollups."
    hourly = rollup_source.coverage(cur, WINDOW, 3600, TZ)
    assert hourly is not None and "daily" not in hourly
    assert rollup_source.coverage(cur, Filter(start=WINDOW.start, end=WINDOW.start + 5 * H)) is None


def test_every_engine_from_one_scan_equals_one_query_per_engine(db):
    from app.analytics import overview_series

    cur = db.cursor()
    engines = overview_series.engines_in(cur, WINDOW)
    assert len(engines) >= 2
    percentiles = {e: q for e, q in zip(engines, (0.95, 0.5, 0.99, 0.9), strict=False)}
    together = overview_series.quantile_by_engine(cur, WINDOW, percentiles, "1d", TZ)
    assert together is not None and list(together) == list(percentiles)
    for engine, q in percentiles.items():
        alone = overview_series.quantile_over_time(
            cur, overview_series.for_engine(WINDOW, engine), "1d", TZ, q
        )
        got = together[engine]
        assert got["bucket"].tolist() == alone["bucket"].tolist()
        assert got["requests"].tolist() == alone["requests"].tolist()
        for m in overview_series.MEASURES:
            assert np.allclose(got[m], alone[m], equal_nan=True), (engine, m)
        assert got.attrs["relative_error"] == alone.attrs["relative_error"] > 0


def test_engines_are_ranked_from_the_rollups_when_raw_rows_are_gone(db):
    from app.analytics import overview_series

    cur = db.cursor()
    before = overview_series.engines_in(cur, WINDOW)
    whole = overview_series.engines_in(cur, Filter(start=WINDOW.start, end=WINDOW.end), limit=2)
    assert whole == before[:2]
    # Seal the window's whole hours: their raw rows go, the rollups keep them.
    lo = WINDOW.start.replace(minute=0) + H
    hi = WINDOW.end.replace(minute=0)
    cur.execute("DELETE FROM requests WHERE started_at >= ? AND started_at < ?", [lo, hi])
    cur.execute("UPDATE rollup_hours SET source = 'sealed' WHERE hour >= ? AND hour < ?", [lo, hi])
    assert overview_series.engines_in(cur, WINDOW) == before


def _derived_equal_daily(cur) -> None:
    """Every derived tier's rows are its daily rows regrouped (counts, sums, maxima, bad)."""
    from app.storage.schema import DERIVED

    for tier, (_, dims) in DERIVED.items():
        for kind in tiers.KINDS:
            cols = [c for c in tiers.columns(tier, kind) if c != "bad"]
            keys = ["hour", *dims, *tiers.KEYS[kind]]
            sums = [c for c in cols if c not in keys]
            agg = ", ".join(f"max({c})" if c == "vmax" else f"round(sum({c}), 6)" for c in sums)
            extra = (
                ", round(sum(CASE WHEN status <> 'ok' THEN w ELSE 0 END), 6)"
                if (kind == "values")
                else ""
            )
            mine = ", ".join(f"max({c})" if c == "vmax" else f"round(sum({c}), 6)" for c in sums)
            bad = ", round(sum(bad), 6)" if kind == "values" else ""
            k = ", ".join(keys)
            daily = cur.execute(
                f"SELECT {k}, {agg}{extra} FROM {tiers.table('daily', kind)} GROUP BY ALL "
                "HAVING sum(n) > 0 ORDER BY ALL"
            ).fetchall()
            derived = cur.execute(
                f"SELECT {k}, {mine}{bad} FROM {tiers.table(tier, kind)} GROUP BY ALL ORDER BY ALL"
            ).fetchall()
            assert derived == daily, (tier, kind)
            assert derived, (tier, kind)


def test_derived_tiers_follow_the_daily_tier_and_answer_only_what_they_keep(db):
    from app.analytics.rollups import sql as rollup_sql

    cur = db.cursor()
    _derived_equal_daily(cur)
    sp = rollup_source.split(cur, WINDOW)
    daily = [p for p in sp.parts if p.tier == "daily"]
    assert daily and daily[0].derived
    src, _ = rollup_sql.rolled(WINDOW, sp, "values")
    assert "rollup_dall_values" in src
    by_engine, _ = rollup_sql.rolled(Filter(engines=("x",)), sp, "values")
    assert "rollup_dme_values" in by_engine and "rollup_dall_" not in by_engine
    by_gateway, _ = rollup_sql.rolled(Filter(gateways=("x",)), sp, "values")
    assert "rollup_day_values" in by_gateway and "rollup_dme_" not in by_gateway
    grouped, _ = rollup_sql.rolled(WINDOW, sp, "values", ("model",))
    assert "rollup_dme_values" in grouped
    # A day rebuilt after its derived rows (a path that forgot to derive) is read daily.
    day = cur.execute("SELECT max(day) FROM rollup_derived").fetchone()[0]
    cur.execute(
        "UPDATE rollup_hours SET built_at = built_at + INTERVAL 1 HOUR WHERE day = ?", [day]
    )
    cur.execute("UPDATE rollup_derived SET built_at = built_at - INTERVAL 1 HOUR")
    stale = rollup_source.split(cur, WINDOW)
    assert not [p for p in stale.parts if p.tier == "daily" and p.derived]


def test_a_late_row_folded_into_a_sealed_day_reaches_the_derived_tiers(db):
    from app.storage import retention
    from app.storage.rollups import rebuild_all
    from tests.support.records import record, store

    cur = db.cursor()
    # Whole hours: a window's partial end hours are read raw, and these raw rows go.
    whole = Filter(start=datetime(2026, 10, 28, 5, tzinfo=UTC), end=WINDOW.end.replace(minute=0))
    before = overview.kpis(cur, whole, exact=False)["requests"]
    # Raw rows older than 2 days go; their hours are sealed, the rollups keep them.
    retention.prune(db.new_cursor(), END, request_days=2, reject_days=0, tz=TZ)
    assert cur.execute("SELECT count(*) FROM rollup_hours WHERE source = 'sealed'").fetchone()[0]
    late = datetime(2026, 11, 1, 12, 30, tzinfo=UTC)  # a sealed hour of a whole day
    store(db, [record(900_000 + i, started_at=late.isoformat()) for i in range(3)])
    rebuild_all(db.new_cursor(), TZ)
    _derived_equal_daily(cur)
    assert overview.kpis(cur, whole, exact=False)["requests"] == before + 3
    # The daily tier's retention takes the derived rows and stamps of its days with it.
    tiers.prune(db.new_cursor(), END, hourly_days=1, hourly_nt_days=2, daily_days=3)
    _derived_equal_daily(cur)
    kept = cur.execute("SELECT count(*) FROM rollup_derived").fetchone()[0]
    days = cur.execute("SELECT count(DISTINCT day) FROM rollup_hours WHERE in_day").fetchone()[0]
    assert kept == days


def test_whole_days_kept_across_requests_answer_as_the_window_read_whole(db):
    from app.analytics.rollups import sql as rollup_sql
    from app.storage.rollups import rebuild_all
    from tests.support.records import record, store

    cur = db.cursor()
    sp = rollup_source.local_split(cur, WINDOW, TZ, 86400)
    assert {p.tier for p in sp.parts} >= {"daily", "hourly_nt"} and sp.raw
    args = (86400, TZ, ("ttft_ms", "itl_ms"), (0.5, 0.95), None, ())

    def whole() -> tuple:
        frame, stats = rollup_sql._series_by(cur, WINDOW, sp, *args)[None]
        return frame["bucket"].tolist(), frame["requests"].tolist(), stats

    def pieces() -> tuple:
        frame, stats = rollup_sql.values_over_time_by(cur, WINDOW, sp, *args[:4])[None]
        return frame["bucket"].tolist(), frame["requests"].tolist(), stats

    first, again, truth = pieces(), pieces(), whole()
    for got in (first, again):
        assert got[0] == truth[0] and got[1] == truth[1]
        for m in truth[2]:
            assert np.allclose(got[2][m], truth[2][m], equal_nan=True)
    # A late row in a whole day rebuilds it: the kept answer is not used again.
    late = datetime(2026, 11, 2, 15, 30, tzinfo=UTC)
    store(db, [record(800_000, started_at=late.isoformat(), ttft_ms=5.0)])
    rebuild_all(db.new_cursor(), TZ)
    sp = rollup_source.local_split(cur, WINDOW, TZ, 86400)
    after = pieces()
    assert sum(after[1]) == sum(first[1]) + 1
    assert after[1] == whole()[1]


def test_a_series_split_by_engine_keeps_only_the_engines_asked_for(db):
    from app.analytics.rollups import sql as rollup_sql

    cur = db.cursor()
    engines = tuple(rollup_sql.busiest(cur, WINDOW, rollup_source.split(cur, WINDOW), "engine", 9))
    sp = rollup_source.local_split(cur, WINDOW, TZ, 86400)
    asked = engines[:2]
    found = rollup_sql.values_over_time_by(
        cur, WINDOW, sp, 86400, TZ, ("ttft_ms",), (0.5,), "engine", asked
    )
    assert set(found) == set(asked)
    for engine in asked:
        alone = rollup_sql.values_over_time(
            cur,
            Filter(start=WINDOW.start, end=WINDOW.end, engines=(engine,)),
            sp,
            86400,
            TZ,
            ("ttft_ms",),
            (0.5,),
        )
        assert found[engine][0]["requests"].tolist() == alone[0]["requests"].tolist()
    # No rollup row in the split: no count from the rollups (a raw interval alone is raw).
    empty = rollup_source.Split(WINDOW.start, WINDOW.end, [], [(WINDOW.start, WINDOW.end)], [])
    assert rollup_sql.request_count(cur, WINDOW, empty) is None
    assert rollup_sql.totals(cur, WINDOW, empty) is None
