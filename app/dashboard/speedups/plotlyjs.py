"""Which plotly.js the browser gets: the dashboard's own small bundle when it is usable.

`make install` builds `static/vendor/plotly-dashboard.min.js` (jsbundle/build.sh: plotly.js's
core with bar and heatmap, everything the pages draw) from the npm registry, at the plotly
package's plotly.js version. At 1.2 MB it is a quarter of the full bundle (4.8 MB) and smaller
than plotly.js's cartesian partial bundle (1.5 MB). Dash puts it in the page as an asset;
dcc.Graph then takes the `window.Plotly` it defines, and Dash's own full bundle is left out.
Without it (no npm at install, or plotly upgraded since) the full bundle is used as Dash ships
it.
"""

from __future__ import annotations

from pathlib import Path

STATIC = Path(__file__).resolve().parents[3] / "static"
PARTIAL_PLOTLY = STATIC / "vendor" / "plotly-dashboard.min.js"
# Dash matches `assets_ignore` against file names, not paths. An older install's cartesian
# bundle is never served; the dashboard's own only when it is current.
OLD_BUNDLE = r"^plotly-cartesian"
STALE_BUNDLE = r"^plotly-(cartesian|dashboard)"


def partial_plotly_usable() -> bool:
    """True when the partial bundle is there and of the plotly package's plotly.js version."""
    from plotly.offline import get_plotlyjs_version

    try:
        with PARTIAL_PLOTLY.open("rb") as fh:
            head = fh.read(200).decode(errors="replace")
    except OSError:
        return False
    return f"v{get_plotlyjs_version()}" in head
