"""format=csv on every JSON data route over HTTP: text/csv with a header row holding the same
numbers as the JSON, `links.csv` in each JSON answer pointing at it, formula-looking text
prefixed, and a bad format a 422 naming the parameter and its choices. One server for the
module; every test reads, none writes."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.support.database import copy_database
from tests.support.records import BASE_TIME, record
from tests.support.server import LiveServer, serve, server_settings

WINDOW = {"start": "2026-11-20T11:00:00Z", "end": "2026-11-20T13:00:00Z"}
PROFILE = {"model": "llama-3.1-8b", "gpu": "L40S", "max_input_len": 4096, "max_seq_len": 8192}
FORMULA_TENANT = "=HYPERLINK(1)"  # a tenant name a spreadsheet would run as a formula


def _records() -> list[dict]:
    out = []
    for k in range(60):
        ttft = 2000.0 if k % 3 == 0 else 70.0  # a third miss the fleet's 1 s TTFT target
        out.append(
            record(
                k,
                "csv",
                tenant=FORMULA_TENANT if k % 2 else "team-a",
                isl=5000 if k % 10 == 0 else 200 + 40 * k,  # some beyond max_input_len
                ttft_ms=ttft,
                e2e_ms=ttft + 10.0 * k,
                token_gaps_ms=[10.0 + k % 7] * 20,
            )
        )
    # the week before: what drift compares the last week with
    before = BASE_TIME - timedelta(days=7)
    for k in range(30):
        started = (before + timedelta(minutes=k)).isoformat().replace("+00:00", "Z")
        out.append(record(k, "old", started_at=started, isl=300 + k, ttft_ms=60.0))
    return out


@pytest.fixture(scope="module")
def live(tmp_path_factory, db_template) -> Iterator[LiveServer]:
    """A server with a fleet TTFT target (1 s at p90), 90 requests and chat-8b's profile."""
    db = copy_database(db_template, tmp_path_factory.mktemp("api-csv") / "t.duckdb")
    settings = server_settings(db, slo_ttft_ms=1000.0, slo_percentile=90.0)
    for server in serve(settings, wait=False):
        admin = {"Authorization": f"Bearer {server.token('admin')}"}
        with server.client(server.token("ingest")) as c:
            recs = _records()
            assert c.post("/v1/requests", json=recs).json()["accepted"] == len(recs)
            assert c.put("/api/engines/chat-8b", json=PROFILE, headers=admin).status_code == 200
        server.settle()
        yield server


