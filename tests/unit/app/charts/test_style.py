"""Chart style (app/charts/style): readable token labels, positions inside bins."""

from __future__ import annotations

import numpy as np

from app.charts.style import bin_labels, bin_position, tokens_label


def test_labels_are_readable():
    assert [tokens_label(v) for v in (0, 96, 1024, 1536, 131072)] == [
        "0",
        "96",
        "1k",
        "1.5k",
        "128k",
    ]
    assert bin_labels((0, 16, 1024)) == ["0–16", "16–1k", "≥1k"]


def test_bin_position_interpolates_inside_bins():
    log_edges = (0, 16, 32, 64)
    assert bin_position(log_edges, 16) == 0.5  # the edge between bins 0 and 1
    assert bin_position(log_edges, 8) == 0.0  # the first bin is linear: 8 is its middle
    assert abs(bin_position(log_edges, 24) - (0.5 + np.log2(1.5))) < 1e-9
    assert bin_position(log_edges, 1000) == 3.0  # the open-ended last bin
    assert bin_position((0, 100, 200, 300), 150) == 1.0  # linear bins: linear inside
