"""GET /metrics over HTTP: ingest outcomes, writer, HTTP responses and email runs, as scraped."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from app.config import Settings
from app.main import create_app
from app.storage import report_runs
from app.storage.batches import Batch, WriteResult
from tests.conftest import LiveServer, free_port
from tests.fixtures import batch, record
from tests.test_litellm import payload as litellm_payload

LIMIT = 4096


@pytest.fixture
def settings(tmp_path) -> Settings:
    """A small body limit, so a 413 is cheap to provoke."""
    return Settings(
        db=tmp_path / "t.duckdb", port=free_port(), max_body_bytes=LIMIT, _env_file=None
    )


def scrape(live: LiveServer) -> dict[tuple[str, tuple], float]:
    """Every sample of /metrics, keyed by (sample name, sorted labels)."""
    r = httpx.get(live.url + "/metrics")
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
    assert flushes == live.app.state.writer.stats.flushes
    assert value(samples, "tokenshape_writer_flush_seconds_bucket", le="+Inf") == flushes
    assert value(samples, "tokenshape_writer_flush_seconds_sum") > 0
    assert value(samples, "tokenshape_writer_running") == 1
    assert value(samples, "tokenshape_writer_queue_rows") == 0  # settled: nothing waits
    assert value(samples, "tokenshape_writer_journal_rows") == 0
    assert (
        value(samples, "tokenshape_writer_queue_capacity_rows")
        == live.app.state.settings.writer_queue_rows
    )
    assert value(samples, "tokenshape_writer_saturated_total") == 0
    assert value(samples, "tokenshape_writer_flush_failures_total") == 0
    assert value(samples, "process_resident_memory_bytes") > 0


def test_http_responses_by_route_template_and_status(live: LiveServer, ingest: httpx.Client):
    before = scrape(live)
    assert httpx.post(live.url + "/v1/requests", json=[record(0)]).status_code == 401
    for i in range(2):
        assert ingest.post("/v1/requests", json=[record(i)]).status_code == 200
    for name in ("alpha", "beta"):
        httpx.get(f"{live.url}/api/engines/{name}")
    assert httpx.get(live.url + "/shapes").status_code == 200
    assert httpx.get(live.url + "/_dash-layout").status_code == 200
    after = scrape(live)

    def delta(method: str, route: str, status: str) -> float:
        labels = {"method": method, "route": route, "status": status}
        name = "tokenshape_http_responses_total"
        return (value(after, name, **labels) or 0) - (value(before, name, **labels) or 0)

    assert delta("POST", "/v1/requests", "401") == 1
    assert delta("POST", "/v1/requests", "200") == 2
    assert delta("GET", "dash", "200") == 2
    # The scrape before this one was counted once it had been answered.
    assert delta("GET", "/metrics", "200") == 1
    routes = {s["route"] for s in series(after, "tokenshape_http_responses_total")}
    engine = [
        s for s in series(after, "tokenshape_http_responses_total") if "engines" in s["route"]
    ]
    assert {s["route"] for s in engine} == {"/api/engines/{name}"}
    assert sum(value(after, "tokenshape_http_responses_total", **s) for s in engine) == 2
    assert not any("alpha" in r or "beta" in r or r.startswith("/_dash") for r in routes)
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


def test_each_app_counts_on_its_own_registry(tmp_path):
    one = create_app(Settings(db=tmp_path / "a.duckdb", _env_file=None))
    two = create_app(Settings(db=tmp_path / "b.duckdb", _env_file=None))
    b = Batch("gw", "native", datetime.now(UTC), None)
    one.state.metrics.flushed(0.01, [b], [WriteResult(accepted=4, duplicates=0, rejected=0)])
    labels = {"gateway": "gw", "format": "native", "outcome": "accepted"}
    assert (
        one.state.metrics.registry.get_sample_value("tokenshape_ingest_records_total", labels) == 4
    )
    assert (
        two.state.metrics.registry.get_sample_value("tokenshape_ingest_records_total", labels)
        is None
    )
