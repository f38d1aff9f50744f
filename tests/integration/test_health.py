"""GET /api/health on a fresh server: the database and the writer as ingest left them."""

from __future__ import annotations

from app.storage import migrate
from tests.support.records import batch


def test_health_reports_database_and_writer(live, ingest):
    ingest.post("/v1/requests", json=batch(3))
    live.settle()  # acknowledged rows reach the table within moments (the journal moves)
    h = ingest.get("/api/health").json()
    assert h["status"] == "ok"
    assert h["database"]["requests"] == 3 and h["database"]["revision"] == migrate.head_revision()
    assert h["writer"]["running"] and h["writer"]["rows_accepted"] == 3
    assert h["writer"]["journal_rows"] == 0 and h["writer"]["moved_rows"] == 3
    assert h["writer"]["incoming_requests"] == 0
