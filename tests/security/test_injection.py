"""SQL injection strings in every filter of every /api route and dashboard URL: ordinary answers
(the strings are data, matched literally), clear 422s where a value has a fixed form, and the
tables untouched."""

from __future__ import annotations

from urllib.parse import quote, urlencode

import pytest

from tests.support.browser import HAVE_CHROMIUM
from tests.support.records import batch, record

INJECTIONS = [
    "' OR 1=1 --",
    "' OR '1'='1",
    '"; DROP TABLE requests; --',
    "'; DELETE FROM rejects; --",
    "%' UNION SELECT model, isl, osl FROM requests --",
    "') OR ('x'='x",
    "1; UPDATE requests SET isl = 0",
    "*/ OR 1=1 /*",
    "\\'; DROP TABLE engines; --",
    "' || (SELECT string_agg(token_hash, ',') FROM tokens) || '",
    "%",
    "_",
    "llama%",
    "x\x00y",
]
# A record whose names *are* injection strings: filtering by one must find exactly it.
LITERAL = {"model": "' OR 1=1 --", "engine": '"; DROP TABLE requests; --', "tenant": "%"}
DIMENSIONS = ("model", "engine", "gateway", "tenant")
FILTERED = [
    "/api/heatmap",
    "/api/quantiles",
    "/api/shapes",
    "/api/latency/trend",
    "/api/latency/ttft-vs-isl",
    "/api/latency/itl-by-position",
    "/api/latency/e2e",
    "/api/traffic",
    "/api/load",
    "/api/latency/inflight",
]
# How many requests an answer counted, for the routes that say.
TOTAL = {"/api/heatmap": "total", "/api/shapes": "total", "/api/latency/e2e": "total"}
TABLES = ("requests", "rejects", "engines", "tokens")


@pytest.fixture(scope="module")
def data(module_live):
    """60 ordinary records, one whose names are injection strings, and an engine profile, in
    one server the module shares (its tests check that nothing changes)."""
    live = module_live
    with live.client(live.token("ingest", gateway="gw-sql")) as c:
        assert c.post("/v1/requests", json=batch(60, "sql")).json()["accepted"] == 60
        literal = record(999, "lit", **LITERAL)
        assert c.post("/v1/requests", json=[literal]).json()["accepted"] == 1
        c.post("/v1/requests", json=[record(0, isl=-1)])  # one reject, to see it survive
        admin = {"Authorization": f"Bearer {live.token('admin')}"}
        profile = {"model": "llama-3.1-8b", "gpu": "L40S", "max_input_len": 4096}
        assert c.put("/api/engines/chat-8b", json=profile, headers=admin).status_code == 200
    live.settle()
    return live


def _counts(live) -> dict[str, int]:
    return {t: live.scalar(f"SELECT count(*) FROM {t}") for t in TABLES}


def test_injection_in_every_filter_of_every_api_route(data):
    live = data
    reader = live.token("read", gateway="reader")
    before = _counts(live)
    with live.client(reader) as c:
        everything = c.get("/api/heatmap").json()["total"]
        assert everything == 61
        for route in FILTERED:
            for dimension in DIMENSIONS:
                for value in INJECTIONS:
                    r = c.get(route, params={dimension: value})
                    assert r.status_code == 200, (route, dimension, value, r.text)
                    expected = 1 if LITERAL.get(dimension) == value else 0
                    if route in TOTAL:
                        assert r.json()[TOTAL[route]] == expected, (route, dimension, value)
            for value in INJECTIONS:  # fixed forms: a 422 naming the parameter
                r = c.get(route, params={"status": value})
                assert r.status_code == 422 and "status" in r.json()["detail"], r.text
                for bound in ("start", "end"):
                    r = c.get(route, params={bound: value})
                    assert r.status_code == 422, (route, bound, value, r.text)
                    assert bound in r.json()["detail"] and "ISO 8601" in r.json()["detail"]
        # The literal names are found by exact match, together and one by one.
        r = c.get("/api/shapes", params=LITERAL)
        assert r.json()["total"] == 1
        for value in INJECTIONS:
            path = "/api/engines/" + quote(value, safe="")
            for suffix in ("", "/recommendation", "/seasonal", "/performance"):
                r = c.get(path + suffix)
                # 404 (no such engine, or no such route when the value holds a '/')
                assert r.status_code in (404, 422), (path + suffix, r.text)
                assert "profile" in r.json()["detail"] or "no API route" in r.json()["detail"]
            r = c.get("/api/engines/chat-8b/recommendation", params={"start": value})
            assert r.status_code == 422 and "start" in r.json()["detail"]
            r = c.get("/api/drift", params={"end": value})
            assert r.status_code == 422 and "end" in r.json()["detail"]
            # What-ifs take names of the catalog only: an injection is an unknown model/GPU.
            what_if = {"model": "llama-3.1-8b", "gpu": "H100", "isl": 9, "osl": 9, "rate": 1}
            for name in ("model", "gpu", "framework", "weight_dtype"):
                r = c.get("/api/performance", params=what_if | {name: value})
                assert r.status_code == 422, (name, value, r.text)
        assert c.get("/api/engines").json()[0]["name"] == "chat-8b"
    assert _counts(live) == before


READY = "#filter-bar, #rightsizing-form, #seasonal-form, #reports-subject, .page-error"
PAGES = ["/", "/shapes", "/latency", "/traffic", "/rightsizing", "/seasonal", "/reports"]


@pytest.mark.browser
@pytest.mark.skipif(not HAVE_CHROMIUM, reason="no chromium")
def test_injection_in_dashboard_urls(data, browser):
    live = data
    before = _counts(live)
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    failures: list[str] = []
    page.on("pageerror", lambda e: failures.append(str(e)))
    for path in PAGES:
        for values in (INJECTIONS[:5], INJECTIONS[5:10], INJECTIONS[10:]):
            query = {d: v for d, v in zip(DIMENSIONS, values, strict=False)}
            query |= {"window": "custom", "start": values[0], "end": values[-1]}
            query |= {"weeks": values[1], "scale": values[2], "days": values[0]}
            page.goto(f"{live.url}{path}?{urlencode(query)}")
            page.locator(READY).first.wait_for(timeout=30_000)
            assert page.locator(".page-error").count() == 0, (path, query)
    # A model filter of the literal injection string shows exactly that one request.
    page.goto(f"{live.url}/shapes?" + urlencode({"window": "all", "model": LITERAL["model"]}))
    page.locator("#shapes-total").wait_for(timeout=30_000)
    assert page.locator("#shapes-total").inner_text() == "1"
    assert page.locator("#filter-model").input_value() == LITERAL["model"]
    assert failures == []
    assert _counts(live) == before
