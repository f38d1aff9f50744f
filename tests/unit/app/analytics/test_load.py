"""The load views (app/analytics/load.py): in-flight counts worked out by hand, then checked
against a brute-force sweep in Python on random overlapping requests."""

from __future__ import annotations

import random
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest

from app.analytics import load
from app.analytics.bins import LOG2_EDGES
from app.analytics.filters import Filter
from tests.support.load_data import LEVELS, WINDOW, load_records
from tests.support.records import BASE_TIME, record, store

WINDOW_FILTER = Filter(start=WINDOW[0], end=WINDOW[1])


@pytest.fixture
def db(database):
    store(database, load_records())
    return database


def test_series_means_and_maxima_by_hand(db):
    frame = load.inflight_series(db.cursor(), WINDOW_FILTER, "5m")
    rows = {(r["engine"], r["bucket"].to_pydatetime()): r for r in frame.to_dict("records")}
    first, second = WINDOW[0], WINDOW[0] + timedelta(minutes=5)
    assert sorted(rows) == sorted((e, b) for e in ("chat-8b", "code-7b") for b in (first, second))
    assert rows["chat-8b", first]["inflight_mean"] == pytest.approx(430 / 300)
    assert rows["chat-8b", first]["inflight_max"] == 3
    assert rows["chat-8b", second]["inflight_mean"] == pytest.approx(230 / 300)
    assert rows["chat-8b", second]["inflight_max"] == 1
    assert rows["code-7b", first]["inflight_mean"] == pytest.approx(50 / 300)
    assert rows["code-7b", first]["inflight_max"] == 1
    assert rows["code-7b", second]["inflight_mean"] == 0
    assert rows["code-7b", second]["inflight_max"] == 0


def test_series_counts_the_whole_engine_whatever_the_tenant(db):
    team_b = Filter(start=WINDOW[0], end=WINDOW[1], tenants=("team-b",))
    frame = load.inflight_series(db.cursor(), team_b, "5m")
    assert set(frame["engine"]) == {"chat-8b"}  # the engines of the kept requests
    assert frame["inflight_mean"].tolist() == pytest.approx([430 / 300, 230 / 300])


def test_series_window_part_buckets_and_open_window(db):
    # A window starting mid-bucket: the first bucket's mean is over its part in the window.
    flt = Filter(start=WINDOW[0] + timedelta(seconds=60), end=WINDOW[1], engines=("chat-8b",))
    frame = load.inflight_series(db.cursor(), flt, "5m")
    # [60, 300): B 30 + C 240 + D 30 + G 10 = 310 s over 240 s; A has ended.
    assert frame["inflight_mean"][0] == pytest.approx(310 / 240)
    assert frame["inflight_max"][0] == 2
    # An open window runs from the first start to the last end of the kept requests.
    start, end = load.series_window(db.cursor(), Filter(engines=("chat-8b",)))
    assert start == BASE_TIME - timedelta(seconds=60)
    assert end == BASE_TIME + timedelta(seconds=700)


def test_levels_at_arrival_by_hand(db):
    frame = load.latency_by_inflight(db.cursor(), WINDOW_FILTER)
    assert list(frame.columns) == load.LEVEL_COLUMNS
    chat = frame[frame["engine"] == "chat-8b"]
    assert chat["inflight_lo"].tolist() == [1, 2, 3]
    assert chat["inflight_hi"].tolist() == [1, 2, 4]
    assert chat["requests"].tolist() == [1, 2, 2]  # E; D and G; B and C
    top = chat.iloc[2]
    assert top["inflight_mean"] == 3
    assert top["ttft_p50"] == pytest.approx(200.0)  # B 100, C 300
    assert top["ttft_p90"] == pytest.approx(280.0)
    assert top["ttft_p99"] == pytest.approx(298.0)
    assert top["itl_p50"] == pytest.approx(15.0)
    assert top["itl_p99"] == pytest.approx(19.9)
    assert top["isl_mean"] == pytest.approx(1600.0)
    code = frame[frame["engine"] == "code-7b"]
    assert code[["inflight_lo", "requests"]].values.tolist() == [[1, 1]]


