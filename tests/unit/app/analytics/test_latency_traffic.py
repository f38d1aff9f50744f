"""Latency and traffic views (app/analytics) on hand-made data, checked with numpy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analytics import latency, traffic, windows
from app.analytics.filters import Filter
from tests.support.datasets import latency_records
from tests.support.records import BASE_TIME, store

# Three hours of traffic, 20 requests an hour; TTFT grows 0.5 ms per input token.
RECS = latency_records()


@pytest.fixture
def db(database):
    store(database, RECS)
    return database


def test_bucket_choice():
    t = BASE_TIME
    assert windows.bucket_for(t, t + timedelta(hours=6)) == "5m"
    assert windows.bucket_for(t, t + timedelta(days=7)) == "1h"
    assert windows.bucket_for(t, t + timedelta(days=30)) == "1d"


def test_trend_per_hour_matches_numpy(db):
    frame = latency.trend(db.cursor(), Filter(), "1h", "UTC")
    assert list(frame["requests"]) == [20, 20, 20]
    first_hour = [r["ttft_ms"] for r in RECS[:20] if r.get("ttft_ms") is not None]
    assert frame["ttft_ms_p90"][0] == pytest.approx(np.percentile(first_hour, 90))
    assert frame["bucket"][1].to_pydatetime() == BASE_TIME + timedelta(hours=1)


def test_ttft_slope_is_the_per_token_cost(db):
    frame, slope = latency.ttft_vs_isl(db.cursor(), Filter())
    assert slope == pytest.approx(500.0)  # 0.5 ms per token = 500 ms per 1k tokens
    assert frame["requests"].sum() == 59  # the null TTFT is left out


def test_itl_by_position_from_token_gaps(db):
    frame = latency.itl_by_position(db.cursor(), Filter())
    # positions 1..10 of 4 requests; bins start at 1, 2, 4, 8
    assert list(frame["position_from"]) == [1, 2, 4, 8]
    assert list(frame["gaps"]) == [4, 8, 16, 12]
    assert frame["itl_p50"].tolist() == [1.0, 2.5, 5.5, 9.0]


def test_e2e_distribution_counts_every_request_with_a_time(db):
    frame = latency.e2e_distribution(db.cursor(), Filter())
    e2e = [r["e2e_ms"] for r in RECS if r.get("e2e_ms") is not None]
    edges = np.asarray(latency.E2E_EDGES_MS)
    expected = np.bincount(np.searchsorted(edges, e2e, side="right") - 1, minlength=len(edges))
    assert frame["requests"].tolist() == expected.tolist()


def test_traffic_rates_and_weekday_hour_in_a_time_zone(db):
    frame = traffic.rates(db.cursor(), Filter(), "1h", "UTC")
    assert frame["requests_per_s"].tolist() == pytest.approx([20 / 3600] * 3)
    assert frame["input_tokens"][0] == sum(r["isl"] for r in RECS[:20])
    utc = traffic.hour_weekday(db.cursor(), Filter(), "UTC")
    tokyo = traffic.hour_weekday(db.cursor(), Filter(), "Asia/Tokyo")
    friday = BASE_TIME.weekday()  # 2026-11-20 is a Friday
    assert utc.sum() == 60 and utc[friday, 12:15].tolist() == [20, 20, 20]
    assert tokyo[friday, 21:24].tolist() == [20, 20, 20]  # UTC+9


def test_empty_window_gives_empty_views(db):
    flt = Filter(start=datetime(2020, 1, 1, tzinfo=UTC), end=datetime(2020, 1, 2, tzinfo=UTC))
    cur = db.cursor()
    assert latency.trend(cur, flt, "1h", "UTC").empty
    frame, slope = latency.ttft_vs_isl(cur, flt)
    assert frame.empty and slope is None
    assert latency.itl_by_position(cur, flt).empty
    assert latency.e2e_distribution(cur, flt)["requests"].sum() == 0
    assert traffic.hour_weekday(cur, flt, "UTC").sum() == 0
