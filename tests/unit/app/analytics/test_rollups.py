"""Hourly rollups: every write marks its hours, rebuilds come from raw rows, and answers read
from rollups equal the raw answers (heat maps, four shapes) or stay within the stated bound
(quantiles) for any window, dirty hours and partial hours included."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone

import numpy as np
import pytest

from app.analytics import latency, shapes, traffic
from app.analytics import rollups as rollup_source
from app.analytics.filters import Filter
from app.analytics.rollups import sql
from app.storage import retention, rollups
from app.storage.database import Database
from tests.support.database import copy_database, open_migrated
from tests.support.records import record, store

END = datetime(2026, 11, 23, tzinfo=UTC)

H = timedelta(hours=1)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, demo_template) -> Iterator[Database]:
    """Four days of demo traffic with rollups built (as `tokenshape demo` leaves them)."""
    template = demo_template(requests=40_000, days=4, end=END)
    path = copy_database(template, tmp_path_factory.mktemp("rollups") / "r.duckdb")
    with open_migrated(path) as database:
        yield database


def _raw(cur, flt: Filter, monkeypatch) -> tuple:
    """The same views with rollups switched off: the exact reference."""
    with monkeypatch.context() as m:
        m.setattr(rollup_source, "split", lambda cur, flt: None)
        return (
            shapes.heatmap(cur, flt),
            shapes.heatmap(cur, flt, bins="log2half"),
            shapes.four_shapes(cur, flt),
            shapes.quantiles(cur, flt),
        )


WINDOWS = {
    "everything": Filter(),
    "whole days, one engine": Filter(start=END - 3 * 24 * H, end=END, engines=("llm-70b",)),
    "ragged ends": Filter(
        start=END - 80 * H + timedelta(minutes=17, seconds=3),
        end=END - 5 * H - timedelta(minutes=41),
        statuses=("ok",),
    ),
    "open start": Filter(end=END - 30 * H + timedelta(minutes=5)),
    "offset of +05:30": Filter(
        start=(END - 60 * H).astimezone(timezone(timedelta(hours=5, minutes=30))),
        end=(END - 2 * H + timedelta(minutes=10)).astimezone(timezone(timedelta(hours=-3))),
    ),
    "open end, two models": Filter(
        start=END - 50 * H - timedelta(seconds=1),
        models=("llama-3.1-8b-instruct", "llama-3.1-70b-instruct"),
    ),
}


@pytest.mark.parametrize("name", WINDOWS)
def test_rollup_answers_match_raw_rows(seeded, monkeypatch, name):
    flt = WINDOWS[name]
    cur = seeded.cursor()
    assert rollup_source.split(cur, flt) is not None  # the rollups are really used
    heat, half, four, q = (
        shapes.heatmap(cur, flt),
        shapes.heatmap(cur, flt, bins="log2half"),
        shapes.four_shapes(cur, flt),
        shapes.quantiles(cur, flt),
    )
    r_heat, r_half, r_four, r_q = _raw(cur, flt, monkeypatch)
    assert np.array_equal(heat.counts, r_heat.counts) and heat.total == r_heat.total
    assert np.array_equal(half.counts, r_half.counts)
    assert four == r_four
    assert r_heat.total > 0
    assert q.relative_error == pytest.approx(rollups.RELATIVE_ERROR) and r_q.relative_error == 0
    for measure, exact in r_q.items():
        assert q[measure]["max"] == exact["max"]  # maxima stay exact
        for k in ("p50", "p90", "p99", "p99.9"):
            assert q[measure][k] == pytest.approx(exact[k], rel=rollups.RELATIVE_ERROR + 1e-12)
    # ITL by output-token position: the same bins and gap counts, quantiles within the bound.
    pos, r_pos = latency.itl_by_position(cur, flt), latency.itl_by_position(cur, flt, exact=True)
    assert pos.attrs["relative_error"] == rollups.RELATIVE_ERROR
    assert r_pos.attrs["relative_error"] == 0 and r_pos["gaps"].sum() > 0
    assert list(pos["position_from"]) == list(r_pos["position_from"])
    assert list(pos["gaps"]) == list(r_pos["gaps"])
    for k in ("itl_p50", "itl_p90"):
        assert list(pos[k]) == pytest.approx(list(r_pos[k]), rel=rollups.RELATIVE_ERROR + 1e-12)
    # TTFT by input length: the same bins and counts, quantiles within the bound, the slope
    # exact but for rounding (sums instead of DuckDB's regr_slope).
    (ttft, slope), (r_ttft, r_slope) = (
        latency.ttft_vs_isl(cur, flt),
        latency.ttft_vs_isl(cur, flt, exact=True),
    )
    assert ttft.attrs["relative_error"] == rollups.RELATIVE_ERROR
    assert list(ttft["isl_from"]) == list(r_ttft["isl_from"])
    assert list(ttft["requests"]) == list(r_ttft["requests"]) and r_ttft["requests"].sum() > 0
    for k in ("ttft_p50", "ttft_p90"):
        assert list(ttft[k]) == pytest.approx(list(r_ttft[k]), rel=rollups.RELATIVE_ERROR + 1e-12)
    assert slope == pytest.approx(r_slope, rel=1e-6)
    # Latency trends per local hour and day: the same buckets and counts, percentiles within
    # the bound; a zone with a half-hour offset cannot sum UTC hours, so it reads raw rows.
    for bucket, tz in (("1h", "Europe/Berlin"), ("1d", "America/New_York"), ("1d", "UTC")):
        got, exact = _trends(cur, flt, bucket, tz)
        assert got.attrs["relative_error"] == rollups.RELATIVE_ERROR
        assert list(got["bucket"]) == list(exact["bucket"])
        assert list(got["requests"]) == list(exact["requests"]) and exact["requests"].sum() > 0
        for column in [c for c in exact.columns if c.endswith(("_p50", "_p90", "_p99"))]:
            want = exact[column].to_numpy(dtype=float)
            assert np.array_equal(np.isnan(got[column].to_numpy(dtype=float)), np.isnan(want))
            assert got[column].dropna().tolist() == pytest.approx(
                exact[column].dropna().tolist(), rel=rollups.RELATIVE_ERROR + 1e-12
            )
    assert latency.trend(cur, flt, "1d", "Asia/Kolkata").attrs["relative_error"] == 0
    # Traffic: rates per local hour and day and the weekday x hour matrix are exact.
    for tz in ("Europe/Berlin", "Asia/Kolkata"):
        for bucket in ("1h", "1d"):
            got = traffic.rates(cur, flt, bucket, tz)
            with monkeypatch.context() as m:
                m.setattr(rollup_source, "split", lambda cur, flt: None)
                want = traffic.rates(cur, flt, bucket, tz)
                matrix = traffic.hour_weekday(cur, flt, tz)
            assert got.to_dict("list") == want.to_dict("list") and want["requests"].sum() > 0
            assert np.array_equal(traffic.hour_weekday(cur, flt, tz), matrix)


def _trends(cur, flt: Filter, bucket: str, tz: str) -> tuple:
    return latency.trend(cur, flt, bucket, tz), latency.trend(cur, flt, bucket, tz, exact=True)


def test_dirty_hours_are_read_raw_until_rebuilt(seeded, monkeypatch):
    cur = seeded.cursor()
    flt = Filter(start=END - 3 * 24 * H, end=END)
    before = shapes.heatmap(cur, flt).total
    # Rows written into an hour whose rollup is already built: counted at once, raw.
    hour = END - 40 * H
    gaps_before = latency.itl_by_position(cur, flt)["gaps"].sum()
    recs = [
        record(
            i,
            "late",
            started_at=(hour + timedelta(seconds=i)).isoformat(),
            isl=5000 + i,
            token_gaps_ms=[20.0, 21.5, 19.0],
        )
        for i in range(25)
    ]
    store(seeded, recs, gateway="late-gw")
    assert latency.itl_by_position(cur, flt)["gaps"].sum() == gaps_before + 75
    sp = rollup_source.split(cur, flt)
    assert sp is not None and hour in sp.dirty
    assert shapes.heatmap(cur, flt).total == before + 25
    assert rollups.rebuild(cur, settle_s=3600) == 0  # not settled yet: left alone
    assert rollups.rebuild(cur, settle_s=0) >= 1
    assert hour not in rollup_source.split(cur, flt).dirty
    assert shapes.heatmap(cur, flt).total == before + 25
    r_heat, _, r_four, r_q = _raw(cur, flt, monkeypatch)
    assert np.array_equal(shapes.heatmap(cur, flt).counts, r_heat.counts)
    assert shapes.quantiles(cur, flt)["isl"]["max"] == r_q["isl"]["max"]
    assert latency.itl_by_position(cur, flt)["gaps"].sum() == gaps_before + 75


def test_short_windows_and_exact_requests_are_exact(seeded):
    cur = seeded.cursor()
    day = Filter(start=END - 23 * H, end=END)
    assert rollup_source.split(cur, day) is None
    assert shapes.quantiles(cur, day).relative_error == 0
    seasonal = Filter(start=END - 72 * H, end=END, hours=(9, 10))
    assert rollup_source.split(cur, seasonal) is None
    assert shapes.quantiles(cur, Filter(), exact=True).relative_error == 0


def test_a_prune_seals_the_hours_it_takes_and_the_rollups_go_on_counting_them(
    demo_template, tmp_path
):
    template = demo_template(requests=5_000, days=3, end=END)
    with open_migrated(copy_database(template, tmp_path / "p.duckdb")) as db:
        cur = db.cursor()
        assert rollups.hour_counts(cur)[1] == 0
        total = cur.execute("SELECT count(*) FROM requests").fetchall()[0][0]
        received = cur.execute("SELECT min(received_at) FROM requests").fetchall()[0][0]
        deleted, _ = retention.prune_table(cur, "requests", received + timedelta(microseconds=1))
        assert 0 < deleted < total
        assert rollups.hour_counts(cur)[1] == 0  # nothing to rebuild: the hours are sealed
        sources = dict(
            cur.execute("SELECT source, count(*) FROM rollup_hours GROUP BY 1").fetchall()
        )
        assert sources["sealed"] > 0
        # Raw rows of the sealed hours are gone whole; every request is still counted.
        left = cur.execute("SELECT count(*) FROM requests").fetchall()[0][0]
        assert left == total - deleted
        for table in ("rollup_shapes", "rollup_nt_shapes", "rollup_day_shapes"):
            assert cur.execute(f"SELECT sum(n) FROM {table}").fetchall()[0][0] == total
        assert shapes.heatmap(cur, Filter()).total == total


@pytest.mark.parametrize("name", ["everything", "ragged ends", "open end, two models"])
def test_overview_numbers_from_rollups_match_the_exact_ones(seeded, name):
    from app.analytics import overview

    flt = WINDOWS[name]
    cur = seeded.cursor()
    fast, exact = overview.kpis(cur, flt, exact=False), overview.kpis(cur, flt)
    assert fast["relative_error"] == pytest.approx(rollups.RELATIVE_ERROR)
    assert exact["relative_error"] == 0
    for key in ("requests", "input_tokens", "output_tokens"):
        assert fast[key] == exact[key]  # counts and sums stay exact
    assert fast["error_rate"] == pytest.approx(exact["error_rate"], rel=1e-12)
    for key, value in exact.items():
        if key.endswith(("_p50", "_p95", "_p99")):
            assert fast[key] == pytest.approx(value, rel=rollups.RELATIVE_ERROR + 1e-12), key
    rolled, raw = overview.per_model(cur, flt, exact=False), overview.per_model(cur, flt)
    assert rolled.attrs["relative_error"] > 0 and raw.attrs["relative_error"] == 0
    assert rolled["model"].tolist() == raw["model"].tolist()
    assert rolled["requests"].tolist() == raw["requests"].tolist()
    assert rolled["error_share"].to_numpy() == pytest.approx(raw["error_share"].to_numpy())
    for column in ("isl_p50", "isl_p99", "osl_p50", "osl_p99", "ttft_p50_ms", "ttft_p99_ms"):
        assert rolled[column].to_numpy() == pytest.approx(
            raw[column].to_numpy(), rel=rollups.RELATIVE_ERROR + 1e-12
        ), column


def test_absurd_values_do_not_stop_the_rebuild(fresh_db, tmp_path):
    """A latency of 1e-300 or 1e300 ms passes validation (finite, not negative): its hour
    must still be rolled up, not fail the rebuild of every hour queued with it."""
    with fresh_db(tmp_path / "a.duckdb") as db:
        t0 = datetime(2026, 11, 10, 6, tzinfo=UTC)
        recs = [
            record(i, "odd", started_at=(t0 + i * H).isoformat(), ttft_ms=v, e2e_ms=1e301)
            for i, v in enumerate((1e-300, 1e300, 0.0, 5.0))
        ]
        store(db, recs, gateway="odd")
        cur = db.cursor()
        assert rollups.rebuild_all(cur) == 4
        q = shapes.quantiles(cur, Filter(), exact=False)
        assert q.relative_error > 0 and q["ttft_ms"]["max"] == 1e300
        assert shapes.heatmap(cur, Filter()).total == 4


def test_rollup_hours_are_utc_hours_whatever_the_connection_time_zone(
    fresh_db, tmp_path, monkeypatch
):
    """DuckDB cuts a TIMESTAMPTZ in the connection's zone (the host's by default): at +05:30
    a bare date_trunc would make rollup "hours" start at :30 UTC."""
    with fresh_db(tmp_path / "tz.duckdb") as db:
        cur = db.cursor()
        cur.execute("SET TimeZone = 'Asia/Kolkata'")
        t0 = datetime(2026, 11, 10, 0, tzinfo=UTC)
        recs = [
            record(i, "tz", started_at=(t0 + i * timedelta(minutes=10)).isoformat())
            for i in range(6 * 40)
        ]
        store(db, recs, gateway="tz")
        rollups.rebuild_all(cur)
        minutes = {
            h.astimezone(UTC).minute
            for (h,) in cur.execute("SELECT DISTINCT hour FROM rollup_shapes").fetchall()
        }
        assert minutes == {0}
        flt = Filter(
            start=t0 + 2 * H + timedelta(minutes=5), end=t0 + 29 * H + timedelta(minutes=45)
        )
        assert rollup_source.split(cur, flt) is not None
        r_heat, _, r_four, _ = _raw(cur, flt, monkeypatch)
        assert shapes.heatmap(cur, flt).total == r_heat.total == 166
        assert shapes.four_shapes(cur, flt) == r_four


def test_an_open_ended_short_window_is_exact(seeded):
    recent = Filter(start=datetime.now(UTC) - 3 * H)  # "the last 3 hours": end is now
    assert rollup_source.split(seeded.cursor(), recent) is None
    naive = Filter(start=datetime(2026, 11, 19, 5, 30), end=datetime(2026, 11, 22, 7, 10))
    assert rollup_source.split(seeded.cursor(), naive) is not None  # naive means UTC


def test_local_hours_and_days_come_from_rollups_only_in_whole_hour_zones(seeded):
    """A UTC hour lies inside one local hour only where the offset is whole hours: in November
    Adelaide is +10:30, Kolkata +05:30 and Kathmandu +05:45, so they read raw rows."""
    cur = seeded.cursor()
    flt = Filter(start=END - 72 * H, end=END)
    for tz in ("UTC", "Europe/Berlin", "America/New_York"):
        assert rollup_source.local_split(cur, flt, tz) is not None
    for tz in ("Asia/Kolkata", "Asia/Kathmandu", "Australia/Adelaide"):
        assert rollup_source.local_split(cur, flt, tz) is None


@pytest.fixture()
def scattered(tmp_path, demo_template) -> Iterator[Database]:
    """The four days with one late row in each of 30 scattered hours (rollups built before):
    30 raw intervals and about as many runs of clean hours between them."""
    template = demo_template(requests=40_000, days=4, end=END)
    with open_migrated(copy_database(template, tmp_path / "s.duckdb")) as database:
        hours = [END - (3 + 3 * k) * H for k in range(30)]
        recs = [
            record(i, "late", started_at=(h + timedelta(minutes=7)).isoformat(), isl=700 + i)
            for i, h in enumerate(hours)
        ]
        store(database, recs, gateway="late-gw")
        yield database


@pytest.mark.parametrize(
    ("window", "hours_listed"),
    [
        ((END - 4 * 24 * H, END), True),  # the raw rows hash-joined on their UTC hour
        ((END - 4 * 24 * H + timedelta(minutes=30), END - timedelta(minutes=17)), True),  # cut
        ((None, None), True),
        ((END - 4 * 24 * H, END), False),  # too many hours to list: the range join
    ],
)
def test_many_scattered_stale_hours_read_as_one_select_each_and_still_match(
    scattered, monkeypatch, window, hours_listed
):
    if not hours_listed:
        monkeypatch.setattr(sql, "MAX_RAW_HOURS", 0)
    cur = scattered.cursor()
    flt = Filter(start=window[0], end=window[1])
    sp = rollup_source.split(cur, flt)
    assert sp is not None and len(sp.raw) > sql.MERGE_RAW_OVER
    assert (sql._interval_hours(sp.raw) is not None) == hours_listed
    assert len(sp.parts) > sql.MERGE_RAW_OVER  # the runs of clean hours between them too
    heat, four, q = (
        shapes.heatmap(cur, flt),
        shapes.four_shapes(cur, flt),
        shapes.quantiles(cur, flt),
    )
    r_heat, _, r_four, r_q = _raw(cur, flt, monkeypatch)
    assert np.array_equal(heat.counts, r_heat.counts) and heat.total == r_heat.total
    assert four == r_four
    for measure, exact in r_q.items():
        assert q[measure]["max"] == exact["max"]
    got, exact = _trends(cur, flt, "1h", "UTC")
    assert list(got["requests"]) == list(exact["requests"])
    with monkeypatch.context() as m:
        m.setattr(rollup_source, "split", lambda cur, flt: None)
        want = traffic.rates(cur, flt, "1h", "UTC")
    assert traffic.rates(cur, flt, "1h", "UTC").to_dict("list") == want.to_dict("list")
