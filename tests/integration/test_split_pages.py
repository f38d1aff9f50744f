"""The Latency and Traffic pages over HTTP, split by a dimension: one series per busiest value,
the split kept in the filter bar's select (so the URL restores it), a bad value named, and
the queueing, prefix-cache and per-model TTFT views with the counts behind them. 5,000 demo
requests over 14 days (four engines, three models, queue_ms and cached_tokens reported)."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator

import numpy as np
import pytest

from app.dashboard import ids
from tests.support.dash import page_layout
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings


@pytest.fixture(scope="module")
def live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    db = copy_database(
        demo_template(requests=5000, days=14), tmp_path_factory.mktemp("split") / "s.duckdb"
    )
    yield from serve(server_settings(db), wait=False)


def _find(node, component_id: str) -> dict | None:
    """The component with this id anywhere in a serialised Dash layout."""
    if isinstance(node, list):
        return next((f for n in node if (f := _find(n, component_id)) is not None), None)
    if not isinstance(node, dict) or "props" not in node:
        return None
    if node["props"].get("id") == component_id:
        return node
    return _find(list(node["props"].values()), component_id)


def _page(live: LiveServer, path: str, search: str) -> list:
    with live.client() as c:
        return json.loads(page_layout(c, path, search))


def _names(layout, graph_id: str) -> list[str]:
    graph = _find(layout, graph_id)
    assert graph is not None, graph_id
    return [t["name"] for t in graph["props"]["figure"]["data"]]


def _values(data) -> np.ndarray:
    """A figure's array as plotly serialises it: a list, or typed base64 ("bdata")."""
    if isinstance(data, dict):
        return np.frombuffer(base64.b64decode(data["bdata"]), dtype=np.dtype(data["dtype"]))
    return np.asarray(data, dtype=float)


def _selected(layout) -> str:
    select = _find(layout, "filter-split")
    assert select is not None
    chosen = [
        o["props"]["value"] for o in select["props"]["children"] if o["props"].get("selected")
    ]
    return chosen[0]


def test_latency_split_by_model_draws_a_line_per_model(live):
    models = sorted(
        r[0] for r in live.db.cursor().execute("SELECT DISTINCT model FROM requests").fetchall()
    )
    layout = _page(live, "/latency", "?window=all&split=model")
    assert _selected(layout) == "model"
    for graph in (ids.LATENCY_TTFT_TREND, ids.LATENCY_ITL_TREND, ids.LATENCY_E2E_TREND):
        assert sorted(_names(layout, graph)) == models  # three models: no "(other)"
    trend = _find(layout, ids.LATENCY_TTFT_TREND)["props"]["figure"]
    assert all("requests" in t["hovertemplate"] for t in trend["data"])
    assert trend["layout"]["yaxis"]["rangemode"] == "nonnegative"
    note = json.dumps(_find(layout, ids.LATENCY_SPLIT_NOTE))
    assert "Split by model" in note and "3 busiest models" in note
    # Queueing time per model: the demo's gateways report queue_ms on every request.
    assert sorted(_names(layout, ids.LATENCY_QUEUE)) == models
    assert "of 5,000 requests (100.0%) report queue_ms" in json.dumps(
        _find(layout, ids.LATENCY_QUEUE_NOTE)
    )
    # The TTFT fit: markers and a line per model, never one pooled line.
    fit = _names(layout, ids.LATENCY_TTFT_FIT)
    assert sorted(n for n in fit if not n.endswith(" fit")) == models
    assert sorted(n for n in fit if n.endswith(" fit")) == [f"{m} fit" for m in models]
    assert "ms more time to first token per 1,000 input tokens" in json.dumps(
        _find(layout, ids.LATENCY_TTFT_FIT_NOTE)
    )


def test_latency_split_by_tenant_says_it_reads_raw_rows(live):
    layout = _page(live, "/latency", "?window=all&split=tenant")
    note = json.dumps(_find(layout, ids.LATENCY_SPLIT_NOTE))
    assert "Split by tenant reads raw rows" in note and "exact" in note
    assert _names(layout, ids.LATENCY_TTFT_TREND)


def test_a_bad_split_is_named_and_the_page_is_drawn_unsplit(live):
    for path in ("/latency", "/traffic"):
        layout = _page(live, path, "?window=all&split=colour")
        problem = json.dumps(_find(layout, ids.SPLIT_PROBLEM), ensure_ascii=False)
        assert "“split”: 'colour' is not one of model, engine, tenant, gateway" in problem
        assert _selected(layout) == ""
    assert _names(layout, ids.TRAFFIC_RATES)[0] == "requests/s"
    assert _find(layout, ids.TRAFFIC_SPLIT) is None


def test_traffic_split_by_engine_and_the_cache_hit_rate(live):
    engines = sorted(
        r[0] for r in live.db.cursor().execute("SELECT DISTINCT engine FROM requests").fetchall()
    )
    layout = _page(live, "/traffic", "?window=all&split=engine")
    assert _selected(layout) == "engine"
    assert sorted(_names(layout, ids.TRAFFIC_SPLIT)) == engines
    split = _find(layout, ids.TRAFFIC_SPLIT)["props"]["figure"]
    total = sum(_values(t["customdata"]).sum() for t in split["data"])
    assert total == 5000  # every request in exactly one series
    cache = _find(layout, ids.TRAFFIC_CACHE)
    assert cache is not None and _names(layout, ids.TRAFFIC_CACHE)
    assert "report cached_tokens" in json.dumps(_find(layout, ids.TRAFFIC_CACHE_NOTE))
