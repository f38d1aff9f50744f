"""Hourly rollups rebuilt by a serving server in the background, and read by its routes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from app.storage import rollups
from tests.support import http
from tests.support.records import record
from tests.support.server import serve


def test_the_server_rebuilds_settled_hours_in_the_background(settings):
    """Shipped over HTTP into past hours: the mover's thread rebuilds them, health says so,
    and a long window's quantiles then come from the rollups."""
    settings = settings.model_copy(update={"rollup_settle_s": 0})
    for server in serve(settings):
        t0 = datetime(2026, 11, 10, 6, tzinfo=UTC)
        recs = [
            record(i, "bg", started_at=(t0 + timedelta(minutes=7 * i)).isoformat(), isl=50 + i)
            for i in range(600)
        ]
        with server.client(server.token()) as c:
            assert c.post("/v1/requests", json=recs).json()["accepted"] == 600
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            health = http.get(server.url + "/api/health", timeout=10).json()["database"]
            if health["rollup_hours"] and not health["stale_rollup_hours"]:
                break
            time.sleep(0.1)
        assert health["rollup_hours"] == 70 and health["stale_rollup_hours"] == 0
        with server.client() as c:
            q = c.get("/api/quantiles").json()
            exact = c.get("/api/quantiles", params={"exact": "true"}).json()
            heat = c.get("/api/heatmap").json()
        assert q["relative_error"] == pytest.approx(rollups.RELATIVE_ERROR)
        assert exact["relative_error"] == 0
        assert q["isl"]["max"] == exact["isl"]["max"] == 649
        assert q["isl"]["p50"] == pytest.approx(exact["isl"]["p50"], rel=0.0099)
        assert heat["total"] == 600
