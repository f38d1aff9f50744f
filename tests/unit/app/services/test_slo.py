"""The SLO ledger (app/services/slo.py): causes worked out by hand from known numbers, then
the whole report on hand-made requests, with the real performance model where it applies."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest

from app.analytics.filters import Filter
from app.services import slo
from app.services.profiles import save_profile
from app.sizing.slo import Fleet, Slo
from tests.support.records import BASE_TIME, record, store

S = Slo(500.0, 50.0, 30_000.0, 95.0)


def _row(**values):
    base = dict(
        ttft_pq=math.nan,
        ttft_low=math.nan,
        ttft_p50=math.nan,
        itl_pq=math.nan,
        itl_p50=math.nan,
        e2e_pq=math.nan,
        isl_p50=4096.0,
        osl_p50=256.0,
        miss_ttft=0.0,
        miss_itl=0.0,
        miss_e2e=0.0,
        good=0.0,
        missed=100.0,
        target=0.95,
    )
    return SimpleNamespace(**(base | values))


def test_ttft_far_above_the_predicted_prefill_is_queueing():
    row = _row(ttft_pq=2300.0, ttft_low=200.0)
    c = slo.ttft_cause(S, row, slo.Predicted(180.0, 20.0), 100.0)
    assert c.kind == "queueing"
    assert c.words == "TTFT p95 2.3 s vs 180 ms predicted prefill at ISL 4.1k: queueing"


def test_ttft_near_a_prefill_above_the_target_is_prefill():
    c = slo.ttft_cause(S, _row(ttft_pq=650.0), slo.Predicted(620.0, 20.0), 10.0)
    assert c.kind == "prefill"
    assert "near the 620 ms predicted prefill" in c.words and "500 ms target" in c.words
    mild = slo.ttft_cause(S, _row(ttft_pq=700.0), slo.Predicted(400.0, 20.0), 10.0)
    assert mild.kind == "queueing" and "300 ms of waiting" in mild.words


def test_ttft_without_a_model_reads_the_shapes_fast_end():
    none = slo.Predicted(why_not="no engine profile")
    slow = slo.ttft_cause(S, _row(ttft_pq=900.0, ttft_low=600.0), none, 5.0)
    assert slow.kind == "prefill" and "from the data alone (no engine profile)" in slow.words
    waits = slo.ttft_cause(S, _row(ttft_pq=2000.0, ttft_low=150.0), none, 5.0)
    assert waits.kind == "queueing" and "150 ms for the fastest tenth" in waits.words
    unclear = slo.ttft_cause(S, _row(ttft_pq=600.0, ttft_low=450.0), none, 5.0)
    assert unclear.kind == "ttft"


def _levels(*itl):  # (lo, hi, p50, p90) per level
    return [slo.Level(lo, hi, 50, p50, p90) for lo, hi, p50, p90 in itl]


def test_itl_slow_when_quiet_is_the_engine_rising_with_load_is_load():
    row = _row(itl_pq=80.0)
    model = slo.Predicted(100.0, 12.0)
    engine = slo.itl_cause(S, row, model, _levels((1, 1, 55.0, 70.0), (2, 2, 60.0, 75.0)), "e", 1)
    assert engine.kind == "decode-engine"
    assert "already 70 ms at p90 with 1 in flight on e (12 ms predicted" in engine.words
    loaded = slo.itl_cause(S, row, model, _levels((1, 1, 14.0, 20.0), (33, 64, 61.0, 90.0)), "e", 1)
    assert loaded.kind == "decode-load"
    assert "rises to 61 ms at 33–64 in flight (×4.4" in loaded.words
    steady = _levels((1, 1, 30.0, 40.0), (5, 8, 31.0, 45.0))
    assert slo.itl_cause(S, row, model, steady, "e", 1).kind == "decode-engine"  # 30 > 1.5 × 12
    flat = slo.itl_cause(S, row, slo.Predicted(100.0, 28.0), steady, "e", 1)
    assert flat.kind == "decode" and "not explained by load" in flat.words
    assert slo.itl_cause(S, row, model, [], "e", 1).kind == "decode"


def test_causes_pick_the_measures_that_break_attainment():
    row = _row(
        ttft_pq=2300.0,
        ttft_low=200.0,
        itl_pq=40.0,
        itl_p50=20.0,
        e2e_pq=40_000.0,
        miss_ttft=80.0,
        miss_itl=3.0,  # within the 5% the percentile allows of 100: not a cause
        miss_e2e=10.0,
    )
    found = slo.causes(S, row, "no engine profile", [], "e")
    assert [c.kind for c in found] == ["queueing", "output-length"]
    assert "decode ≈ ITL p50 20 ms × 256 tokens = 5.1 s" in found[1].words


def test_words_helpers():
    assert (slo.ms(180.4), slo.ms(2345.0), slo.ms(0.84), slo.ms(None)) == (
        "180 ms",
        "2.3 s",
        "0.8 ms",
        "–",
    )
    assert (slo.tokens(4096), slo.tokens(512), slo.tokens(1300)) == ("4.1k", "512", "1.3k")


# -- the report on stored requests ----------------------------------------------------------

NOW = datetime(2026, 11, 21, tzinfo=UTC)
PROFILE = {"model": "llama-3.1-8b", "gpu": "L40S", "framework": "vllm", "max_num_tokens": 8192}


def _requests():
    out = []
    for k in range(40):  # chat-8b, ISL ~1k: queued (TTFT 2 s) on 30 of 40
        ttft = 2000.0 if k % 4 else 60.0
        out.append(
            record(
                k,
                "c",
                engine="chat-8b",
                isl=1000,
                osl=100,
                ttft_ms=ttft,
                itl_ms=15.0,
                e2e_ms=ttft + 1500.0,
                tenant="web",
            )
        )
    for k in range(20):  # no engine, no profile: the fleet's targets, no model
        ttft = 3000.0 if k < 10 else 100.0
        out.append(
            record(k, "n", engine=None, tenant=None, isl=200, osl=50, ttft_ms=ttft, e2e_ms=5e3)
        )
    out.append(record(99, "n", engine=None, tenant=None, isl=200, osl=50, ttft_ms=None))
    return out


@pytest.fixture
def db(database):
    save_profile(database, "chat-8b", PROFILE | {"slo_ttft_ms": 500, "slo_itl_ms": 50}, None, NOW)
    store(database, _requests())
    return database


FLEET = Fleet(slo_ttft_ms=1000.0, slo_percentile=90.0)
WINDOW = Filter(start=BASE_TIME - timedelta(hours=1), end=BASE_TIME + timedelta(hours=1))


def test_ledger_whose_targets_apply(db):
    led = slo.ledger(db, FLEET)
    assert led.engines["chat-8b"].source == "engine" and led.engines["chat-8b"].ttft_ms == 500
    assert led.engines["chat-8b"].percentile == 90.0  # the profile sets none: the fleet's
    assert led.default is not None and led.default.source == "fleet"
    assert led.slo_of(None) == led.default and led.slo_of("elsewhere") == led.default
    assert not slo.ledger(db, Fleet()).default


def test_report_counts_and_causes_with_the_model(db):
    rep = slo.report(db, WINDOW, FLEET)
    assert rep is not None
    out = slo.report_dict(rep, WINDOW)
    assert out["exact"] is True and out["set"] is True
    engines = {e["engine"]: e for e in out["by_engine"]}
    chat = engines["chat-8b"]
    assert (chat["good"], chat["missed"], chat["goodput"], chat["met"]) == (10, 30, 0.25, False)
    (cause,) = chat["causes"]
    assert cause["kind"] == "queueing" and cause["missed"] == 30
    assert "predicted prefill at ISL 1k: queueing" in cause["example"]
    assert chat["words"].startswith("chat-8b: 25.0% of requests within TTFT p90 ≤ 500 ms")
    nobody = engines[None]
    assert (nobody["good"], nobody["missed"], nobody["not_measured"]) == (10, 10, 1)
    miss = next(m for m in out["misses"] if m["engine"] is None)
    assert "from the data alone (no engine named)" in miss["words"]
    cell = next(c for c in out["by_cell"] if c["isl_from"] == 512 and c["osl_from"] == 64)
    assert cell["cause"] == "chat-8b: queueing" and cell["requests"] == 40
    assert out["totals"]["not_measured"] == 1 and out["totals"]["goodput"] == pytest.approx(
        1 / 3, abs=1e-4
    )
    assert [t["tenant"] for t in out["by_tenant"]] == ["web", None]


def test_no_target_anywhere_says_how_to_set_one(database):
    store(database, _requests())
    assert slo.report(database, WINDOW, Fleet()) is None
    out = slo.report_dict(None, WINDOW)
    assert out["set"] is False and "TOKENSHAPE_SLO_TTFT_MS" in out["how_to_set"]
    assert slo.goodput_series(database, WINDOW, Fleet()).empty
    assert slo.attainment(database, WINDOW, Fleet()) == {}


def test_overview_contracts(db):
    series = slo.goodput_series(db, WINDOW, FLEET)
    assert list(series.columns)[:4] == ["t", "requests", "good", "not_measured"]
    assert series["requests"].sum() == 61 and series["good"].sum() == 20
    met = slo.attainment(db, WINDOW, FLEET)
    assert met["chat-8b"]["met"] is False and met["chat-8b"]["target"] == pytest.approx(0.9)
    assert "queueing" in met["chat-8b"]["words"]
    assert met[None]["goodput"] == 0.5
