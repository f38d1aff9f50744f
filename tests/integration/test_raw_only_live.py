"""Raw-only views over HTTP say what the raw rows no longer count: exact quantiles, drift and
goodput in the API, the Rightsizing and Seasonal pages as Dash draws them, on one server whose
first five days of demo traffic were pruned by retention (sealed: the rollups count them)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from app.analytics.sampling import compact
from app.dashboard import ids
from app.services.demo import DEMO_PROFILES
from app.storage import retention
from tests.support.dash import page_layout, store_callback
from tests.support.database import copy_database, open_migrated
from tests.support.server import LiveServer, serve, server_settings

END = datetime(2026, 11, 23, tzinfo=UTC)
D = timedelta(days=1)
CUT = END - 5 * D
WEEK = {"start": (END - 7 * D).isoformat(), "end": END.isoformat()}


@pytest.fixture(scope="module")
def counts(tmp_path_factory, demo_template) -> tuple:
    """The database (ten days of demo traffic, the raw rows received before CUT pruned) and
    the window's requests before and after the prune."""
    template = demo_template(requests=6_000, days=10, end=END)
    path = copy_database(template, tmp_path_factory.mktemp("raw-only") / "t.duckdb")
    sql = "SELECT count(*) FROM requests WHERE started_at >= ? AND started_at < ?"
    window = [END - 7 * D, END]
    with open_migrated(path) as db:
        cur = db.cursor()
        before = cur.execute(sql, window).fetchone()[0]
        deleted, _ = retention.prune_table(cur, "requests", CUT)
        after = cur.execute(sql, window).fetchone()[0]
    assert deleted > 0 and 0 < after < before
    return path, before, after


@pytest.fixture(scope="module")
def live(counts) -> Iterator[LiveServer]:
    """The app over that file, its clock at END."""
    yield from serve(server_settings(counts[0]), wait=False, clock=lambda: END)


def test_exact_quantiles_say_what_the_raw_rows_miss(live, counts):
    _, before, after = counts
    with live.client() as c:
        exact = c.get("/api/quantiles", params={**WEEK, "exact": "true"}).json()
        rolled = c.get("/api/quantiles", params=WEEK).json()
    note = exact["raw_only_note"]
    assert note.startswith(
        "48 of the window's 168 hours have no raw rows (pruned by retention: "
        "TOKENSHAPE_RETENTION_DAYS); this view reads raw rows only, counting "
        f"{compact(after)} of the window's {compact(before)} requests."
    ), note
    assert "Narrow the window to the 5 days before 2026-11-23 00:00 UTC" in note
    assert "answered_from" not in exact and exact["relative_error"] == 0
    # Without exact=true the rollups answer every hour: no note, the tiers named instead.
    assert "raw_only_note" not in rolled and rolled["answered_from"].startswith("Answered from")
    with live.client() as c:  # a window after the pruned hours misses nothing
        later = c.get("/api/quantiles", params={"start": CUT.isoformat(), "exact": "true"})
    assert "raw_only_note" not in later.json()


def test_drift_and_goodput_routes_carry_the_note(live):
    with live.client() as c:
        drift = c.get("/api/drift", params={"end": END.isoformat()}).json()
        good = c.get("/api/goodput", params=WEEK).json()
        e2e = c.get("/api/latency/e2e", params=WEEK).json()
    assert {e["engine"] for e in drift["engines"]} == set(DEMO_PROFILES)
    for engine in drift["engines"]:  # its two weeks: five days of traffic sealed
        assert engine["raw_only_note"].startswith("120 of the window's 336 hours"), engine
    assert good["raw_only_note"].startswith("48 of the window's 168 hours have no raw rows")
    assert "goodput reads raw rows only" in good["raw_only_note"]
    assert e2e["raw_only_note"].startswith("48 of the window's 168 hours")


def test_rightsizing_and_seasonal_pages_show_it(live):
    with live.client() as c:
        page = page_layout(c, "/rightsizing", "?engine=llm-70b&window=7d")
        plans = page_layout(c, "/seasonal", "?engine=llm-70b&weeks=1")
        fresh = page_layout(c, "/rightsizing", "?engine=llm-70b&window=24h")
    assert f'"{ids.RIGHTSIZING_RAW_ONLY}"' in page and f'"{ids.RIGHTSIZING_DRIFT_RAW_ONLY}"' in page
    assert "48 of the window's 168 hours have no raw rows" in page
    assert "Narrow the window to the last 5 days for the full picture." in page
    assert ids.SEASONAL_RAW_ONLY in plans and "48 of the window's 168 hours" in plans
    # The last 24 hours kept every raw row: no caption (drift's two weeks still lost some).
    assert f'"{ids.RIGHTSIZING_RAW_ONLY}"' not in fresh and ids.RIGHTSIZING_DRIFT_RAW_ONLY in fresh


def test_other_pages_say_it_where_they_read_raw_rows(live):
    # Three sealed hours: 5-minute buckets, which the hourly rollups cannot answer.
    old = END - 6 * D
    custom = (
        f"?window=custom&start={old:%Y-%m-%dT%H:%M}&end={old + timedelta(hours=3):%Y-%m-%dT%H:%M}"
    )
    with live.client() as c:
        traffic = page_layout(c, "/traffic", custom)
        lat = page_layout(c, "/latency", custom)
        shapes = page_layout(c, "/shapes", "?window=7d")
        view = {"query": {"window": "7d", "layer": "goodput"}, "now": END.isoformat()}
        ledger = store_callback(c, ids.SHAPES_SLO_LAYER, ids.SHAPES_VIEW, view)
        home = page_layout(c, "/", "?window=7d")
    assert "3 of the window's 3 hours have no raw rows" in traffic
    assert "counting 0 of the window's" in traffic and "Answered from" not in traffic
    assert f'"{ids.LATENCY_RAW_ONLY}"' in lat
    views = "the trends, goodput, queueing, requests in flight and time to completion read"
    assert f"{views} raw rows only, counting 0 of the window's" in lat
    # The heat map reads the rollups; its goodput layer reads raw rows.
    assert "Answered from" in shapes and "have no raw rows" not in shapes
    assert ids.SHAPES_SLO_SUMMARY in ledger and "goodput reads raw rows only" in ledger
    assert f'"{ids.OVERVIEW_GOODPUT_RAW_ONLY}"' in home and "goodput reads raw rows only" in home
    assert f'"{ids.OVERVIEW_DRIFT_RAW_ONLY}"' in home
