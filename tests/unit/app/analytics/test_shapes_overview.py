"""Analytics on small hand-made data, checked against numpy computed independently."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from app.analytics import shapes
from app.analytics.bins import LOG2_EDGES, edges_for, half_octave_edges
from app.analytics.filters import Filter
from tests.support.records import BASE_TIME, record, store

# Values exactly on edges, zero, just below edges, and past the last edge.
ISL = [0, 15, 16, 31, 32, 1023, 1024, 1025, 4096, 131071, 131072, 500_000]
OSL = [0, 0, 1, 16, 255, 256, 300, 64, 0, 5000, 131072, 7]


@pytest.fixture
def db(database):
    recs = [record(i, isl=isl, osl=osl) for i, (isl, osl) in enumerate(zip(ISL, OSL, strict=True))]
    recs[3].update(ttft_ms=None, e2e_ms=None, itl_ms=None)  # nulls in latency columns
    recs[5]["model"] = "other-model"
    recs[6]["status"] = "error"
    store(database, recs)
    return database


def _expected_bins(values, edges):
    # Independent of the SQL: numpy's searchsorted on the lower edges.
    return np.searchsorted(np.asarray(edges), np.asarray(values), side="right") - 1


def test_heatmap_log2_matches_numpy_including_edges(db):
    hm = shapes.heatmap(db.cursor(), Filter())
    expected = np.zeros((len(LOG2_EDGES), len(LOG2_EDGES)), dtype=int)
    np.add.at(expected, (_expected_bins(ISL, LOG2_EDGES), _expected_bins(OSL, LOG2_EDGES)), 1)
    assert hm.total == len(ISL)
    assert (hm.counts == expected).all()
    assert hm.counts[LOG2_EDGES.index(16), 0] == 1  # isl 16 is in [16, 32), not [0, 16)
    assert hm.counts[-1].sum() == 2  # 131072 and 500000 land in the open last bin


def test_heatmap_half_octave_and_linear(db):
    half = shapes.heatmap(db.cursor(), Filter(), bins="log2half")
    edges = half_octave_edges()
    expected = np.zeros((len(edges), len(edges)), dtype=int)
    np.add.at(expected, (_expected_bins(ISL, edges), _expected_bins(OSL, edges)), 1)
    assert (half.counts == expected).all()
    lin = shapes.heatmap(db.cursor(), Filter(), bins="linear", isl_width=100_000, osl_width=1000)
    assert lin.isl_edges == (0, 100_000, 200_000, 300_000, 400_000, 500_000)
    assert lin.counts.sum() == len(ISL) and lin.counts[5].sum() == 1
    with pytest.raises(ValueError, match="unknown bin scheme"):
        edges_for("cubic")


def test_quantiles_are_exact_and_ignore_nulls(db):
    q = shapes.quantiles(db.cursor(), Filter())
    for name, values in (("isl", ISL), ("osl", OSL)):
        for key, p in (("p50", 50), ("p90", 90), ("p99", 99), ("p99.9", 99.9)):
            assert q[name][key] == pytest.approx(np.percentile(values, p))
        assert q[name]["max"] == max(values)
    assert q["ttft_ms"]["p50"] == 80.0 and q["ttft_ms"]["max"] == 80.0


def test_filters_window_dimensions_and_empty(db):
    cur = db.cursor()
    assert shapes.heatmap(cur, Filter(models=("other-model",))).total == 1
    assert shapes.heatmap(cur, Filter(statuses=("ok",))).total == len(ISL) - 1
    window = Filter(start=BASE_TIME + timedelta(seconds=2), end=BASE_TIME + timedelta(seconds=5))
    assert shapes.heatmap(cur, window).total == 3  # seconds 2, 3, 4: end is exclusive
    empty = Filter(start=BASE_TIME - timedelta(days=2), end=BASE_TIME - timedelta(days=1))
    hm = shapes.heatmap(cur, empty)
    assert hm.total == 0 and hm.counts.shape == (len(LOG2_EDGES), len(LOG2_EDGES))
    q = shapes.quantiles(cur, empty)
    assert q["isl"] == {"p50": None, "p90": None, "p99": None, "p99.9": None, "max": None}
    assert sum(shapes.four_shapes(cur, empty).values()) == 0
    # A hostile value is only ever a bound parameter.
    assert shapes.heatmap(cur, Filter(models=("x' OR '1'='1",))).total == 0


def test_four_shapes_with_thresholds(db):
    counts = shapes.four_shapes(db.cursor(), Filter())
    isl, osl = np.asarray(ISL), np.asarray(OSL)
    assert counts == {
        "long_in_short_out": int(((isl >= 1024) & (osl < 256)).sum()),
        "long_in_long_out": int(((isl >= 1024) & (osl >= 256)).sum()),
        "short_in_long_out": int(((isl < 1024) & (osl >= 256)).sum()),
        "short_in_short_out": int(((isl < 1024) & (osl < 256)).sum()),
    }
    other = shapes.four_shapes(db.cursor(), Filter(), long_isl=32, long_osl=1)
    assert other["short_in_short_out"] == int(((isl < 32) & (osl < 1)).sum())


def test_overview_kpis_and_per_model_follow_the_filter(db):
    from app.analytics import overview

    k = overview.kpis(db.cursor(), Filter())
    assert k["requests"] == len(ISL) and k["input_tokens"] == sum(ISL)
    assert k["error_rate"] == pytest.approx(1 / len(ISL))  # one record has status error
    assert k["ttft_ms_p95"] == 80.0 and k["e2e_ms_p99"] == 900.0
    frame = overview.per_model(db.cursor(), Filter(models=("other-model",)))
    assert frame["model"].tolist() == ["other-model"] and frame["requests"].tolist() == [1]
    empty = overview.kpis(db.cursor(), Filter(models=("nobody",)))
    assert empty["requests"] == 0 and empty["ttft_ms_p50"] is None and empty["error_rate"] is None
