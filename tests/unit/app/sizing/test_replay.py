"""The trace arithmetic: quotas that sum and stay proportional, copies for a scaled rate, the
distance between two shapes, burstiness, and half-octave cells pooled into log2 cells."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.analytics.bins import LOG2_EDGES
from app.sizing import replay
from app.storage.rollups import HALF_OCTAVE_EDGES

counts_st = st.dictionaries(st.integers(0, 2000), st.integers(1, 10_000), min_size=1, max_size=60)


@given(counts_st, st.integers(0, 50_000))
def test_largest_remainder_sums_and_stays_within_one_of_the_exact_share(counts, total):
    n = sum(counts.values())
    total = min(total, n)
    quotas = replay.largest_remainder(counts, total)
    assert sum(quotas.values()) == total
    for cell, c in counts.items():
        exact = c * total / n
        assert math.floor(exact) <= quotas[cell] <= math.ceil(exact)
        assert quotas[cell] <= c  # never more rows than the cell holds


def test_largest_remainder_is_deterministic_and_breaks_ties_by_size():
    assert replay.largest_remainder({1: 1, 2: 3}, 2) == {1: 0, 2: 2}  # tie: the bigger cell
    assert replay.largest_remainder({1: 1, 2: 1, 3: 2}, 2) == {1: 1, 2: 0, 3: 1}
    assert replay.largest_remainder({5: 3, 9: 3}, 3) == replay.largest_remainder({9: 3, 5: 3}, 3)
    assert replay.largest_remainder({}, 4) == {}


@given(counts_st, st.floats(0.05, 30))
def test_copies_scale_every_cell(counts, scale):
    cps = replay.copies(counts, scale)
    scaled = cps.counts(counts)
    assert sum(scaled.values()) == cps.full * sum(counts.values()) + round(
        (scale - math.floor(scale)) * sum(counts.values())
    )
    for cell, c in counts.items():
        assert math.floor(scale * c) - 1 <= scaled[cell] <= math.ceil(scale * c) + 1


@pytest.mark.parametrize("bad", [0, -1, 1001, float("nan"), float("inf")])
def test_copies_refuse_a_scale_out_of_range(bad):
    with pytest.raises(ValueError, match="scale"):
        replay.copies({1: 10}, bad)


def test_tvd():
    assert replay.tvd({1: 5, 2: 5}, {1: 50, 2: 50}) == 0
    assert replay.tvd({1: 5}, {2: 7}) == 1
    assert replay.tvd({1: 3, 2: 1}, {1: 1, 2: 1}) == pytest.approx(0.25)
    assert replay.tvd({}, {}) == 0 and replay.tvd({1: 1}, {}) == 1


def test_burstiness_counts_empty_minutes_as_zero():
    flat = replay.burstiness([10] * 60, 60)
    assert flat.mean == 10 and flat.cv == 0 and flat.peak_to_mean == 1
    burst = replay.burstiness([600], 60)  # everything in one minute of the hour
    assert burst.mean == 10 and burst.peak == 600 and burst.peak_to_mean == 60
    assert burst.cv == pytest.approx(np.std([600] + [0] * 59) / 10)
    assert replay.burstiness([], 5).mean == 0


@given(st.integers(0, 300_000), st.integers(0, 300_000))
def test_log2_cells_pool_half_octave_bins_into_the_shapes_page_bins(isl, osl):
    def index(v, edges):
        return int(np.searchsorted(edges, v, side="right") - 1)

    half = index(isl, HALF_OCTAVE_EDGES) * replay.CELL_BASE + index(osl, HALF_OCTAVE_EDGES)
    pooled = replay.log2_cells({half: 1})
    assert pooled == {index(isl, LOG2_EDGES) * replay.CELL_BASE + index(osl, LOG2_EDGES): 1}


def test_bucket_seconds_keeps_about_twenty_requests_a_bucket():
    assert replay.bucket_seconds(86_400, 1_000_000) == 60
    assert replay.bucket_seconds(86_400, 500) == 3600  # 24 buckets of ~21
    assert replay.bucket_seconds(3_600, 10) == 7_200
    assert replay.bucket_seconds(86_400, 5) == 86_400  # too few for any: the longest
    assert replay.bucket_words(60) == "minute" and replay.bucket_words(900) == "15 min"
    assert replay.bucket_words(3600) == "hour" and replay.bucket_words(7200) == "2 h"
