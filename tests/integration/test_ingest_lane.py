"""The ingest lane: gateways' POSTs skip the dashboard's layers but answer as the routes do."""

from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from app.auth.gate import INGEST_PATHS
from ingest import routes as ingest_routes
from ingest.lane import IngestLane
from tests.support.records import batch


def _lane(app) -> IngestLane:
    """The app's IngestLane instance, found by walking its built middleware stack."""
    layer = app.middleware_stack
    while layer is not None and not isinstance(layer, IngestLane):
        layer = getattr(layer, "app", None)
    assert layer is not None, "no IngestLane in the middleware stack"
    return layer


def test_the_lane_answers_the_documented_ingest_routes_itself(live, ingest):
    ingest.get("/api/health")  # the stack is built at the first request
    lane = _lane(live.app)
    documented = live.app.openapi()["paths"]
    for path in INGEST_PATHS:
        assert "post" in documented[path]
        route, endpoint = lane.routes[path]
        assert route.path == path and endpoint is route.endpoint
    # What passes the lane goes on to the rest of the app; ingest POSTs never do.
    seen: list[tuple[str, str]] = []
    inner = lane.app

    async def record(scope, receive, send):
        if scope["type"] == "http":
            seen.append((scope["method"], scope["path"]))
        await inner(scope, receive, send)

    lane.app = record
    try:
        assert ingest.post("/v1/requests", json=batch(2, "lane")).json()["accepted"] == 2
        assert ingest.put("/v1/requests").status_code == 405  # not a POST: the lane says so
        assert ingest.get("/api/health").status_code == 200
    finally:
        lane.app = inner
    assert seen == [("GET", "/api/health")]


def test_the_lane_answers_auth_failures_and_crashes_as_the_app_does(live, ingest, monkeypatch):
    with live.client() as anonymous:
        r = anonymous.post("/v1/requests", json=batch(1))
        assert r.status_code == 401 and r.headers["www-authenticate"].startswith("Bearer")
        assert "missing bearer token" in r.json()["detail"]
    with live.client(live.token("read")) as reader:
        r = reader.post("/v1/litellm", json=[])
        assert r.status_code == 403 and "needs an ingest token" in r.json()["detail"]

    def broken(_header):
        raise RuntimeError("boom")

    monkeypatch.setattr(ingest_routes, "check_native_type", broken)
    r = ingest.post("/v1/requests", json=batch(1, "crash"))
    assert r.status_code == 500
    assert r.json()["detail"].startswith("internal error (RuntimeError); nothing from this")
    monkeypatch.undo()
    # The server closes a connection whose request raised (uvicorn does, either way); the
    # next one is served.
    with live.client(live.token()) as again:
        assert again.post("/v1/requests", json=batch(1, "after")).json()["accepted"] == 1
    with live.client(live.token("read")) as reader:
        scraped = reader.get("/metrics").text
    counted = {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(scraped)
        for s in family.samples
        if s.name == "tokenshape_http_responses_total"
    }
    key = tuple(sorted({"method": "POST", "route": "/v1/requests", "status": "500"}.items()))
    assert counted[key] == 1  # the metrics middleware still counts what the lane answers


def test_other_methods_on_an_ingest_path_are_405_naming_post(live):
    # Dash's catch-all used to answer a GET here with its page shell and a 200.
    with live.client() as anonymous:
        for method in ("GET", "PUT", "DELETE"):
            for path in sorted(INGEST_PATHS):
                r = anonymous.request(method, path)
                assert r.status_code == 405, (method, path, r.status_code)
                assert r.headers["allow"] == "POST"
                assert "takes POST only" in r.json()["detail"]
