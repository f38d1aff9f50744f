"""The Overview over HTTP: its layout holds the glance (KPIs with sparklines, requests/s and
goodput), and its two callbacks answer with TTFT/ITL against each engine's SLO line and the
GPU-hours or money now vs planned. Demo traffic, one engine profile kept (the plans run the
performance model: a few seconds per engine)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.dashboard import ids
from app.services.demo import DEMO_PROFILES
from app.services.profiles import delete_profile, stored_profiles
from tests.support.dash import dash_post
from tests.support.database import copy_database, open_migrated
from tests.support.server import LiveServer, serve, server_settings

KEPT = "guard-8b"
PAGES_PAYLOAD = {
    "output": ".._pages_content.children..._pages_store.data..",
    "outputs": [
        {"id": "_pages_content", "property": "children"},
        {"id": "_pages_store", "property": "data"},
    ],
    "changedPropIds": ["_pages_location.pathname"],
    "state": [],
}


@pytest.fixture(scope="module")
def overview_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests with only KEPT's profile, and a fleet TTFT target for
    every other engine."""
    db = copy_database(
        demo_template(requests=5000, days=14), tmp_path_factory.mktemp("overview") / "o.duckdb"
    )
    with open_migrated(db) as opened:
        for name in stored_profiles(opened):
            if name != KEPT:
                delete_profile(opened, name)
    yield from serve(server_settings(db, slo_ttft_ms=1000.0), wait=False)


def _find(node, component_id: str) -> dict | None:
    """The component with this id anywhere in a serialised Dash layout."""
    if isinstance(node, list):
        return next((f for n in node if (f := _find(n, component_id)) is not None), None)
    if not isinstance(node, dict) or "props" not in node:
        return None
    if node["props"].get("id") == component_id:
        return node
    return _find(list(node["props"].values()), component_id)


def _layout(client, search: str) -> dict:
    payload = {
        **PAGES_PAYLOAD,
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": "/"},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
    }
    answer = client.post("/_dash-update-component", json=payload)
    assert answer.status_code == 200, answer.text
    return answer.json()["response"]["_pages_content"]["children"]


def _callback(client, store_id: str, data: dict) -> dict:
    payload = {
        "inputs": [{"id": store_id, "property": "data", "value": data}],
        "changedPropIds": [f"{store_id}.data"],
        "state": [],
    }
    answer = dash_post(client, payload)
    assert answer.status_code == 200, answer.text
    return answer.json()["response"]


def test_the_layout_holds_the_glance(overview_live):
    total = overview_live.scalar("SELECT count(*) FROM requests")
    with overview_live.client() as c:
        layout = _layout(c, "?window=all")
    assert f"{total:,}" in str(_find(layout, ids.OVERVIEW_KPIS))
    rate = _find(layout, ids.OVERVIEW_RATE)["props"]["figure"]["data"][0]
    assert sum(1 for y in rate["y"] if y) > 10  # a day of hours at least
    goodput = _find(layout, ids.OVERVIEW_GOODPUT)["props"]["figure"]["data"]
    assert [t["name"] for t in goodput] == ["goodput", "target 95%"]
    assert all(0 <= y <= 1 for y in goodput[0]["y"] if y is not None)
    for spark in (
        ids.OVERVIEW_SPARK_RATE,
        ids.OVERVIEW_SPARK_GOODPUT,
        ids.OVERVIEW_SPARK_TTFT,
        ids.OVERVIEW_SPARK_ITL,
    ):
        figure = _find(layout, spark)["props"]["figure"]
        assert figure["data"][0]["y"] and figure["layout"]["xaxis"]["visible"] is False
    # The slower parts come by callbacks, from the page's own query.
    assert _find(layout, ids.OVERVIEW_LATENCY_QUERY)["props"]["data"] == {"window": "all"}
    assert _find(layout, ids.OVERVIEW_MONEY_QUERY) is not None


def test_the_latency_callback_draws_each_engine_against_its_slo(overview_live):
    with overview_live.client() as c:
        answer = _callback(c, ids.OVERVIEW_LATENCY_QUERY, {"window": "all"})
    ttft = answer[ids.OVERVIEW_TTFT]["figure"]["data"]
    itl = answer[ids.OVERVIEW_ITL]["figure"]["data"]
    engines = overview_live.db.cursor().execute(
        "SELECT DISTINCT engine FROM requests WHERE engine IS NOT NULL"
    )
    named = {r[0] for r in engines.fetchall()}
    lines = {t["legendgroup"]: t for t in ttft if t.get("showlegend") is not False}
    assert set(lines) == named
    targets = {t["legendgroup"]: t["y"][0] for t in ttft if t.get("showlegend") is False}
    # KEPT's own target; every other engine the fleet's (TOKENSHAPE_SLO_TTFT_MS=1000).
    assert targets[KEPT] == DEMO_PROFILES[KEPT]["slo_ttft_ms"]
    assert all(targets[e] == 1000.0 for e in named - {KEPT})
    itl_targets = {t["legendgroup"]: t["y"][0] for t in itl if t.get("showlegend") is False}
    assert itl_targets == {KEPT: DEMO_PROFILES[KEPT]["slo_itl_ms"]}  # the fleet sets no ITL
    assert "One line per engine" in answer[ids.OVERVIEW_LATENCY_NOTE]["children"]


def test_the_money_callback_compares_now_with_the_best_plan(overview_live):
    with overview_live.client() as c:
        answer = _callback(c, ids.OVERVIEW_MONEY_QUERY, {"weeks": 4})
    now, best = answer[ids.OVERVIEW_MONEY]["figure"]["data"]
    assert now["x"] == best["x"] == [KEPT]
    assert now["y"][0] >= best["y"][0] > 0
    assert answer[ids.OVERVIEW_SAVES]["children"].startswith("$")  # the demo is priced
    assert "→" in answer[ids.OVERVIEW_SAVES_NOTE]["children"]