def test_one_level_per_count_and_pooled_engines(db):
    frame = load.latency_by_inflight(db.cursor(), WINDOW_FILTER, edges=range(1, 10))
    chat = frame[frame["engine"] == "chat-8b"]
    expected = {n: sum(1 for k, v in LEVELS.items() if v == n and k != "F") for n in (1, 2, 3)}
    assert dict(zip(chat["inflight_lo"], chat["requests"], strict=True)) == expected
    pooled = load.latency_by_inflight(db.cursor(), WINDOW_FILTER, per_engine=False)
    assert pooled["engine"].isna().all()
    assert pooled["requests"].tolist() == [2, 2, 2]  # E and F at 1 (each on its engine)
    with pytest.raises(ValueError, match="start at 1"):
        load.latency_by_inflight(db.cursor(), WINDOW_FILTER, edges=(0, 4))


def test_filter_picks_requests_not_the_load(db):
    team_b = Filter(start=WINDOW[0], end=WINDOW[1], tenants=("team-b",))
    frame = load.latency_by_inflight(db.cursor(), team_b)
    # G alone is read, and C (team-a) still counts as in flight beside it.
    assert frame[["engine", "inflight_lo", "requests"]].values.tolist() == [["chat-8b", 2, 1]]


def test_split_by_input_length(db):
    frame = load.latency_by_inflight(db.cursor(), WINDOW_FILTER, isl_edges=LOG2_EDGES)
    assert "isl_from" in frame.columns
    top = frame[(frame["engine"] == "chat-8b") & (frame["inflight_lo"] == 3)]
    # B (200 tokens) and C (3,000) fall in ISL bins 128+ and 2048+.
    assert top["isl_from"].tolist() == [128, 2048]
    assert top["ttft_p50"].tolist() == [100.0, 300.0]


def test_ttft_by_isl_and_load_thirds(db):
    frame = load.ttft_by_isl_and_load(db.cursor(), WINDOW_FILTER, LOG2_EDGES)
    # chat-8b's levels 1, 2, 2, 3, 3: thirds at 2 and 3, so low holds 1-2 and medium 3.
    assert sorted(set(frame["load_name"])) == ["low", "medium"]
    low = frame[frame["load"] == 0]
    assert low["requests"].sum() == 4  # E, D, G and F (code-7b's only level is its low)
    assert set(low["inflight_lo"]) == {1} and set(low["inflight_hi"]) == {2}
    medium = frame[frame["load"] == 1]
    assert medium["requests"].sum() == 2 and set(medium["inflight_lo"]) == {3}


def test_load_views_are_the_three_views_from_one_sweep(db):
    cur = db.cursor()
    views = load.load_views(cur, WINDOW_FILTER, "UTC", bucket="5m")
    pd.testing.assert_frame_equal(views.series, load.inflight_series(cur, WINDOW_FILTER, "5m"))
    pd.testing.assert_frame_equal(views.levels, load.latency_by_inflight(cur, WINDOW_FILTER))
    split = load.ttft_by_isl_and_load(cur, WINDOW_FILTER, LOG2_EDGES)
    pd.testing.assert_frame_equal(views.split, split)
    assert views.split.attrs == split.attrs == {"engines": 2}
    assert load.load_views(cur, WINDOW_FILTER).bucket == "5m"  # a 10-minute window
    empty = load.load_views(
        cur, Filter(start=WINDOW[0].replace(year=2020), end=WINDOW[1].replace(year=2020))
    )
    assert list(empty.levels.columns) == load.LEVEL_COLUMNS
    assert empty.series.empty and empty.levels.empty and empty.split.empty


