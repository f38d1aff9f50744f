"""Sampled rows (app/analytics/weighted.py, sampling.py): a row kept with probability 1/k
answers every view exactly as k copies of it do, on raw rows and on the hourly rollups, and
weighted quantiles match numpy's on the repeated values."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analytics import (
    drift,
    engine_load,
    latency,
    load,
    mix,
    overview,
    sampling,
    seasonal,
    shapes,
    traffic,
    weighted,
)
from app.analytics import rollups as rollup_source
from app.analytics.bins import LOG2_EDGES
from app.analytics.filters import Filter
from app.storage import rollups
from app.storage.database import Database
from tests.support.records import record, store

START = datetime(2026, 11, 20, tzinfo=UTC)
N = 360
LONG = Filter(start=START, end=START + timedelta(days=3))  # rollups (whole clean hours)
SHORT = Filter(start=START + timedelta(hours=30), end=START + timedelta(hours=36))  # raw rows
MODELS = ("llama-3.1-8b-instruct", "llama-3.1-70b-instruct")


def _rows() -> list[tuple[dict, int]]:
    """(record, k): N varied records over three days, each standing for k requests."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(N):
        ttft = float(np.round(rng.lognormal(5, 0.6), 1))
        osl = int(rng.integers(1, 400))
        rec = record(
            i,
            "s",
            started_at=(START + timedelta(seconds=int(i * 3 * 86400 / N) + 17)).isoformat(),
            model=MODELS[i % 2],
            engine=("chat-8b", "chat-70b")[i % 2],
            isl=int(rng.lognormal(6.5, 1.2)),
            osl=osl,
            ttft_ms=ttft,
            e2e_ms=ttft + float(np.round(rng.lognormal(7, 0.5), 1)),
            itl_ms=float(np.round(rng.lognormal(2.5, 0.3), 2)),
            status="error" if i % 13 == 0 else "ok",
            token_gaps_ms=[float(g) for g in np.round(rng.lognormal(2.5, 0.4, 6), 2)],
        )
        out.append((rec, int(rng.integers(1, 5))))
    return out


def _seed(db: Database, sampled: bool) -> None:
    records = []
    for rec, k in _rows():
        if sampled:
            records.append({**rec, "sample_rate": 1 / k})
        else:  # the k requests the sampled row stands for
            records += [{**rec, "request_id": f"{rec['request_id']}-{c}"} for c in range(k)]
    store(db, records)
    con = db.new_cursor()
    try:
        rollups.rebuild_all(con)
    finally:
        con.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory, db_template) -> Iterator[tuple[Database, Database]]:
    """(the sampled database, the same traffic stored unsampled, row by row)."""
    from tests.support.database import copy_database, open_migrated

    base = tmp_path_factory.mktemp("sampling")
    with (
        open_migrated(copy_database(db_template, base / "s.duckdb")) as sampled_db,
        open_migrated(copy_database(db_template, base / "u.duckdb")) as full_db,
    ):
        _seed(sampled_db, True)
        _seed(full_db, False)
        yield sampled_db, full_db


