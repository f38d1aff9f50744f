"""Goodput (app/analytics/goodput.py) on hand-made requests whose outcomes are worked out by
hand: per engine targets, the fleet default, not measured, weights from sampling."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.analytics import goodput as gp
from app.analytics.filters import Filter
from tests.support.records import BASE_TIME, record, store

# chat: TTFT ≤ 500 ms, ITL ≤ 20 ms at p90. Everything else (code, no engine): the default,
# TTFT ≤ 1,000 ms at p95. "quiet" has a profile without targets: the service maps it to no SLO,
# which here means it is not in by_engine and falls to the default too.
TARGETS = gp.Targets({"chat": gp.Target(500.0, 20.0, None, 90.0)}, gp.Target(1000.0, None, None))


def _at(i: int, minutes: int = 0, **fields):
    when = BASE_TIME + timedelta(minutes=minutes, seconds=i)
    return record(i, started_at=when.isoformat(), **fields)


RECORDS = [
    # chat, first hour: ISL 100 (bin 16·2^2 = 64..128), OSL 20 (16..32)
    _at(0, engine="chat", isl=100, osl=20, ttft_ms=100.0, itl_ms=10.0, tenant="a"),  # good
    _at(1, engine="chat", isl=100, osl=20, ttft_ms=600.0, itl_ms=10.0, tenant="a"),  # TTFT miss
    _at(2, engine="chat", isl=100, osl=20, ttft_ms=100.0, itl_ms=30.0, tenant="a"),  # ITL miss
    _at(3, engine="chat", isl=100, osl=20, ttft_ms=None, itl_ms=10.0, tenant="b"),  # not measured
    _at(4, engine="chat", isl=100, osl=20, ttft_ms=None, itl_ms=40.0, tenant="b"),  # miss anyway
    _at(5, engine="chat", isl=100, osl=1, ttft_ms=200.0, itl_ms=None, tenant="b"),  # 1 token: good
    # code (the default's TTFT target only), second hour
    _at(
        6, 60, engine="code", isl=3000, osl=300, ttft_ms=900.0, itl_ms=99.0, e2e_ms=5e3, tenant="a"
    ),  # good
    _at(
        7,
        60,
        engine="code",
        isl=3000,
        osl=300,
        ttft_ms=1500.0,
        e2e_ms=5e3,
        tenant="a",
        sample_rate=0.25,
    ),
    # no engine at all: the default
    _at(8, 60, engine=None, isl=50, osl=10, ttft_ms=50.0, tenant=None),  # good
]


@pytest.fixture
def db(database):
    store(database, RECORDS)
    return database


def test_outcomes_per_engine_by_hand(db):
    frame = gp.by_dimension(db.cursor(), Filter(), TARGETS, "engine")
    rows = {r["engine"]: r for r in frame.to_dict("records")}
    chat = rows["chat"]
    assert (chat["good"], chat["missed"], chat["not_measured"], chat["requests"]) == (2, 3, 1, 6)
    assert (chat["miss_ttft"], chat["miss_itl"], chat["miss_e2e"]) == (1, 2, 0)
    assert chat["goodput"] == pytest.approx(2 / 5)  # not measured is left out, not good
    assert chat["target"] == pytest.approx(0.90)
    code = rows["code"]
    # The sampled miss stands for 4 requests (1 / 0.25): goodput 1 / 5, not 1 / 2.
    assert (code["good"], code["missed"], code["rows"]) == (1, 4, 2)
    assert code["goodput"] == pytest.approx(0.2) and code["target"] == pytest.approx(0.95)
    assert rows[None]["goodput"] == 1.0


def test_no_slo_requests_are_counted_apart(db):
    only_chat = gp.Targets({"chat": TARGETS.by_engine["chat"]}, None)
    frame = gp.by_dimension(db.cursor(), Filter(), only_chat, "engine")
    rows = {r["engine"]: r for r in frame.to_dict("records")}
    assert rows["code"]["no_slo"] == 5 and rows["code"]["requests"] == 0
    assert rows["code"]["goodput"] != rows["code"]["goodput"]  # NaN: nothing judged
    assert rows["chat"]["no_slo"] == 0


def test_over_time_hourly_and_pooled_target(db):
    frame = gp.over_time(db.cursor(), Filter(), TARGETS, "1h", "UTC")
    assert [t.to_pydatetime() for t in frame["t"]] == [BASE_TIME, BASE_TIME + timedelta(hours=1)]
    first, second = frame.to_dict("records")
    assert (first["good"], first["missed"], first["not_measured"]) == (2, 3, 1)
    assert (second["good"], second["missed"]) == (2, 4)
    assert second["goodput"] == pytest.approx(2 / 6)
    # Pooled percentile, weighted by the judged requests: all at 95 in the second hour.
    assert first["target"] == pytest.approx(0.90) and second["target"] == pytest.approx(0.95)


def test_per_tenant_and_the_filter(db):
    frame = gp.by_dimension(db.cursor(), Filter(tenants=("b",)), TARGETS, "tenant")
    (b,) = frame.to_dict("records")
    assert (b["tenant"], b["good"], b["missed"], b["not_measured"]) == ("b", 1, 1, 1)
    window = Filter(start=BASE_TIME + timedelta(minutes=30))
    assert gp.by_dimension(db.cursor(), window, TARGETS, "tenant")["rows"].sum() == 3
    with pytest.raises(ValueError):
        gp.by_dimension(db.cursor(), Filter(), TARGETS, "isl; DROP TABLE requests")


def test_cells_use_the_heat_map_bins_with_quantiles(db):
    edges, frame = gp.by_cell(db.cursor(), Filter(), TARGETS, per_engine=True)
    chat = frame[(frame["engine"] == "chat") & (frame["osl_from"] == 16)].iloc[0]
    assert chat["isl_from"] == 64 and edges[chat["i"]] == 64
    assert (chat["good"], chat["missed"], chat["not_measured"]) == (1, 3, 1)
    # TTFT of the judged chat requests of the cell: 100, 600, 100 (two without TTFT).
    assert chat["ttft_pq"] == 600.0 and chat["ttft_p50"] == 100.0 and chat["ttft_low"] == 100.0
    code = frame[frame["engine"] == "code"].iloc[0]
    # Weighted: 900 (weight 1) and 1500 (weight 4): the median is 1500.
    assert code["ttft_p50"] == 1500.0 and code["isl_p50"] == 3000.0
    _, pooled = gp.by_cell(db.cursor(), Filter(), TARGETS, per_engine=False, quantiles=False)
    judged, values = gp.grid(pooled, edges)
    assert judged.sum() == 5 + 5 + 1  # chat, code (weighted), no engine: good + missed
    assert "ttft_pq" not in pooled.columns
    with pytest.raises(ValueError):
        gp.by_cell(db.cursor(), Filter(), TARGETS, bins="linear")


def test_unsampled_quantiles_match_the_weighted_ones(db):
    # Only chat's rows: none sampled, so the quantiles come from sorted lists, not windows.
    chat_only = Filter(engines=("chat",))
    _, frame = gp.by_cell(db.cursor(), chat_only, TARGETS, per_engine=True)
    cell = frame[frame["osl_from"] == 16].iloc[0]
    assert (cell["ttft_pq"], cell["ttft_p50"], cell["ttft_low"]) == (600.0, 100.0, 100.0)
    assert (cell["itl_pq"], cell["isl_p50"]) == (40.0, 100.0)  # ITL 10, 30, 40 at p90
    stats = gp.engine_stats(db.cursor(), chat_only, TARGETS).iloc[0]
    assert stats["ttft_pq"] == 600.0 and stats["osl_p50"] == 20.0


def test_nothing_targeted_nothing_judged(db):
    frame = gp.by_dimension(db.cursor(), Filter(), gp.Targets(), "engine")
    assert frame["requests"].sum() == 0 and frame["no_slo"].sum() == 9 + 3  # weight 4 row
    assert not gp.Targets().any() and TARGETS.any()
