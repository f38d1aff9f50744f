"""`tokenshape ship`'s reading of Retry-After (ingest/ship)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

from ingest.ship import _retry_after


def test_retry_after_takes_seconds_and_http_dates():
    assert _retry_after("2") == 2.0 and _retry_after(" 1.5 ") == 1.5
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=120), usegmt=True)
    assert 100 < (_retry_after(later) or 0) <= 120
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=120), usegmt=True)
    assert _retry_after(past) == 0.0
    for junk in (None, "", "soon", "-3", "1e9x"):
        assert _retry_after(junk) is None
