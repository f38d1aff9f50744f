"""The Overview's engine cards (app/services/overview.py) on hand-made requests in a real
DuckDB file: which engines get a card and in what order, their requests/s and goodput against
their SLO, and their status as the Rightsizing fleet table gets it."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

from app.analytics import traffic
from app.analytics.filters import Filter
from app.services import overview
from app.services.demo import DEMO_PROFILES
from app.services.rightsizing import recommend
from app.sizing.slo import Fleet
from app.sizing.status import engine_status
from app.storage.engines import put_profile
from tests.support.records import BASE_TIME, record, store

START, END = BASE_TIME - timedelta(hours=1), BASE_TIME + timedelta(hours=3)
WINDOW = Filter(start=START, end=END)


def _requests(engine: str, n: int, ttft: float, first: int = 0) -> list[dict]:
    """n requests of `engine` a minute apart from BASE_TIME, each with TTFT `ttft` ms."""
    return [
        record(
            first + i,
            prefix=engine,
            engine=engine,
            ttft_ms=ttft,
            e2e_ms=ttft + 1000.0,
            started_at=(BASE_TIME + timedelta(minutes=i)).isoformat(),
        )
        for i in range(n)
    ]


@pytest.fixture
def db(database):
    # chat-8b the busiest (its own SLO: TTFT ≤ 800 ms at p95), then rag (the fleet's SLO).
    rows = _requests("chat-8b", 30, 100.0) + _requests("chat-8b", 10, 5000.0, first=30)
    rows += _requests("rag", 20, 300.0)
    store(database, rows)
    put_profile(database.cursor(), "chat-8b", DEMO_PROFILES["chat-8b"], BASE_TIME)
    put_profile(database.cursor(), "idle-70b", DEMO_PROFILES["llm-70b"], BASE_TIME)
    return database


def test_cards_go_to_the_busiest_engines_then_the_quiet_profiled_ones(db):
    names, more = overview.card_engines(db, WINDOW)
    assert (names, more) == (["chat-8b", "rag", "idle-70b"], 0)
    assert overview.card_engines(db, WINDOW, limit=2) == (["chat-8b", "rag"], 1)
    # The view's engine narrows the cards to it, profiled or not.
    assert overview.card_engines(db, replace(WINDOW, engines=("rag",))) == (["rag"], 0)
    assert overview.card_engines(db, replace(WINDOW, engines=("idle-70b",))) == (["idle-70b"], 0)


def test_a_card_has_the_engines_rates_and_goodput_against_its_own_slo(db):
    fleet = Fleet(slo_ttft_ms=250.0)
    cards = overview.engine_cards(db, WINDOW, ["chat-8b", "rag", "idle-70b"], fleet)
    chat, rag, idle = cards.cards
    assert cards.bucket == "5m"
    # The same series as the Traffic page's, of the engine alone.
    expected = traffic.rates(db.cursor(), replace(WINDOW, engines=("chat-8b",)), "5m", "UTC")
    assert chat.rates["requests_per_s"].tolist() == expected["requests_per_s"].tolist()
    assert chat.requests == 40.0 and rag.requests == 20.0 and idle.requests == 0.0
    # chat-8b: 30 of 40 within its own 800 ms; rag: none within the fleet's 250 ms.
    assert chat.goodput == pytest.approx(0.75) and chat.target == pytest.approx(0.95)
    assert chat.slo is not None and chat.slo.source == "engine" and chat.profiled
    assert rag.goodput == 0.0 and rag.slo is not None and rag.slo.source == "fleet"
    assert not rag.profiled
    assert idle.goodput is None and idle.rates.empty  # nothing of it in the window


def test_without_any_slo_no_goodput_is_judged(database):
    store(database, _requests("rag", 5, 300.0))
    (card,) = overview.engine_cards(database, WINDOW, ["rag"], Fleet()).cards
    assert card.goodput is None and card.slo is None and card.target is None


def test_the_status_is_the_rightsizing_tables_and_an_engine_without_profile_says_so(db):
    plans = overview.card_plans(
        db, ["chat-8b", "rag"], start=START, end=END, now=END, tz="UTC", fleet=Fleet()
    )
    chat, rag = plans
    expected = engine_status(recommend(db, "chat-8b", start=START, end=END, tz="UTC"))
    assert chat.status == expected
    assert chat.money is not None and chat.money.engine == "chat-8b"
    assert rag.status.key == "cannot-be-sized" and rag.status.reason == overview.NO_PROFILE
    assert rag.money is None


def test_a_broken_stored_profile_is_its_own_status_and_spares_the_others(db):
    put_profile(db.cursor(), "rag", {"model": "no-such-model", "gpu": "H100"}, BASE_TIME)
    status = overview.engine_status_over(db, "rag", start=START, end=END, tz="UTC", fleet=Fleet())
    assert status.key == "cannot-be-sized" and "profile" in status.reason, status
