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
