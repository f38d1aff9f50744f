"""The single writer under load, over HTTP: concurrent shippers, group commit, saturation."""

from __future__ import annotations

import threading
import time

import httpx

from tests.support import http
from tests.support.records import batch
from tests.support.server import served


def test_eight_concurrent_shippers_exact_counts(live):
    token = live.token("ingest")
    errors: list[str] = []
    per_shipper, size = 15, 40

    def ship(k: int) -> None:
        with live.client(token) as c:
            for b in range(per_shipper):
                # Every other batch overlaps the previous one: duplicates must be exact too.
                start = b * size - (size // 2 if b % 2 else 0)
                r = c.post("/v1/requests", json=batch(size, f"s{k}", start=max(start, 0)))
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text}")

    threads = [threading.Thread(target=ship, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    expected_per_shipper = per_shipper * size - (per_shipper // 2) * (size // 2)
    assert live.scalar("SELECT count(*) FROM requests") == 8 * expected_per_shipper
    assert (
        live.scalar(
            "SELECT count(*) FROM (SELECT gateway, request_id FROM requests GROUP BY ALL "
            "HAVING count(*) > 1)"
        )
        == 0
    )
    health = http.get(live.url + "/api/health").json()["writer"]
    assert health["rows_accepted"] == 8 * expected_per_shipper
    assert health["rows_duplicate"] == 8 * (per_shipper // 2) * (size // 2)
    assert health["flushes"] <= health["batches"]


def test_saturated_writer_answers_503_with_retry_after(settings):
    """Room for 5 waiting rows, a commit at 5: the first batch (4 rows) waits in the queue for
    company, a second of 4 does not fit and is refused, and one row that fits completes the
    commit. The test waits on the writer's state, never races a flush window on the clock."""
    tight = settings.model_copy(
        update={"writer_queue_rows": 5, "writer_flush_rows": 5, "writer_flush_ms": 600_000.0}
    )
    with served(tight) as live:
        token = live.token("ingest")
        filler = live.token("ingest", gateway="gw-filler")
        writer = live.app.state.runtime.writer
        first: list[httpx.Response] = []
        t = threading.Thread(
            target=lambda: first.append(
                http.post(
                    live.url + "/v1/requests",
                    json=batch(4, "a"),
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=30,
                )
            )
        )
        t.start()
        deadline = time.monotonic() + 30
        while writer.pending_rows < 4 and time.monotonic() < deadline:
            time.sleep(0.005)  # until the first batch waits in the queue for company
        r = http.post(
            live.url + "/v1/requests",
            json=batch(4, "b"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        with live.client(filler) as c:  # 4 + 1 rows: the commit is full and goes at once
            assert c.post("/v1/requests", json=batch(1, "c")).status_code == 200
        t.join()
        assert r.status_code == 503
        assert r.headers["retry-after"] == "1"
        assert "retry" in r.json()["detail"]
        assert first[0].status_code == 200 and first[0].json()["accepted"] == 4
        assert live.scalar("SELECT count(*) FROM requests WHERE gateway = 'gw-test'") == 4
