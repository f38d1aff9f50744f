"""The partial plotly.js bundle (app/dashboard/speedups/plotlyjs) and when it is used."""

from __future__ import annotations


def test_partial_plotly_bundle_is_used_only_at_the_packages_version(tmp_path, monkeypatch):
    from plotly.offline import get_plotlyjs_version

    from app.dashboard.speedups import plotlyjs as shell

    bundle = tmp_path / "plotly-dashboard.min.js"
    monkeypatch.setattr(shell, "PARTIAL_PLOTLY", bundle)
    assert not shell.partial_plotly_usable()  # missing: the full bundle is used
    bundle.write_text("/**\n* plotly.js (tokenshape dashboard: scatter, bar, heatmap) v0.0.1\n*/")
    assert not shell.partial_plotly_usable()  # stale after an upgrade
    header = "/**\n* plotly.js (tokenshape dashboard: scatter, bar, heatmap) v{}\n*/"
    bundle.write_text(header.format(get_plotlyjs_version()))
    assert shell.partial_plotly_usable()
