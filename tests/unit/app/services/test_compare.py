"""The comparison's pure parts (app/services/compare): total variation distance, the verdict in
words, cells joined with their ratios, the headline ratios and goodput totals, checked against
values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from app.analytics.compare import CELL_COLUMNS
from app.services import compare

EDGES = (0, 16, 32, 64)


def _map(cells: dict[tuple[int, int], int]) -> np.ndarray:
    counts = np.zeros((len(EDGES), len(EDGES)), dtype=np.int64)
    for (i, j), n in cells.items():
        counts[i, j] = n
    return counts


def test_tvd_is_half_the_summed_share_differences():
    same = _map({(1, 1): 30, (2, 0): 10})
    assert compare.tvd(same, same * 7) == 0.0  # shares, not counts: a bigger run is the same
    assert compare.tvd(_map({(0, 0): 5}), _map({(3, 3): 2})) == 1.0  # no cell in common
    # Production 75% / 25%, benchmark 50% / 50%: ½ (|.75 − .5| + |.25 − .5|) = 0.25.
    assert compare.tvd(_map({(1, 1): 3, (2, 2): 1}), _map({(1, 1): 5, (2, 2): 5})) == 0.25
    with pytest.raises(ValueError, match="different bins"):
        compare.tvd(np.zeros((2, 2)), np.zeros((3, 3)))


def test_shape_words_say_match_or_where_the_benchmark_differs():
    prod = _map({(1, 1): 3, (2, 2): 1})
    close = compare.shape_words(0.03, prod, prod, EDGES)
    assert close == (
        "The benchmark's shape matches production within TVD 0.03 (a match is 0.10 or less)."
    )
    bench = _map({(1, 1): 1, (2, 2): 3})
    words = compare.shape_words(compare.tvd(prod, bench), prod, bench, EDGES)
    assert words.startswith("The benchmark's shape does not match production: TVD 0.50")
    # Too many at ISL 32–64 × OSL 32–64 (75% vs 25%), too few at 16–32 × 16–32 (25% vs 75%).
    assert "it puts 75.0% of its requests at ISL 32–64 × OSL 32–64, where production has 25.0%" in (
        words
    )
    assert "25.0% at ISL 16–32 × OSL 16–32, where production has 75.0%" in words
    assert "0.50" in compare.shape_words(0.5, prod, bench, EDGES, threshold=0.6)
    assert "matches" in compare.shape_words(0.5, prod, bench, EDGES, threshold=0.6)


def _side(rows: list[tuple]) -> pd.DataFrame:
    """A cell_latency frame with its goodput column: (i, j, n, ttft p50, p90, p99, itl p50)."""
    out = []
    for i, j, n, t50, t90, t99, i50 in rows:
        out.append((i, j, n, n, n, t50, t90, t99, i50, i50 * 2, i50 * 3, 1.0))
    return pd.DataFrame(out, columns=[*CELL_COLUMNS, "goodput"])


def test_join_cells_takes_ratios_only_where_both_sides_measured_enough():
    prod_map = _map({(1, 1): 50, (2, 2): 30, (3, 0): 4})
    bench_map = _map({(1, 1): 25, (2, 2): 5, (0, 3): 10})
    prod = _side([(1, 1, 50, 100, 200, 400, 10), (2, 2, 30, 50, 60, 70, 8), (3, 0, 4, 9, 9, 9, 9)])
    bench = _side([(1, 1, 25, 150, 100, 400, 20), (2, 2, 5, 10, 10, 10, 4), (0, 3, 10, 1, 1, 1, 1)])
    cells = compare.join_cells(prod, bench, prod_map, bench_map, EDGES, min_samples=20)
    assert list(cells["shape"]) == [
        "ISL 16–32 × OSL 16–32",  # production's busiest first
        "ISL 32–64 × OSL 32–64",
        "ISL ≥64 × OSL 0–16",
        "ISL 0–16 × OSL ≥64",  # only the benchmark sends it
    ]
    first = cells.iloc[0]
    assert first.production_share == pytest.approx(50 / 84)
    assert first.benchmark_share == pytest.approx(25 / 40)
    assert first.ratio_ttft_p50 == pytest.approx(1.5)  # 150 / 100
    assert first.ratio_ttft_p90 == pytest.approx(0.5) and first.ratio_ttft_p99 == 1.0
    assert first.ratio_itl_p50 == pytest.approx(2.0) and first.ratio_itl_p99 == pytest.approx(2.0)
    # 30 production rows but only 5 benchmark rows: no ratio, though both have quantiles.
    second = cells.iloc[1]
    assert second.benchmark_ttft_p50 == 10 and math.isnan(second.ratio_ttft_p50)
    only_bench = cells.iloc[3]
    assert only_bench.production_requests == 0 and only_bench.production_ttft_n == 0
    assert math.isnan(only_bench.production_ttft_p50) and math.isnan(only_bench.ratio_ttft_p50)
    looser = compare.join_cells(prod, bench, prod_map, bench_map, EDGES, min_samples=5)
    assert looser.iloc[1].ratio_ttft_p50 == pytest.approx(0.2)  # 10 / 50


def test_headline_is_a_production_weighted_geometric_mean():
    cells = pd.DataFrame(
        {
            "production_requests": [30, 10, 60],
            "production_share": [0.3, 0.1, 0.6],
            "ratio_ttft_p50": [2.0, 0.5, math.nan],
            "ratio_ttft_p90": [4.0, 1.0, math.nan],
        }
    )
    h = compare.headline(cells, "ttft")
    # exp((30 ln 2 + 10 ln 0.5) / 40) = 2^(20/40) = √2; at p90: 4^(30/40) = 2^1.5.
    assert h.p50 == pytest.approx(math.sqrt(2)) and h.p90 == pytest.approx(2**1.5)
    assert (h.cells, h.production_share) == (2, pytest.approx(0.4))
    assert h.words(20).startswith("TTFT: the benchmark is 1.41× production at p50 and 2.83×")
    none = compare.headline(cells.assign(ratio_ttft_p50=math.nan), "ttft")
    assert none.cells == 0 and "no cell has 20 or more" in none.words(20)


def test_goodput_totals_pool_the_cells_against_their_target():
    cells = pd.DataFrame(
        {
            "requests": [10.0, 30.0],
            "good": [9.0, 24.0],
            "missed": [1.0, 4.0],
            "not_measured": [0.0, 2.0],
            "target": [0.95, 0.95],
        }
    )
    t = compare.goodput_totals(cells)
    assert t["goodput"] == pytest.approx(33 / 38, abs=1e-4) and t["target"] == 0.95
    assert (t["good"], t["missed"], t["not_measured"], t["met"]) == (33.0, 5.0, 2.0, False)
    empty = compare.goodput_totals(cells.assign(good=0.0, missed=0.0))
    assert empty["goodput"] is None and empty["met"] is None
