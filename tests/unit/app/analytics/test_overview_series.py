"""The Overview's latency series (app/analytics/overview_series.py) on hand-made requests:
quantiles per bucket against numpy, weighted by sampling, per engine."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from app.analytics import overview_series as series
from app.analytics.filters import Filter
from tests.support.records import BASE_TIME, record, store

TTFT = [100.0, 200.0, 300.0, 400.0, 1000.0]


def _at(i: int, minutes: int, **fields):
    when = BASE_TIME + timedelta(minutes=minutes, seconds=i)
    return record(i, started_at=when.isoformat(), e2e_ms=5000.0, **fields)


@pytest.fixture
def db(database):
    rows = [_at(i, 0, engine="chat", ttft_ms=v, itl_ms=v / 10) for i, v in enumerate(TTFT)]
    rows += [_at(10 + i, 60, engine="rag", ttft_ms=v * 2, itl_ms=None) for i, v in enumerate(TTFT)]
    store(database, rows)
    return database


def test_p95_per_hour_is_numpy_linear(db):
    frame = series.quantile_over_time(db.cursor(), Filter(), "1h", "UTC", 0.95)
    assert list(frame["requests"]) == [5.0, 5.0]
    assert frame["ttft_ms"].tolist() == pytest.approx(
        [np.quantile(TTFT, 0.95), np.quantile([v * 2 for v in TTFT], 0.95)]
    )
    assert frame["itl_ms"].iloc[0] == pytest.approx(np.quantile([v / 10 for v in TTFT], 0.95))
    assert np.isnan(frame["itl_ms"].iloc[1])  # the second hour measured no ITL
    assert frame.attrs["relative_error"] == 0.0


def test_sampled_rows_weigh_like_their_copies(database):
    # A row kept with probability 1/4 stands for 4 requests: the same quantiles as 4 copies.
    rows = [_at(0, 0, ttft_ms=100.0, sample_rate=0.25), _at(1, 0, ttft_ms=900.0)]
    store(database, rows)
    frame = series.quantile_over_time(database.cursor(), Filter(), "1h", "UTC", 0.9)
    assert frame["requests"].tolist() == [5.0]
    assert frame["ttft_ms"].iloc[0] == pytest.approx(np.quantile([100.0] * 4 + [900.0], 0.9))


def test_engines_busiest_first_and_one_engine_filter(db):
    store(db, [_at(20, 0, engine="rag", ttft_ms=1.0)])
    cur = db.cursor()
    assert series.engines_in(cur, Filter()) == ["rag", "chat"]
    only = series.quantile_over_time(cur, series.for_engine(Filter(), "chat"), "1h", "UTC", 0.5)
    assert only["ttft_ms"].tolist() == [300.0]


def test_the_fleet_chart_asks_for_e2e_too_and_only_known_measures(db):
    cur = db.cursor()
    frame = series.quantile_over_time(
        cur, Filter(), "1h", "UTC", 0.95, measures=series.FLEET_MEASURES
    )
    assert frame["e2e_ms"].tolist() == [5000.0, 5000.0]
    assert frame["ttft_ms"].iloc[0] == pytest.approx(np.quantile(TTFT, 0.95))
    with pytest.raises(ValueError, match="choose from ttft_ms, itl_ms, e2e_ms"):
        series.quantile_over_time(cur, Filter(), "1h", "UTC", 0.95, measures=("isl; DROP",))
