"""Which plotly.js the browser gets: the cartesian partial bundle when it is usable.

`make install` fetches plotly.js's cartesian partial bundle (heatmap, bar, scatter: all the pages
draw) from the npm registry into `static/vendor/`, at the plotly package's plotly.js version.
It is a third of the full bundle and halves a cold page load in headless Chromium. Dash puts it
in the page as an asset; dcc.Graph then takes the `window.Plotly` it defines, and Dash's own full
bundle is left out. Without it (no npm at install, or plotly upgraded since) the full bundle is
used as Dash ships it.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parents[2] / "static"
PARTIAL_PLOTLY = STATIC / "vendor" / "plotly-cartesian.min.js"
# Dash matches `assets_ignore` against file names, not paths.
STALE_BUNDLE = r"^plotly-cartesian"


def partial_plotly_usable() -> bool:
    """True when the partial bundle is there and of the plotly package's plotly.js version."""
    from plotly.offline import get_plotlyjs_version

    try:
        with PARTIAL_PLOTLY.open("rb") as fh:
            head = fh.read(200).decode(errors="replace")
    except OSError:
        return False
    return f"v{get_plotlyjs_version()}" in head
