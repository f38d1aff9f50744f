"""Pure pieces of the dashboard: URL query parsing, labels, figures."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from app.analytics.shapes import HeatMap
from app.dashboard import filterbar
from app.dashboard.figures import bin_labels, heatmap_figure, tokens_label

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def test_query_to_view_and_filter():
    view = filterbar.parse_query({"window": "24h", "model": "m1", "engine": ""}, NOW)
    assert view.start == NOW - timedelta(hours=24) and view.end is None
    flt = view.filter()
    assert flt.models == ("m1",) and flt.engines == ()
    assert filterbar.parse_query({}, NOW).window == "7d"
    assert filterbar.parse_query({"window": "forever"}, NOW).window == "7d"
    assert filterbar.parse_query({"window": "all"}, NOW).start is None
    custom = filterbar.parse_query(
        {"window": "custom", "start": "2026-11-21T00:00", "end": "2026-11-20T00:00"}, NOW
    )
    assert custom.start < custom.end  # swapped, not an error
    broken = filterbar.parse_query({"window": "custom", "start": "soon"}, NOW)
    assert broken.start is None


def test_labels_are_readable():
    assert [tokens_label(v) for v in (0, 96, 1024, 1536, 131072)] == [
        "0",
        "96",
        "1k",
        "1.5k",
        "128k",
    ]
    assert bin_labels((0, 16, 1024)) == ["0–16", "16–1k", "≥1k"]


def test_heatmap_figure_trims_empty_outer_bins_and_keeps_counts():
    counts = np.zeros((4, 4), dtype=np.int64)
    counts[0, 1] = 3
    counts[2, 0] = 1
    fig = heatmap_figure(HeatMap((0, 16, 32, 64), (0, 16, 32, 64), counts, 4))
    trace = fig.data[0]
    assert list(trace.x) == ["0–16", "16–32", "32–64"]  # ISL bins up to the last used one
    assert list(trace.y) == ["0–16", "16–32"]
    z = np.asarray(trace.z, dtype=float)
    assert np.nansum(z) == 4 and np.isnan(z[0, 1])  # empty cells are blank, not zero-coloured
