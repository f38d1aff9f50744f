"""Series split by a dimension (app/analytics/split.py and its latency/traffic users) on
hand-made data, checked with numpy: the top values and "the rest", queueing time, the
prefix-cache hit rate, and the TTFT fit per model."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analytics import latency, split, traffic
from app.analytics.filters import Filter
from app.storage.database import Database
from app.storage.rollups import RELATIVE_ERROR
from tests.support.database import copy_database, open_migrated
from tests.support.records import BASE_TIME, record, store

# Ten models: model-k has 12 - k requests (so model-0 is the busiest), spread over two hours;
# TTFT is (k + 1) ms per input token plus 30 ms; every other request reports queue_ms; engine
# e-a reports cached_tokens (a quarter of the prompt), e-b does not.
MODELS = [f"model-{k}" for k in range(10)]


def _records() -> list[dict]:
    recs = []
    i = 0
    for k, model in enumerate(MODELS):
        for j in range(12 - k):
            isl = 100 + 50 * j
            rec = record(
                i,
                model=model,
                engine="e-a" if k % 2 == 0 else "e-b",
                tenant=f"t-{j % 3}",
                isl=isl,
                ttft_ms=30.0 + (k + 1) * isl,
                itl_ms=5.0 + k,
                e2e_ms=30_000.0 + j,
            )
            rec["started_at"] = (BASE_TIME + timedelta(minutes=10 * (j % 12))).isoformat()
            if i % 2 == 0:
                rec["queue_ms"] = float(i)
            if k % 2 == 0:
                rec["cached_tokens"] = isl // 4
            recs.append(rec)
            i += 1
    return recs


RECS = _records()


@pytest.fixture
def db(database):
    store(database, RECS)
    return database


def test_a_bad_split_is_refused_by_name():
    with pytest.raises(ValueError, match="'colour'"):
        split.check("colour")
    with pytest.raises(ValueError, match="model, engine, tenant, gateway"):
        split.key_sql("model; DROP TABLE requests", ())


def test_top_eight_models_and_one_series_of_the_rest(db):
    cur = db.cursor()
    assert split.top_values(cur, Filter(), "model") == tuple(MODELS[:8])
    found = latency.trend_by(cur, Filter(), "1h", "UTC", "model")
    names = [name for name, _ in found.series]
    assert names == [*MODELS[:8], split.OTHER]
    assert found.raw and not found.sampled and found.relative_error == 0
    counts = {name: int(frame["requests"].sum()) for name, frame in found.series}
    assert counts["model-0"] == 12 and counts["model-7"] == 5
    assert counts[split.OTHER] == 4 + 3  # model-8 and model-9
    assert found.requests == len(RECS)
    # Each series' percentiles are its own rows' (numpy's linear method is quantile_cont's).
    frame = dict(found.series)["model-0"]
    first_hour = [
        r["ttft_ms"] for r in RECS if r["model"] == "model-0" and r["started_at"] < "2026-11-20T13"
    ]
    assert frame["ttft_ms_p90"][0] == pytest.approx(np.percentile(first_hour, 90))


def test_the_rest_counts_rows_without_a_value(db):
    store(db, [record(900, engine=None, model="model-0")], gateway="gw-2")
    found = traffic.requests_by(db.cursor(), Filter(), "1h", "UTC", "engine", limit=1)
    counts = {name: int(frame["requests"].sum()) for name, frame in found.series}
    assert counts == {"e-a": 12 + 10 + 8 + 6 + 4, split.OTHER: 11 + 9 + 7 + 5 + 3 + 1}
    frame = dict(found.series)["e-a"]
    assert frame["requests_per_s"].tolist() == pytest.approx((frame["requests"] / 3600).tolist())


def test_split_by_tenant_reads_raw_rows(db):
    found = traffic.requests_by(db.cursor(), Filter(), "1h", "UTC", "tenant")
    assert found.raw and [name for name, _ in found.series] == ["t-0", "t-1", "t-2"]
    assert found.requests == len(RECS)


def test_queueing_time_of_the_requests_that_report_it(db):
    cur = db.cursor()
    assert split.reporting(cur, Filter(), "queue_ms") == (len(RECS) // 2 + len(RECS) % 2, 75)
    found = latency.queue_over_time(cur, Filter(), "1h", "UTC")
    ((name, frame),) = found.series
    assert name == "all" and int(frame["requests"].sum()) == 38
    waits = [r["queue_ms"] for r in RECS if "queue_ms" in r and r["started_at"] < "2026-11-20T13"]
    assert frame["queue_ms_p95"][0] == pytest.approx(np.percentile(waits, 95))
    assert frame["queue_ms_p50"][0] == pytest.approx(np.percentile(waits, 50))
    by_model = latency.queue_over_time(cur, Filter(), "1h", "UTC", "model", limit=2)
    assert [n for n, _ in by_model.series] == ["model-0", "model-1", split.OTHER]


def test_prefix_cache_hit_rate_per_engine(db):
    cur = db.cursor()
    with_cache = [r for r in RECS if "cached_tokens" in r]
    assert split.reporting(cur, Filter(), "cached_tokens") == (len(with_cache), len(RECS))
    found = traffic.cache_hits(cur, Filter(), "1d", "UTC")
    ((name, frame),) = found.series  # e-b reports none: no series of its own, nor of the rest
    assert name == "e-a"
    want = sum(r["cached_tokens"] for r in with_cache) / sum(r["isl"] for r in with_cache)
    assert frame["hit_rate"][0] == pytest.approx(want)
    assert int(frame["requests"][0]) == len(with_cache)


def test_ttft_is_fitted_per_model_never_pooled(db):
    fits, error = latency.ttft_fits(db.cursor(), Filter())
    assert error == 0 and [f.model for f in fits] == MODELS[:8]
    for k, fit in enumerate(fits):
        assert fit.slope == pytest.approx(k + 1.0)  # ms per input token, as generated
        assert fit.intercept == pytest.approx(30.0)
        assert fit.requests == 12 - k
        assert int(fit.bins["requests"].sum()) == 12 - k
    first = fits[0].bins
    in_bin = [r["ttft_ms"] for r in RECS if r["model"] == "model-0" and 64 <= r["isl"] < 128]
    row = first[first["isl_from"] == 64].iloc[0]
    assert row["ttft_p50"] == pytest.approx(np.median(in_bin))
    # The pooled slope mixes the models' costs: what the per-model fit avoids.
    _, pooled = latency.ttft_vs_isl(db.cursor(), Filter())
    assert pooled is not None
    assert all(pooled / 1000 != pytest.approx(f.slope, rel=0.05) for f in fits)


def test_an_empty_window_has_no_series(db):
    flt = Filter(start=BASE_TIME - timedelta(days=9), end=BASE_TIME - timedelta(days=8))
    cur = db.cursor()
    assert latency.trend_by(cur, flt, "1h", "UTC", "model").series == []
    assert traffic.requests_by(cur, flt, "1h", "UTC", "gateway").series == []
    assert latency.queue_over_time(cur, flt, "1h", "UTC").series == []
    assert traffic.cache_hits(cur, flt, "1h", "UTC").series == []
    assert latency.ttft_fits(cur, flt) == ([], 0.0)
    assert split.reporting(cur, flt, "queue_ms") == (0, 0)


# The rollup path against raw rows: four days of demo traffic with its rollups built.
END = datetime(2026, 11, 23, tzinfo=UTC)


@pytest.fixture(scope="module")
def seeded(tmp_path_factory, demo_template) -> Iterator[Database]:
    template = demo_template(requests=20_000, days=4, end=END)
    path = copy_database(template, tmp_path_factory.mktemp("split") / "s.duckdb")
    with open_migrated(path) as database:
        yield database


@pytest.mark.parametrize("by", ["model", "engine", "gateway"])
def test_split_from_rollups_matches_raw_rows(seeded, by):
    cur = seeded.cursor()
    flt = Filter(start=END - timedelta(days=3, hours=5, minutes=17), end=END)
    got = latency.trend_by(cur, flt, "1h", "Europe/Berlin", by, limit=2)
    want = latency.trend_by(cur, flt, "1h", "Europe/Berlin", by, limit=2, exact=True)
    assert not got.raw and got.relative_error == pytest.approx(RELATIVE_ERROR) and want.raw
    assert [n for n, _ in got.series] == [n for n, _ in want.series]
    for (_, a), (_, b) in zip(got.series, want.series, strict=True):
        assert list(a["bucket"]) == list(b["bucket"])
        assert list(a["requests"]) == list(b["requests"])
        for column in ("ttft_ms_p90", "itl_ms_p50", "e2e_ms_p99"):
            x, y = a[column].to_numpy(dtype=float), b[column].to_numpy(dtype=float)
            assert np.array_equal(np.isnan(x), np.isnan(y))
            keep = ~np.isnan(y)
            assert x[keep] == pytest.approx(y[keep], rel=RELATIVE_ERROR + 1e-12)
    rolled = traffic.requests_by(cur, flt, "1d", "UTC", by, limit=2)
    raw, _ = split.raw_series(cur, flt, 86400, "UTC", by, split.top_values(cur, flt, by, 2))
    assert not rolled.raw
    for name, frame in rolled.series:
        key = 0 if name == split.OTHER else [n for n, _ in rolled.series].index(name) + 1
        assert list(frame["requests"]) == list(raw[key]["requests"])
    assert rolled.requests == sum(int(f["requests"].sum()) for f in raw.values())


def test_ttft_fits_from_rollups_match_raw_rows(seeded):
    cur = seeded.cursor()
    flt = Filter(start=END - timedelta(days=3, minutes=7), end=END)
    got, error = latency.ttft_fits(cur, flt)
    want, exact = latency.ttft_fits(cur, flt, exact=True)
    assert error == pytest.approx(RELATIVE_ERROR) and exact == 0 and len(want) >= 2
    assert [f.model for f in got] == [f.model for f in want]
    for a, b in zip(got, want, strict=True):
        assert a.requests == b.requests
        assert a.slope == pytest.approx(b.slope, rel=1e-6)
        assert a.intercept == pytest.approx(b.intercept, rel=1e-6)
        assert list(a.bins["requests"]) == list(b.bins["requests"])
        assert a.bins["ttft_p50"].tolist() == pytest.approx(
            b.bins["ttft_p50"].tolist(), rel=RELATIVE_ERROR + 1e-12
        )


def test_a_tenant_whose_requests_report_no_latency_has_gaps_not_an_error(database):
    """Raw rows (a tenant split) where a series' bucket has no TTFT or ITL at all: its
    quantiles are missing, not a failure (DuckDB's NULL list reads back as pandas' NA)."""
    quiet = [
        record(900 + i, tenant="t-quiet", ttft_ms=None, itl_ms=None, e2e_ms=None) for i in range(3)
    ]
    store(database, [*RECS, *quiet])
    found = latency.trend_by(database.cursor(), Filter(), "1h", "UTC", "tenant")
    series = dict(found.series)
    assert found.raw and "t-quiet" in series
    quiet_frame = series["t-quiet"]
    assert quiet_frame["requests"].sum() == 3
    assert quiet_frame.filter(like="ttft").isna().all().all()
