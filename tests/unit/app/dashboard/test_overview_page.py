"""The Overview page's engine cards (app/dashboard/pages/overview.py) over a real DuckDB file:
a card's link opens the Rightsizing page over the window the card's status is computed for,
at most 12 cards then "and N more", the rate in words, and client names never sized."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, urlparse

import pytest

from app.dashboard import filterbar, ids
from app.dashboard.pages import overview as page
from app.dashboard.pages.rightsizing import _window as rightsizing_page_window
from app.services.demo import DEMO_PROFILES
from app.sizing.slo import Fleet
from app.storage.engines import put_profile
from tests.support.records import BASE_TIME, record, store

NOW = datetime(2026, 11, 20, 15, 42, 17, 250_000, tzinfo=UTC)
FIRST = datetime(2026, 11, 1, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    "query",
    [
        {"window": "1h"},
        {"window": "24h"},
        {"window": "7d"},
        {"window": "30d"},
        {"window": "all"},
        {"window": "custom", "start": "2026-11-10T08:00", "end": "2026-11-12T08:00"},
        {"window": "custom", "start": "2026-11-10T08:00"},
        {"window": "custom", "end": "2026-11-12T08:00", "tz": "Europe/Berlin"},
    ],
)
def test_the_link_opens_the_window_the_cards_status_is_for(query):
    view = filterbar.parse_query(query, NOW)
    link = page.rightsizing_query(view, NOW, FIRST)
    # Read exactly as the Rightsizing page reads its URL: the same window, so the same status.
    start, end, _, _ = rightsizing_page_window(link, NOW)
    assert page.rightsizing_window(link, NOW) == (start, end)
    assert start < end
    if view.window in ("24h", "7d", "30d"):
        assert link == {"window": view.window}
    else:
        assert set(link) == {"start", "end"}
        assert (view.start or FIRST) <= start + timedelta(minutes=1)
        assert end <= (view.end or NOW)


def test_all_time_reaches_back_to_the_first_request():
    link = page.rightsizing_query(filterbar.parse_query({"window": "all"}, NOW), NOW, FIRST)
    assert page.rightsizing_window(link, NOW) == (FIRST, NOW.replace(second=0, microsecond=0))


@pytest.mark.parametrize(
    ("rate", "words"),
    [
        (None, "–"),
        (0.0, "0 req/s"),
        (0.0004, "1.44 req/h"),
        (14.912, "14.9 req/s"),
        (1234.5, "1,234 req/s"),
    ],
)
def test_rate_words(rate, words):
    assert page.rate_words(rate) == words


def _find_all(node, kind: str) -> list[dict]:
    """Every component whose pattern id has this type, in layout order."""
    out: list[dict] = []
    if isinstance(node, list):
        for n in node:
            out += _find_all(n, kind)
    elif hasattr(node, "to_plotly_json"):
        as_json = node.to_plotly_json()
        cid = as_json["props"].get("id")
        if isinstance(cid, dict) and cid.get("type") == kind:
            out.append(as_json["props"])
        for value in as_json["props"].values():
            out += _find_all(value, kind)
    return out


@pytest.fixture
def many(database):
    """14 engines, the first the busiest; chat-8b has a profile."""
    rows = []
    for k in range(14):
        name = "chat-8b" if k == 0 else f"e{k:02d}"
        for i in range(20 - k):
            when = BASE_TIME + timedelta(minutes=i)
            rows.append(record(i, prefix=name, engine=name, started_at=when.isoformat()))
    store(database, rows)
    put_profile(database.cursor(), "chat-8b", DEMO_PROFILES["chat-8b"], BASE_TIME)
    return database


def test_at_most_twelve_cards_then_a_link_to_the_rest(many):
    now = BASE_TIME + timedelta(hours=2)
    layout = page.layout_for(many, {"window": "24h"}, now)
    links = _find_all(layout, ids.OVERVIEW_CARD_LINK)
    assert [c["children"] for c in links] == ["chat-8b"] + [f"e{k:02d}" for k in range(1, 12)]
    assert parse_qs(urlparse(links[0]["href"]).query) == {"engine": ["chat-8b"], "window": ["24h"]}
    text = str(layout.to_plotly_json())
    assert "and 2 more — see Rightsizing" in text
    # The cards' store: their engines in order and the Rightsizing window of their links.
    store_props = _find_store(layout)
    assert store_props["engines"] == [c["children"] for c in links]
    assert store_props["rightsizing"] == {"window": "24h"}


def _find_store(layout) -> dict:
    def walk(node):  # type: ignore[no-untyped-def]
        if isinstance(node, list):
            for n in node:
                if (found := walk(n)) is not None:
                    return found
        elif hasattr(node, "to_plotly_json"):
            props = node.to_plotly_json()["props"]
            if props.get("id") == ids.OVERVIEW_CARDS_QUERY:
                return props["data"]
            for value in props.values():
                if (found := walk(value)) is not None:
                    return found
        return None

    found = walk(layout)
    assert found is not None
    return found


def test_the_callbacks_fill_every_slot_and_never_size_a_name_the_client_made_up(many):
    now = BASE_TIME + timedelta(hours=2)
    data = {
        "query": {"window": "24h"},
        "rightsizing": {"window": "24h"},
        "engines": ["e01", "no-such-engine"],
    }
    rates, goods = page.traffic_outputs(many, data, now, "UTC", Fleet(slo_ttft_ms=500.0))
    assert len(rates) == len(goods) == 2
    assert "req/s" in str(rates[0]) or "req/h" in str(rates[0])
    assert "not an engine of this database" in str(rates[1])
    badges, reasons, moneys, styles = page.cards_outputs(many, data, now, "UTC", Fleet())
    assert [b.children for b in badges] == ["cannot be sized", "cannot be sized"]
    assert "no profile yet" in str(reasons[0])
    assert "is not an engine of this database" in str(reasons[1])
    assert all(s["borderLeftColor"].startswith("#") for s in styles) and len(moneys) == 2
