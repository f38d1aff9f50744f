"""Local hours (app/analytics/seasonal): a zone a quarter hour off counts real seconds."""

from __future__ import annotations

from datetime import UTC, datetime

from app.analytics.seasonal import local_hour_seconds


def test_quarter_hour_zones_count_real_seconds():
    start, end = datetime(2026, 11, 20, 0, tzinfo=UTC), datetime(2026, 11, 20, 2, tzinfo=UTC)
    seconds = local_hour_seconds(start, end, "Asia/Kolkata")  # UTC+05:30
    assert seconds == {("2026-11-20", 5): 1800, ("2026-11-20", 6): 3600, ("2026-11-20", 7): 1800}