def _close(a, b) -> None:
    """Equal views: numbers within float rounding, everything else exactly."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _close(a[key], b[key])
    elif isinstance(a, list | tuple):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            _close(x, y)
    elif isinstance(a, np.ndarray):
        np.testing.assert_allclose(a.astype(float), b.astype(float), rtol=1e-9)
    elif isinstance(a, float | int) and not isinstance(a, bool) and a is not None:
        assert b is not None and a == pytest.approx(b, rel=1e-9, abs=1e-9)
    else:
        assert a == b


def _frames_equal(a, b) -> None:
    assert list(a.columns) == list(b.columns)
    assert len(a) == len(b)
    for column in a.columns:
        left, right = a[column].tolist(), b[column].tolist()
        for x, y in zip(left, right, strict=True):
            if isinstance(x, float) and np.isnan(x):
                assert isinstance(y, float) and np.isnan(y), column
            else:
                _close(x, y)


@pytest.mark.parametrize("flt", [SHORT, LONG], ids=["raw", "rollups"])
def test_a_row_of_rate_one_in_k_answers_as_k_copies_of_it(pair, flt):
    sampled_db, full_db = pair
    s, f = sampled_db.cursor(), full_db.cursor()
    assert weighted.is_sampled(s, flt) and not weighted.is_sampled(f, flt)
    for bins in ("log2", "log2half", "linear"):
        width = {"isl_width": 256, "osl_width": 64} if bins == "linear" else {}
        a, b = (
            shapes.heatmap(s, flt, bins=bins, **width),
            shapes.heatmap(f, flt, bins=bins, **width),
        )
        assert a.total == b.total and (a.counts == b.counts).all()
        assert a.counts.dtype == np.int64  # counts stay whole requests
    assert shapes.four_shapes(s, flt) == shapes.four_shapes(f, flt)
    assert shapes.four_shapes(s, flt, long_isl=1000, long_osl=100) == shapes.four_shapes(
        f, flt, long_isl=1000, long_osl=100
    )
    _close(dict(shapes.quantiles(s, flt)), dict(shapes.quantiles(f, flt)))
    _close(dict(shapes.quantiles(s, flt, exact=True)), dict(shapes.quantiles(f, flt, exact=True)))
    for exact in (True, False):
        _close(overview.kpis(s, flt, exact=exact), overview.kpis(f, flt, exact=exact))
        _frames_equal(
            overview.per_model(s, flt, exact=exact), overview.per_model(f, flt, exact=exact)
        )
        _frames_equal(
            latency.trend(s, flt, "1h", "UTC", exact=exact),
            latency.trend(f, flt, "1h", "UTC", exact=exact),
        )
        a, slope_a = latency.ttft_vs_isl(s, flt, exact=exact)
        b, slope_b = latency.ttft_vs_isl(f, flt, exact=exact)
        _frames_equal(a, b)
        assert slope_a == pytest.approx(slope_b, rel=1e-6)
        _frames_equal(
            latency.itl_by_position(s, flt, exact=exact),
            latency.itl_by_position(f, flt, exact=exact),
        )
    _frames_equal(latency.trend(s, flt, "5m", "UTC"), latency.trend(f, flt, "5m", "UTC"))
    _frames_equal(latency.e2e_distribution(s, flt), latency.e2e_distribution(f, flt))
    for bucket in ("5m", "1h", "1d"):
        _frames_equal(traffic.rates(s, flt, bucket, "UTC"), traffic.rates(f, flt, bucket, "UTC"))
    assert (traffic.hour_weekday(s, flt, "UTC") == traffic.hour_weekday(f, flt, "UTC")).all()


def test_rightsizing_and_seasonal_inputs_weigh_sampled_rows(pair):
    sampled_db, full_db = pair
    s, f = sampled_db.cursor(), full_db.cursor()
    flt = Filter(start=START, end=START + timedelta(days=3), engines=("chat-8b",))
    _close(engine_load.engine_load(s, flt, 0.99), engine_load.engine_load(f, flt, 0.99))
    bounds = [(1024, 2048), (None, 4096), (None, None)]
    assert engine_load.rejected(s, flt, bounds) == engine_load.rejected(f, flt, bounds)
    assert mix.shape_mix(s, flt) == mix.shape_mix(f, flt)
    _close(mix.mean_in_flight(s, flt), mix.mean_in_flight(f, flt))
    _close(mix.peak_hour_in_flight(s, flt), mix.peak_hour_in_flight(f, flt))
    a, b = seasonal.hourly_load(s, flt, "UTC", 64), seasonal.hourly_load(f, flt, "UTC", 64)
    _close(sorted(a["cells"]), sorted(b["cells"]))
    for name in ("isl", "osl", "seq"):
        assert (a["hist"][name] == b["hist"][name]).all()
    _close(a["footprint_sum"], b["footprint_sum"])
    _close(a["count"], b["count"])
    _close(a["quantiles"], b["quantiles"])
    end = START + timedelta(days=3)
    _close(drift.engine_weeks(s, "chat-8b", end), drift.engine_weeks(f, "chat-8b", end))
    _close(overview.span(s)["requests"], overview.span(f)["requests"])


def test_weighted_quantiles_match_numpy_on_repeated_rows(pair):
    sampled_db, _ = pair
    cur = sampled_db.cursor()
    rows = _rows()
    qs = (0.0, 0.1, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)
    found = weighted.quantiles(cur, "requests", [], (), ("ttft_ms", "isl + osl"), qs)
    ttft = np.repeat([r["ttft_ms"] for r, _ in rows], [k for _, k in rows])
    seq = np.repeat([r["isl"] + r["osl"] for r, _ in rows], [k for _, k in rows])
    np.testing.assert_allclose(found[("ttft_ms",)], np.quantile(ttft, qs), rtol=1e-12)
    np.testing.assert_allclose(found[("isl + osl",)], np.quantile(seq, qs), rtol=1e-12)
    # Exact views use the same definition: shapes.quantiles on a short (raw) window.
    window = [
        (r, k)
        for r, k in rows
        if SHORT.start <= datetime.fromisoformat(r["started_at"]) < SHORT.end
    ]
    e2e = np.repeat([r["e2e_ms"] for r, _ in window], [k for _, k in window])
    got = shapes.quantiles(cur, SHORT)["e2e_ms"]
    np.testing.assert_allclose(
        [got["p50"], got["p90"], got["p99"], got["p99.9"], got["max"]],
        [*np.quantile(e2e, shapes.QUANTILES), e2e.max()],
        rtol=1e-12,
    )


def test_rollup_answers_on_sampled_rows_equal_the_raw_weighted_ones(pair, monkeypatch):
    sampled_db, _ = pair
    cur = sampled_db.cursor()
    rolled = (
        shapes.heatmap(cur, LONG),
        shapes.four_shapes(cur, LONG),
        traffic.rates(cur, LONG, "1h", "UTC"),
    )
    with monkeypatch.context() as m:
        m.setattr(rollup_source, "split", lambda cur, flt: None)
        m.setattr(rollup_source, "local_split", lambda cur, flt, tz, seconds=3600: None)
        raw = (
            shapes.heatmap(cur, LONG),
            shapes.four_shapes(cur, LONG),
            traffic.rates(cur, LONG, "1h", "UTC"),
        )
    assert (rolled[0].counts == raw[0].counts).all() and rolled[1] == raw[1]
    _frames_equal(rolled[2], raw[2])
    approx, exact = shapes.quantiles(cur, LONG), shapes.quantiles(cur, LONG, exact=True)
    assert approx.relative_error > 0
    for measure, values in exact.items():
        for name, value in values.items():
            assert approx[measure][name] == pytest.approx(value, rel=approx.relative_error + 1e-9)


def test_sample_info_says_how_the_window_was_sampled(pair, database):
    sampled_db, full_db = pair
    info = sampling.sampling(sampled_db.cursor(), LONG)
    rows = _rows()
    assert info.rows == N
    assert info.estimated_requests == sum(k for _, k in rows)
    assert info.min_rate == pytest.approx(0.25) and info.max_rate == 1.0
    assert info.sampled
    assert (
        info.note()
        == f"estimated from a 25%–100% sample of {info.estimated_requests:,} requests ({N} stored)"
    )
    full = sampling.sampling(full_db.cursor(), LONG)
    assert not full.sampled and full.note() is None
    assert full.rows == full.estimated_requests == info.estimated_requests
    empty = sampling.sampling(database.cursor(), LONG)
    assert empty == sampling.SampleInfo(0, 0, None, None) and empty.note() is None
    one = sampling.SampleInfo(23_000, 2_300_000, 0.01, 0.01)
    assert one.note() == "estimated from a 1% sample of 2.3M requests (23,000 stored)"
    assert sampling.percent(0.001) == "0.1%" and sampling.percent(0.125) == "12.5%"
    assert sampling.compact(812) == "812" and sampling.compact(45_200) == "45.2k"


def test_a_sampled_request_stands_for_one_over_p_requests_in_flight(pair):
    sampled_db, full_db = pair
    s, f = sampled_db.cursor(), full_db.cursor()
    flt = Filter(start=START + timedelta(hours=20), end=START + timedelta(hours=44))
    _frames_equal(load.latency_by_inflight(s, flt), load.latency_by_inflight(f, flt))
    _frames_equal(
        load.latency_by_inflight(s, flt, isl_edges=LOG2_EDGES, per_engine=False),
        load.latency_by_inflight(f, flt, isl_edges=LOG2_EDGES, per_engine=False),
    )
    _frames_equal(load.inflight_series(s, flt, "1h"), load.inflight_series(f, flt, "1h"))
    a, b = load.load_views(s, flt), load.load_views(f, flt)
    _frames_equal(a.series, b.series)
    _frames_equal(a.levels, b.levels)
    levels_a, shapes_a = load.levels_and_shapes(s, flt)
    levels_b, shapes_b = load.levels_and_shapes(f, flt)
    _frames_equal(levels_a, levels_b)
    assert shapes_a["requests"].sum() == shapes_b["requests"].sum()
    # The load classes are thirds of the stored arrivals, so only the totals must agree.
    split_a, split_b = load.ttft_by_isl_and_load(s, flt, LOG2_EDGES), a.split
    assert split_a["requests"].sum() == split_b["requests"].sum() == b.split["requests"].sum()
    assert split_a["ttft_p50"].notna().all()
