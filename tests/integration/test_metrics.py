"""GET /metrics over HTTP: ingest outcomes, writer, HTTP responses and email runs, as scraped."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.storage import report_runs
from tests.support import http
from tests.support.net import free_port
from tests.support.records import batch, litellm_payload, record
from tests.support.server import LiveServer, serve

LIMIT = 4096


@pytest.fixture
def settings(db_path) -> Settings:
    """A small body limit, so a 413 is cheap to provoke."""
    return Settings(db=db_path, port=free_port(), max_body_bytes=LIMIT, _env_file=None)


def scrape(live: LiveServer) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics, keyed by (sample name, sorted labels)."""
    r = http.get(live.url + "/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(r.text)
        for s in family.samples
    }


def value(samples: dict, name: str, **labels: str) -> float | None:
    """One sample's value, None when the series is absent."""
    return samples.get((name, tuple(sorted(labels.items()))))


def records(samples: dict, gateway: str, fmt: str, outcome: str) -> float | None:
    return value(
        samples, "tokenshape_ingest_records_total", gateway=gateway, format=fmt, outcome=outcome
    )


def series(samples: dict, name: str) -> list[dict[str, str]]:
    """The label sets of every sample of a name."""
    return [dict(labels) for (n, labels) in samples if n == name]


def test_ingest_outcomes_by_gateway_and_format(live: LiveServer):
    native = live.client(live.token("ingest", gateway="gw-a"))
    proxy = live.client(live.token("ingest", gateway="gw-lite"))
    bad = record(90, isl=-1)
    first = native.post("/v1/requests", json=[*batch(3), bad]).json()
    again = native.post("/v1/requests", json=batch(2)).json()  # r-0, r-1 once more
    garbage = native.post(
        "/v1/requests", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    too_big = native.post("/v1/requests", json=batch(80, prefix="big"))
    lite = proxy.post("/v1/litellm", json=[litellm_payload(0), litellm_payload(1)]).json()
    assert (first["accepted"], first["rejected"], again["duplicates"]) == (3, 1, 2)
    assert (garbage.status_code, too_big.status_code, lite["accepted"]) == (400, 413, 2)

    samples = scrape(live)
    assert records(samples, "gw-a", "native", "accepted") == 3
    assert records(samples, "gw-a", "native", "duplicate") == 2
    # One bad item, the unparsable payload and the oversized one: all three are in rejects.
    assert records(samples, "gw-a", "native", "rejected") == 3
    assert records(samples, "gw-a", "native", "rejected") == live.scalar(
        "SELECT count(*) FROM rejects WHERE gateway = 'gw-a' AND format = 'native'"
    )
    assert records(samples, "gw-lite", "litellm", "accepted") == 2
    assert records(samples, "gw-lite", "litellm", "duplicate") is None  # none happened
    assert {s["gateway"] for s in series(samples, "tokenshape_ingest_records_total")} == {
        "gw-a",
        "gw-lite",
    }
    native.close()
    proxy.close()


def test_writer_flush_latency_and_queue_gauges(live: LiveServer, ingest: httpx.Client):
    for i in range(3):
        assert ingest.post("/v1/requests", json=batch(5, prefix=f"f{i}")).status_code == 200
    live.settle()
    samples = scrape(live)
    flushes = value(samples, "tokenshape_writer_flush_seconds_count")
    assert flushes is not None and flushes > 0
    assert flushes == live.app.state.runtime.writer.stats.flushes
    assert value(samples, "tokenshape_writer_flush_seconds_bucket", le="+Inf") == flushes
    assert value(samples, "tokenshape_writer_flush_seconds_sum") > 0
    assert value(samples, "tokenshape_writer_running") == 1
    assert value(samples, "tokenshape_writer_queue_rows") == 0  # settled: nothing waits
    assert value(samples, "tokenshape_writer_journal_rows") == 0
    assert (
        value(samples, "tokenshape_writer_queue_capacity_rows")
        == live.app.state.runtime.settings.writer_queue_rows
    )
    assert value(samples, "tokenshape_writer_saturated_total") == 0
    assert value(samples, "tokenshape_writer_flush_failures_total") == 0
    assert value(samples, "process_resident_memory_bytes") > 0


def test_http_responses_by_route_template_and_status(live: LiveServer, ingest: httpx.Client):
    before = scrape(live)
    assert http.post(live.url + "/v1/requests", json=[record(0)]).status_code == 401
    for i in range(2):
        assert ingest.post("/v1/requests", json=[record(i)]).status_code == 200
    for name in ("alpha", "beta"):
        http.get(f"{live.url}/api/engines/{name}")
    assert http.get(live.url + "/shapes").status_code == 200
    assert http.get(live.url + "/_dash-layout").status_code == 200
    nowhere = http.post(live.url + "/no/such/route/x1")
    brewed = http.request("PROPFIND", live.url + "/no/such/route/x2")
    after = scrape(live)

    def delta(method: str, route: str, status: str) -> float:
        labels = {"method": method, "route": route, "status": status}
        name = "tokenshape_http_responses_total"
        return (value(after, name, **labels) or 0) - (value(before, name, **labels) or 0)

    assert delta("POST", "/v1/requests", "401") == 1
    assert delta("POST", "/v1/requests", "200") == 2
    assert delta("GET", "dash", "200") == 2
    # Unknown paths fall to Dash's catch-all route (405 for other methods): still one label.
    assert (nowhere.status_code, brewed.status_code) == (405, 405)
    assert delta("POST", "dash", "405") == 1
    assert delta("other", "dash", "405") == 1  # any method a client invents is "other"
    # The scrape before this one was counted once it had been answered.
    assert delta("GET", "/metrics", "200") == 1
    routes = {s["route"] for s in series(after, "tokenshape_http_responses_total")}
    engine = [
        s for s in series(after, "tokenshape_http_responses_total") if "engines" in s["route"]
    ]
    assert {s["route"] for s in engine} == {"/api/engines/{name}"}
    assert sum(value(after, "tokenshape_http_responses_total", **s) for s in engine) == 2
    assert not any("alpha" in r or "beta" in r or "/no/" in r or "/_dash" in r for r in routes)
    assert value(
        after, "tokenshape_http_request_duration_seconds_count", method="POST", route="/v1/requests"
    ) == 3 + (
        value(
            before,
            "tokenshape_http_request_duration_seconds_count",
            method="POST",
            route="/v1/requests",
        )
        or 0
    )


def test_answers_before_routing_keep_the_route_template(settings):
    gen = serve(settings.model_copy(update={"auth": "on"}))
    live = next(gen)
    try:
        assert http.get(live.url + "/metrics").status_code == 401
        for name in ("alpha", "beta"):
            assert http.get(f"{live.url}/api/engines/{name}").status_code == 401
        r = http.get(
            live.url + "/metrics", headers={"Authorization": f"Bearer {live.token('read')}"}
        )
        assert r.status_code == 200
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(r.text)
            for s in family.samples
        }
        labels = {"method": "GET", "status": "401"}
        name = "tokenshape_http_responses_total"
        assert value(samples, name, route="/api/engines/{name}", **labels) == 2
        assert value(samples, name, route="/metrics", **labels) == 1
        assert value(samples, name, route="unmatched", **labels) is None
    finally:
        gen.close()


def test_report_runs_by_status(live: LiveServer):
    assert value(scrape(live), "tokenshape_report_runs", status="sent") == 0
    cur = live.db.cursor()
    now = datetime.now(UTC)
    for week, status in (("2026-W46", "sent"), ("2026-W47", "failed"), ("2026-W47", "failed")):
        report_runs.record(
            cur,
            week=week,
            recipients=["ops@example.com"],
            status=status,
            attempt=1,
            started_at=now,
            finished_at=now,
        )
    samples = scrape(live)
    assert value(samples, "tokenshape_report_runs", status="sent") == 1
    assert value(samples, "tokenshape_report_runs", status="failed") == 2
    assert value(samples, "tokenshape_report_runs", status="sending") == 0
    # A scraper that asks for OpenMetrics gets it, terminated as that format requires.
    om = http.get(live.url + "/metrics", headers={"Accept": "application/openmetrics-text"})
    assert om.headers["content-type"].startswith("application/openmetrics-text")
    assert om.text.endswith("# EOF\n") and 'tokenshape_report_runs{status="sent"} 1' in om.text
