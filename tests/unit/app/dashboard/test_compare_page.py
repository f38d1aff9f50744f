"""The Compare page's pure parts (app/dashboard/pages/compare): the benchmark gateway it offers
when the URL names none, and the export link for a replay."""

from __future__ import annotations

from datetime import UTC, datetime
from urllib.parse import parse_qs, urlsplit

from app.dashboard.pages.compare import export_href, guess_benchmark


def test_a_gateway_named_for_a_benchmark_is_offered_first():
    assert guess_benchmark(["gw-internal", "gw-public", "AIPerf-Replay", "genai-perf"]) == (
        "AIPerf-Replay"
    )
    assert guess_benchmark(["gw-public", "nightly-loadtest"]) == "nightly-loadtest"
    assert guess_benchmark(["gw-public", "gw-internal"]) is None


def test_the_export_link_names_the_engine_and_window_url_encoded():
    start = datetime(2026, 11, 16, tzinfo=UTC)
    href = export_href("chat 8b/&x", start, datetime(2026, 11, 23, tzinfo=UTC), ("gw-a", "gw-b"))
    parts = urlsplit(href)
    assert parts.path == "/api/export"
    assert parse_qs(parts.query) == {
        "format": ["mooncake"],
        "engine": ["chat 8b/&x"],
        "peak": ["1"],
        "status": ["ok"],
        "gateway": ["gw-a", "gw-b"],
        "start": ["2026-11-16T00:00:00+00:00"],
        "end": ["2026-11-23T00:00:00+00:00"],
    }
    # "+" encoded: a bare one would read back as a space and the time would not parse.
    assert "%2B00%3A00" in href and "&x" not in href
    assert "start" not in export_href("e", None, None)
