"""Per-token rate limits: 429 with Retry-After from the deficit, nothing stored, every route;
a shipper through a tight limit still delivers every record exactly once. The limiter's
monotonic clock is the only thing faked: time passes when the test says so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ingest.ship import ship
from tests.support.records import batch, ndjson, record
from tests.support.server import LiveServer, serve


class FakeMonotonic:
    """A monotonic clock that moves only when told (or when the shipper 'sleeps')."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> FakeMonotonic:
    return FakeMonotonic()


def _serve(settings, clock, **limits) -> Iterator[LiveServer]:
    yield from serve(settings.model_copy(update=limits), wait=False, monotonic=clock)


@pytest.fixture
def tight(settings, clock) -> Iterator[LiveServer]:
    """A server allowing 2 requests/s (burst 2) and 10 records/s (burst 100) per token."""
    yield from _serve(
        settings,
        clock,
        rate_limit_requests=2,
        rate_limit_requests_burst=2,
        rate_limit_records=10,
        rate_limit_records_burst=100,
    )


def _otlp_span(i: int) -> dict:
    return {
        "traceId": "5b8efff798038103d269b633813fc60c",
        "spanId": f"{i:016x}",
        "name": "chat",
        "startTimeUnixNano": "1795000000000000000",
        "endTimeUnixNano": "1795000001000000000",
        "attributes": [
            {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "10"}},
            {"key": "gen_ai.usage.output_tokens", "value": {"intValue": "5"}},
        ],
    }


def _traces(n: int, start: int = 1) -> dict:
    spans = [_otlp_span(i) for i in range(start, start + n)]
    return {"resourceSpans": [{"scopeSpans": [{"spans": spans}]}]}


def test_requests_over_the_limit_get_429_before_the_body_is_read(tight, clock):
    token = tight.token()
    with tight.client(token) as c:
        assert c.post("/v1/requests", json=batch(3, "a")).status_code == 200
        assert c.post("/v1/requests", json=batch(3, "b")).status_code == 200
        # Not JSON at all: refused for the rate, so the body is never parsed or quarantined.
        r = c.post("/v1/requests", content=b"{not json", headers={"Content-Type": "text/plain"})
        assert r.status_code == 429
        assert r.headers["retry-after"] == "1"  # one request missing at 2/s: 0.5 s → 1
        detail = r.json()["detail"]
        assert "TOKENSHAPE_RATE_LIMIT_REQUESTS" in detail and "2 requests/s" in detail
        assert "retry after 1 s" in detail and "nothing was stored" in detail
        assert "gateway gw-test" in detail and token not in detail
        clock.advance(0.5)
        assert c.post("/v1/requests", json=batch(3, "c")).status_code == 200
    assert tight.scalar("SELECT count(*) FROM requests") == 9
    assert tight.scalar("SELECT count(*) FROM rejects") == 0
    assert tight.app.state.runtime.rate_limiter.refused["requests"] == 1


def test_records_over_the_limit_get_429_with_the_wait_from_the_deficit(tight, clock):
    token = tight.token()
    with tight.client(token) as c:
        assert c.post("/v1/requests", json=batch(100, "a")).json()["accepted"] == 100
        clock.advance(1.0)  # requests bucket refilled; records bucket holds 10
        bad = batch(49, "b") + [record(99, "b", isl=-1)]  # 50 records, one invalid
        r = c.post("/v1/requests", json=bad)
        assert r.status_code == 429
        assert r.headers["retry-after"] == "4"  # 40 records missing at 10/s
        assert "TOKENSHAPE_RATE_LIMIT_RECORDS" in r.json()["detail"]
        assert "10 records/s" in r.json()["detail"]
        clock.advance(3.5)  # 45 now, 50 needed: half a second → rounded up to 1
        r = c.post("/v1/requests", json=bad)
        assert r.status_code == 429 and r.headers["retry-after"] == "1"
        clock.advance(0.5)
        r = c.post("/v1/requests", json=bad)
        assert r.status_code == 200 and r.json()["accepted"] == 49
    # The refused attempts left nothing behind: neither rows nor the invalid item's reject.
    assert tight.scalar("SELECT count(*) FROM requests") == 149
    assert tight.scalar("SELECT count(*) FROM rejects") == 1


def test_limits_are_per_token_and_cover_otlp(tight, clock):
    first, second = tight.token(), tight.token(gateway="gw-other")
    with tight.client(first) as a, tight.client(second) as b:
        assert a.post("/v1/traces", json=_traces(60)).status_code == 200
        assert a.post("/v1/logs", json={"resourceLogs": []}).status_code == 200
        r = a.post("/v1/traces", json=_traces(1, 100))
        assert r.status_code == 429 and "requests/s" in r.json()["detail"]
        clock.advance(1.0)
        r = a.post("/v1/traces", json=_traces(60, 200))  # 50 left in its records bucket
        assert r.status_code == 429 and "records/s" in r.json()["detail"]
        assert r.headers["retry-after"] == "1"
        # Another token (another gateway) has buckets of its own.
        assert b.post("/v1/traces", json=_traces(60, 300)).status_code == 200
        assert b.post("/v1/requests", json=batch(1, "z")).status_code == 200
        r = b.post("/v1/litellm", json=[])
        assert r.status_code == 429 and "gw-other" in r.json()["detail"]
    assert tight.scalar("SELECT count(*) FROM requests WHERE gateway = 'gw-test'") == 60
    assert tight.scalar("SELECT count(*) FROM requests WHERE gateway = 'gw-other'") == 61


def test_zero_means_unlimited(settings, clock):
    # Bursts of 1: were 0 a rate rather than "no limit", the second request would be refused.
    gen = _serve(
        settings,
        clock,
        rate_limit_requests=0,
        rate_limit_requests_burst=1,
        rate_limit_records=0,
        rate_limit_records_burst=1,
    )
    live = next(gen)
    try:
        with live.client(live.token()) as c:
            # The clock never moves: any finite limit would refuse some of these.
            codes = {c.post("/v1/requests", json=batch(500, f"u{k}")).status_code for k in range(9)}
        assert codes == {200}
        assert live.scalar("SELECT count(*) FROM requests") == 4500
    finally:
        gen.close()


def test_a_shipper_through_a_tight_limit_delivers_everything_once(tight, clock, tmp_path):
    n = 1000
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(i, "ship") for i in range(n)]))
    waits: list[float] = []

    def sleep(seconds: float) -> None:  # the shipper's wait is what moves the limiter's time
        waits.append(seconds)
        clock.advance(seconds)

    stats = ship(path, tight.url, tight.token(), batch=60, sleep=sleep, checkpoint=tmp_path / "cp")
    assert stats.accepted == n and stats.duplicates == 0 and stats.rejected == 0
    assert stats.retries == len(waits) > 0 and all(w >= 1.0 for w in waits)
    refused = tight.app.state.runtime.rate_limiter.refused
    assert refused["records"] > 0 and stats.retries == refused["records"] + refused["requests"]
    assert tight.scalar("SELECT count(*) FROM requests") == n
    assert tight.scalar("SELECT count(DISTINCT request_id) FROM requests") == n
    # 1000 records at 10/s after a burst of 100 cannot take less than 90 s of limiter time.
    assert clock.now - 1000.0 >= (n - 100) / 10
