"""GET /api/heatmap, /api/quantiles, /api/shapes over HTTP, including 422s. The traffic is
shipped once into one server the module shares: every test reads, none writes."""

from __future__ import annotations

import numpy as np
import pytest

from tests.support.records import batch, record
from tests.support.server import LiveServer


@pytest.fixture(scope="module")
def live(module_live: LiveServer) -> LiveServer:
    """One server for the module."""
    return module_live


@pytest.fixture(scope="module")
def shipped(live: LiveServer):
    recs = batch(40) + [record(100, "m2", model="other", isl=5000, osl=900)]
    with live.client(live.token("ingest")) as ingest:
        assert ingest.post("/v1/requests", json=recs).json()["accepted"] == 41
    live.settle()  # acknowledged rows reach the table within moments (the journal moves)
    return recs


def test_heatmap_route(live, shipped):
    with live.client() as c:
        body = c.get("/api/heatmap").json()
        assert body["bins"] == "log2" and body["isl_edges"][:3] == [0, 16, 32]
        counts = np.asarray(body["counts"])
        assert counts.shape == (len(body["isl_edges"]), len(body["osl_edges"]))
        assert counts.sum() == body["total"] == live.scalar("SELECT count(*) FROM requests")
        one = c.get("/api/heatmap", params={"model": "other"}).json()
        i, j = body["isl_edges"].index(4096), body["osl_edges"].index(512)
        assert one["total"] == 1 and one["counts"][i][j] == 1
        both = c.get(
            "/api/heatmap", params=[("model", "other"), ("model", "llama-3.1-8b-instruct")]
        ).json()
        assert both["total"] == 41
        lin = c.get(
            "/api/heatmap", params={"bins": "linear", "isl_width": 1000, "osl_width": 100}
        ).json()
        assert lin["isl_edges"][:3] == [0, 1000, 2000] and lin["total"] == 41


def test_window_parameters(live, shipped):
    with live.client() as c:
        # fixtures start at 2026-11-20T12:00:00Z, one second apart
        r = c.get(
            "/api/heatmap", params={"start": "2026-11-20T12:00:10Z", "end": "2026-11-20T12:00:20"}
        ).json()
        assert r["total"] == 10
        assert c.get("/api/heatmap", params={"start": "2030-01-01T00:00:00Z"}).json()["total"] == 0


def test_quantiles_route(live, shipped):
    with live.client() as c:
        q = c.get("/api/quantiles").json()
    isl = [r["isl"] for r in shipped]
    assert set(q) == {"isl", "osl", "ttft_ms", "itl_ms", "e2e_ms", "relative_error", "links"}
    assert q["relative_error"] == 0  # just shipped: its hour is read raw, exactly
    assert set(q["isl"]) == {"p50", "p90", "p99", "p99.9", "max"}
    assert q["isl"]["p90"] == pytest.approx(np.percentile(isl, 90))
    assert q["isl"]["max"] == 5000


def test_shapes_route(live, shipped):
    with live.client() as c:
        s = c.get("/api/shapes").json()
    assert s["total"] == 41 and s["counts"]["long_in_long_out"] == 1
    assert sum(s["shares"].values()) == pytest.approx(1.0)


@pytest.mark.parametrize(
    ("path", "params", "named"),
    [
        ("/api/heatmap", {"bins": "cubic"}, "bins"),
        ("/api/heatmap", {"start": "last tuesday"}, "start"),
        ("/api/heatmap", {"start": "2026-11-21T00:00:00Z", "end": "2026-11-20T00:00:00Z"}, "start"),
        ("/api/heatmap", {"bins": "linear", "isl_width": 0}, "isl_width"),
        ("/api/quantiles", {"status": "weird"}, "status"),
        ("/api/shapes", {"long_isl": "many"}, "long_isl"),
    ],
)
def test_bad_parameters_are_422_naming_them(live, path, params, named):
    with live.client() as c:
        r = c.get(path, params=params)
    assert r.status_code == 422
    assert named in r.json()["detail"]


def test_routes_are_in_the_openapi_schema(live):
    with live.client() as c:
        paths = c.get("/openapi.json").json()["paths"]
    for route in ("/api/heatmap", "/api/quantiles", "/api/shapes", "/v1/requests", "/api/health"):
        assert route in paths
