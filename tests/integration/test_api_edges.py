"""Inputs at the edges never reach a 500 (issue 26, class 7): a heat map of one bin, whatever
makes it one (an empty window, a filter matching nothing, a width above every value)."""

from __future__ import annotations

import pytest

from tests.support.records import batch
from tests.support.server import LiveServer


@pytest.fixture(scope="module")
def live(module_live: LiveServer) -> LiveServer:
    """One server for the module, with a little traffic."""
    with module_live.client(module_live.token("ingest")) as ingest:
        assert ingest.post("/v1/requests", json=batch(12)).status_code in (200, 202)
    module_live.settle()
    return module_live


@pytest.mark.parametrize(
    "params",
    [
        {"bins": "linear", "model": "no-such-model"},
        {"bins": "linear", "start": "2031-01-01T00:00:00Z"},
        {"bins": "linear", "isl_width": 10_000_000, "osl_width": 10_000_000},
    ],
    ids=["filter-matches-nothing", "empty-window", "width-above-every-value"],
)
def test_a_heat_map_of_one_bin_is_answered(live, params):
    with live.client() as c:
        r = c.get("/api/heatmap", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["isl_edges"]) == len(body["counts"]) >= 1
        assert sum(map(sum, body["counts"])) == body["total"]
        shapes = c.get("/api/shapes", params=params)
        assert shapes.status_code in (200, 422), shapes.text


EDGES = {"start": "0001-01-01T00:00:00+05:00", "end": "9999-12-31T23:00:00-05:00"}


def _timed_routes(live) -> list[tuple[str, str]]:
    """(path, parameter) of every GET route in the OpenAPI document with a time parameter."""
    with live.client(live.token("read", gateway="edges")) as c:
        spec = c.get("/openapi.json").json()
    found = []
    for path, ops in spec["paths"].items():
        get = ops.get("get")
        for param in (get or {}).get("parameters", []):
            schema = param.get("schema", {})
            formats = [s.get("format") for s in schema.get("anyOf", [schema])]
            if param["in"] == "query" and "date-time" in formats:
                found.append((path.replace("{name}", "chat-8b"), param["name"]))
    return found


def test_every_time_parameter_outside_the_supported_range_is_a_422_naming_it(live):
    routes = _timed_routes(live)
    assert len(routes) >= 10  # the analytics routes, export, compare, drift, performance
    admin = live.token("admin", gateway="edges")
    with live.client(admin) as c:
        for path, name in routes:
            for value in (EDGES["start"], EDGES["end"]):
                r = c.get(path, params={name: value})
                assert r.status_code == 422, (path, name, value, r.status_code, r.text[:200])
                assert name in r.text and "supported range" in r.text, (path, r.text[:300])