def _get_csv(c, path: str, params) -> list[dict[str, str]]:
    r = c.get(path, params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "text/csv; charset=utf-8"
    assert r.headers["content-disposition"].startswith('attachment; filename="')
    assert r.text.endswith("\r\n")
    return list(csv.DictReader(io.StringIO(r.text)))


def _same(cell: str, value) -> bool:
    """Whether one CSV cell holds the JSON value."""
    if value is None:
        return cell == ""
    if isinstance(value, bool):
        return cell == ("true" if value else "false")
    if isinstance(value, int | float):
        return float(cell) == value
    if isinstance(value, dict | list):
        return json.loads(cell) == value
    return cell == ("'" + value if value[:1] in "=+-@" else value)


def _check(rows: list[dict[str, str]], items: list[dict], columns: list[str] | None = None):
    assert len(rows) == len(items) > 0
    for row, item in zip(rows, items, strict=True):
        for column in columns or list(item):
            assert _same(row[column], item[column]), (column, row[column], item[column])


def _csv_link(body: dict, path: str, params, key: str = "csv") -> str:
    link = body["links"][key]
    parts = urlsplit(link)
    assert parts.path == path and not parts.scheme and not parts.netloc
    query = parse_qsl(parts.query)
    asked = list(params.items()) if isinstance(params, dict) else list(params)
    assert query[: len(asked)] == asked and query[len(asked)] == ("format", "csv")
    return link


def _list_route(c, path: str, params, key: str):
    """A route whose CSV is one list of its JSON: the rows equal the list's items; the JSON
    links to the CSV and the link answers the same rows."""
    body = c.get(path, params=params).json()
    rows = _get_csv(c, path, {**dict(params), "format": "csv"})
    _check(rows, body[key])
    assert set(rows[0]) == set(body[key][0])  # the header names the JSON's fields
    assert _get_csv(c, _csv_link(body, path, params), None) == rows
    return body, rows


@pytest.mark.parametrize(
    ("path", "key"),
    [
        ("/api/latency/trend", "points"),
        ("/api/latency/ttft-vs-isl", "bins"),
        ("/api/latency/itl-by-position", "bins"),
        ("/api/traffic", "points"),
        ("/api/load", "points"),
        ("/api/latency/inflight", "levels"),
        ("/api/goodput", "over_time"),
    ],
)
def test_a_list_routes_csv_rows_are_its_json_items(live, path, key):
    with live.client() as c:
        _list_route(c, path, WINDOW, key)


def test_heatmap_csv_is_every_cell_of_the_grid(live):
    params = [*WINDOW.items(), ("model", "llama-3.1-8b-instruct"), ("bins", "log2half")]
    with live.client() as c:
        body = c.get("/api/heatmap", params=params).json()
        rows = _get_csv(c, "/api/heatmap", [*params, ("format", "csv")])
        assert _get_csv(c, _csv_link(body, "/api/heatmap", params), None) == rows
    expected = [
        {"isl_from": str(i), "osl_from": str(o), "requests": str(n)}
        for i, line in zip(body["isl_edges"], body["counts"], strict=True)
        for o, n in zip(body["osl_edges"], line, strict=True)
    ]
    assert rows == expected
    assert sum(int(r["requests"]) for r in rows) == body["total"] == 60


def test_quantiles_and_shapes_csv(live):
    with live.client() as c:
        q = c.get("/api/quantiles", params=WINDOW).json()
        rows = _get_csv(c, "/api/quantiles", WINDOW | {"format": "csv"})
        assert list(rows[0]) == ["measure", "p50", "p90", "p99", "p99.9", "max"]
        assert [r["measure"] for r in rows] == ["isl", "osl", "ttft_ms", "itl_ms", "e2e_ms"]
        for row in rows:
            _check([row], [q[row["measure"]]])
        s = c.get("/api/shapes", params=WINDOW).json()
        rows = _get_csv(c, "/api/shapes", WINDOW | {"format": "csv"})
        assert {r["shape"]: int(r["requests"]) for r in rows} == s["counts"]
        assert {r["shape"]: float(r["share"]) for r in rows} == s["shares"]
        e = c.get("/api/latency/e2e", params=WINDOW).json()
        rows = _get_csv(c, "/api/latency/e2e", WINDOW | {"format": "csv"})
        assert [int(r["e2e_from_ms"]) for r in rows] == e["edges_ms"]
        assert [int(r["requests"]) for r in rows] == e["counts"]
        assert _csv_link(e, "/api/latency/e2e", WINDOW)


def test_routes_with_several_tables_link_each(live):
    with live.client() as c:
        t = c.get("/api/traffic", params=WINDOW).json()
        rows = _get_csv(c, _csv_link(t, "/api/traffic", WINDOW, "csv_weekday_hour"), None)
        assert len(rows) == 7 * 24 and rows[0] == {
            "weekday": "Monday",
            "hour": "0",
            "requests": rows[0]["requests"],
        }
        matrix = [[int(r["requests"]) for r in rows[d * 24 : (d + 1) * 24]] for d in range(7)]
        assert matrix == t["weekday_hour"]
        g = c.get("/api/goodput", params=WINDOW).json()
        assert set(g["links"]) == {
            "csv",
            "csv_by_cell",
            "csv_by_tenant",
            "csv_by_engine",
            "csv_misses",
        }
        for table in ("by_cell", "by_tenant", "by_engine", "misses"):
            rows = _get_csv(c, _csv_link(g, "/api/goodput", WINDOW, f"csv_{table}"), None)
            _check(rows, g[table])
        # Nested values are JSON text in their cell; a formula-looking name gets a leading '.
        engine = _get_csv(c, "/api/goodput", WINDOW | {"format": "csv", "table": "by_engine"})
        assert json.loads(engine[0]["slo"])["source"] == "fleet"
        tenants = _get_csv(c, "/api/goodput", WINDOW | {"format": "csv", "table": "by_tenant"})
        assert {r["tenant"] for r in tenants} == {"team-a", "'" + FORMULA_TENANT}


def test_drift_csv_is_one_row_per_finding(live):
    params = {"end": "2026-11-21T00:00:00Z"}
    with live.client() as c:
        body = c.get("/api/drift", params=params).json()
        rows = _get_csv(c, _csv_link(body, "/api/drift", params), None)
    findings = [{"engine": e["engine"], **f} for e in body["engines"] for f in e["findings"]]
    assert list(rows[0]) == ["engine", "kind", "severity", "message", "value"]
    _check(rows, findings)
    assert "beyond_input" in {r["kind"] for r in rows}


def test_bad_format_or_table_is_a_422_naming_the_parameter_and_choices(live):
    with live.client() as c:
        for path in ("/api/heatmap", "/api/latency/e2e", "/api/load", "/api/drift"):
            r = c.get(path, params={"format": "xlsx"})
            assert r.status_code == 422
            assert (
                r.json()["detail"] == "invalid parameters: format: Input should be 'json' or 'csv'"
            )
        r = c.get("/api/goodput", params={"format": "csv", "table": "nope"})
        assert r.status_code == 422 and "table: Input should be 'over_time'" in r.json()["detail"]


def test_the_openapi_document_says_format_csv_answers_text_csv(live):
    with live.client() as c:
        paths = c.get("/openapi.json").json()["paths"]
    for path in (
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
        "/api/goodput",
        "/api/drift",
    ):
        op = paths[path]["get"]
        assert set(op["responses"]["200"]["content"]) == {"application/json", "text/csv"}, path
        (fmt,) = [p for p in op["parameters"] if p["name"] == "format"]
        assert fmt["schema"]["enum"] == ["json", "csv"] and "formula" in fmt["description"]
