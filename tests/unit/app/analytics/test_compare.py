"""The comparison's analytics (app/analytics/compare) on hand-made rows in a real DuckDB file,
checked against numpy computed independently of the SQL."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from app.analytics import compare
from app.analytics.bins import LOG2_EDGES
from app.analytics.filters import Filter
from tests.support.records import BASE_TIME, record, store

RNG = np.random.default_rng(3)
# Two cells of engine chat-8b through gw-public: ISL 256–512 × OSL 128–256 and ISL 1k–2k ×
# OSL 16–32, with TTFT and ITL drawn at random; and rows of the benchmark gateway.
CELL_A = [(300 + k, 150 + k % 50) for k in range(40)]
CELL_B = [(1500, 20)] * 9
TTFT_A = RNG.uniform(20, 400, len(CELL_A)).round(3)
ITL_A = RNG.uniform(5, 30, len(CELL_A)).round(3)
TTFT_B = RNG.uniform(100, 900, len(CELL_B)).round(3)


def _prod_records() -> list[dict]:
    recs = []
    for k, ((isl, osl), ttft, itl) in enumerate(zip(CELL_A, TTFT_A, ITL_A, strict=True)):
        recs.append(
            record(k, "a", isl=isl, osl=osl, ttft_ms=float(ttft), itl_ms=float(itl), e2e_ms=5000.0)
        )
    for k, ((isl, osl), ttft) in enumerate(zip(CELL_B, TTFT_B, strict=True)):
        recs.append(
            record(k, "b", isl=isl, osl=osl, ttft_ms=float(ttft), itl_ms=None, e2e_ms=2000.0)
        )
    return recs


@pytest.fixture
def db(database):
    store(database, _prod_records(), gateway="gw-public")
    bench = [
        record(k, "x", engine=None, model="org/Model-X", isl=600, osl=40, ttft_ms=50.0)
        for k in range(5)
    ]
    bench[0]["status"] = "error"
    store(database, bench, gateway="aiperf-replay")
    store(database, [record(0, "y", engine="code-7b", isl=10, osl=10)], gateway="gw-code")
    return database


def _cell(edges, isl, osl):
    i = int(np.searchsorted(edges, isl, side="right")) - 1
    j = int(np.searchsorted(edges, osl, side="right")) - 1
    return i, j


def test_cell_latency_quantiles_per_cell_match_numpy(db):
    flt = Filter(engines=("chat-8b",))
    frame = compare.cell_latency(db.cursor(), flt, LOG2_EDGES)
    assert list(frame.columns) == compare.CELL_COLUMNS
    a = frame[(frame.i == _cell(LOG2_EDGES, 300, 150)[0]) & (frame.j == 4)].iloc[0]
    assert (a.requests, a.ttft_n, a.itl_n) == (40, 40, 40)
    for q, name in zip((50, 90, 99), ("p50", "p90", "p99"), strict=True):
        assert a[f"ttft_{name}"] == pytest.approx(np.percentile(TTFT_A, q))
        assert a[f"itl_{name}"] == pytest.approx(np.percentile(ITL_A, q))
    i, j = _cell(LOG2_EDGES, 1500, 20)
    b = frame[(frame.i == i) & (frame.j == j)].iloc[0]
    assert (b.requests, b.ttft_n, b.itl_n) == (9, 9, 0)  # no ITL measured: NaN, not 0
    assert b.ttft_p90 == pytest.approx(np.percentile(TTFT_B, 90)) and np.isnan(b.itl_p50)
    assert len(frame) == 2


def test_cell_latency_of_sampled_rows_weighs_each_row_as_its_copies(database):
    # A row kept with p = 1/4 stands for 4 requests: it must give what 4 copies give.
    values = [10.0, 20.0, 30.0, 400.0]
    sampled = [record(k, "s", isl=100, osl=100, ttft_ms=v) for k, v in enumerate(values)]
    sampled[3]["sample_rate"] = 0.25
    store(database, sampled, gateway="g")
    frame = compare.cell_latency(database.cursor(), Filter(gateways=("g",)), LOG2_EDGES)
    copies = [10.0, 20.0, 30.0] + [400.0] * 4
    row = frame.iloc[0]
    assert row.requests == 7 and row.ttft_n == 4  # requests weighted, rows measured counted
    assert row.ttft_p50 == pytest.approx(np.percentile(copies, 50))
    assert row.ttft_p90 == pytest.approx(np.percentile(copies, 90))


def test_gateway_rows_and_an_engines_gateways(db):
    cur = db.cursor()
    rows = compare.gateway_rows(cur, "aiperf-replay")
    assert rows.rows == 5 and rows.engines == {None: 5} and rows.models == {"org/Model-X": 5}
    assert rows.first == BASE_TIME and rows.last == BASE_TIME + timedelta(seconds=4)
    later = compare.gateway_rows(cur, "aiperf-replay", start=BASE_TIME + timedelta(seconds=3))
    assert later.rows == 2
    assert compare.gateway_rows(cur, "nope").rows == 0
    assert compare.engine_gateways(cur, "chat-8b", None, None) == ["gw-public"]
    assert compare.engine_gateways(cur, "code-7b", None, None) == ["gw-code"]
    gone = BASE_TIME + timedelta(days=30)
    assert compare.engine_gateways(cur, "chat-8b", gone, gone + timedelta(days=1)) == []
    assert compare.engine_names(cur)[0] == "chat-8b"


def test_side_stats_means_are_token_weighted_and_errors_apart(db):
    stats = compare.side_stats(db.cursor(), Filter(engines=("chat-8b",), statuses=("ok",)))
    assert stats.rows == 49 and stats.requests == 49 and stats.not_ok == 0
    ttft = np.concatenate([TTFT_A, TTFT_B])
    assert stats.ttft_mean == pytest.approx(ttft.mean())
    # ITL per output token: each request's mean gap weighted by its OSL − 1 gaps.
    gaps = np.array([osl - 1 for _, osl in CELL_A], dtype=float)
    assert stats.itl_mean == pytest.approx((ITL_A * gaps).sum() / gaps.sum())
    # Σ E2E over first start → last end: 40 × 5 s + 9 × 2 s over 0 s → 39 s + 5 s.
    assert stats.in_flight == pytest.approx((40 * 5 + 9 * 2) / 44)
    bench = compare.side_stats(db.cursor(), Filter(gateways=("aiperf-replay",), statuses=("ok",)))
    assert (bench.rows, bench.not_ok) == (5, 1)  # every status counted; the error apart