def test_levels_and_shapes_are_the_levels_and_each_levels_request_cells(db):
    cur = db.cursor()
    levels, shapes = load.levels_and_shapes(cur, WINDOW_FILTER)
    pd.testing.assert_frame_equal(levels, load.latency_by_inflight(cur, WINDOW_FILTER))
    assert list(shapes.columns) == ["engine", "inflight_lo", "isl", "osl", "requests"]
    # Every request with an ITL is in exactly one cell of its own level.
    merged = shapes.groupby(["engine", "inflight_lo"])["requests"].sum()
    with_itl = cur.execute(
        "SELECT count(*) FROM requests WHERE itl_ms IS NOT NULL AND e2e_ms IS NOT NULL "
        "AND started_at >= ? AND started_at < ?",
        [WINDOW_FILTER.start, WINDOW_FILTER.end],
    ).fetchone()[0]
    assert merged.sum() == with_itl
    assert (shapes["isl"] > 0).all() and (shapes["osl"] > 0).all()


def test_empty_window(db):
    flt = Filter(start=BASE_TIME - timedelta(days=30), end=BASE_TIME - timedelta(days=29))
    assert load.inflight_series(db.cursor(), flt, "1h").empty
    assert load.latency_by_inflight(db.cursor(), flt).empty
    assert load.ttft_by_isl_and_load(db.cursor(), flt, LOG2_EDGES).empty


def test_random_requests_match_a_brute_force_sweep(database):
    """300 requests on two engines over three hours, whole milliseconds (so some start or end
    at the same instant), a tenth with a zero E2E; the middle hour is the window."""
    rng = random.Random(7)
    recs, spans = [], []  # spans in microseconds from BASE_TIME
    for k in range(300):
        engine = rng.choice(["e1", "e2"])
        at_ms = rng.randrange(0, 3 * 3600 * 1000, 250)
        e2e_ms = rng.choice([0, 5_000, 50_000, rng.randrange(1, 900_000)])
        rec = record(k, prefix="rnd", engine=engine, e2e_ms=float(e2e_ms), ttft_ms=0.0)
        rec["started_at"] = (BASE_TIME + timedelta(milliseconds=at_ms)).isoformat()
        recs.append(rec)
        spans.append((engine, at_ms * 1000, at_ms * 1000 + max(e2e_ms * 1000, 1)))
    store(database, recs)

    def in_flight(engine: str, t: int) -> int:
        return sum(1 for e, s, u in spans if e == engine and s <= t < u)

    lo, hi = 3600 * 10**6, 7200 * 10**6
    window = Filter(start=BASE_TIME + timedelta(hours=1), end=BASE_TIME + timedelta(hours=2))
    frame = load.latency_by_inflight(database.cursor(), window, edges=range(1, 400))
    expected: dict[tuple[str, int], int] = {}
    for e, s, _ in spans:
        if lo <= s < hi:
            key = (e, in_flight(e, s))
            expected[key] = expected.get(key, 0) + 1
    got = {(r["engine"], r["inflight_lo"]): r["requests"] for r in frame.to_dict("records")}
    assert got == expected

    series = load.inflight_series(database.cursor(), window, "5m")
    assert len(series) == 2 * 12
    for r in series.to_dict("records"):
        a = (r["bucket"].to_pydatetime() - BASE_TIME) // timedelta(microseconds=1)
        b = a + 300 * 10**6
        mine = [(s, u) for e, s, u in spans if e == r["engine"]]
        busy = sum(max(0, min(u, b) - max(s, a)) for s, u in mine)
        assert r["inflight_mean"] == pytest.approx(busy / (b - a), rel=1e-9)
        # The count only rises at starts: the most is at the bucket's start or just after one.
        points = [a] + [s for s, _ in mine if a < s < b]
        assert r["inflight_max"] == max(in_flight(r["engine"], p) for p in points)
    assert np.isfinite(series["inflight_mean"]).all()
