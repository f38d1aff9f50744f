"""The Dash app mounted on the FastAPI server, with the page shell around every page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import dash
from dash import Dash, dcc, html
from fastapi import FastAPI

from app.dashboard.pages import latency, overview, shapes, traffic
from app.storage.database import Database

STATIC = Path(__file__).resolve().parents[2] / "static"
# plotly.js's cartesian partial bundle (heatmap, bar, scatter: all the pages draw), fetched by
# `make install` from the npm registry. A third of the full bundle's size, it is what makes a
# cold page load fast. Without it the full bundle that ships with the plotly package is used.
PARTIAL_PLOTLY = STATIC / "vendor" / "plotly-cartesian.min.js"


def partial_plotly_usable() -> bool:
    """True when the partial bundle is there and of the plotly package's plotly.js version."""
    from plotly.offline import get_plotlyjs_version

    try:
        with PARTIAL_PLOTLY.open("rb") as fh:
            head = fh.read(200).decode(errors="replace")
    except OSError:
        return False
    return f"v{get_plotlyjs_version()}" in head


class _Dash(Dash):
    """Dash that leaves plotly.js to the partial bundle among the assets, when it is usable."""

    def _setup_plotlyjs(self) -> None:
        # dcc.Graph takes window.Plotly when a script already defined it; the asset does.
        if not partial_plotly_usable():
            super()._setup_plotlyjs()


def mount(server: FastAPI, db: Database, clock: Callable[[], datetime], tz: str = "UTC") -> Dash:
    """Create the Dash app on `server` (Dash's FastAPI backend) and register the pages."""
    app = _Dash(
        __name__,
        server=server,
        use_pages=True,
        pages_folder="",
        assets_folder=str(STATIC),
        # A stale partial bundle (plotly upgraded since `make install`) must not load too.
        assets_ignore="" if partial_plotly_usable() else r"vendor/plotly",
        title="tokenshape",
        update_title=None,
        suppress_callback_exceptions=True,
    )
    overview.register(db, clock)
    shapes.register(app, db, clock)
    latency.register(db, clock, tz)
    traffic.register(db, clock, tz)
    app.layout = html.Div(
        [
            html.Header(
                [
                    html.Img(src=app.get_asset_url("logo.svg"), className="logo", alt=""),
                    html.Span("tokenshape", className="brand"),
                    html.Nav(
                        [
                            html.A(p["name"], href=p["relative_path"])
                            for p in dash.page_registry.values()
                        ]
                    ),
                ],
                className="topbar",
            ),
            # While a page's layout is computed the old content stays, dimmed, so nothing jumps.
            html.Main(
                dcc.Loading(
                    dash.page_container,
                    target_components={"_pages_content": "children"},
                    delay_show=300,
                    overlay_style={"visibility": "visible", "opacity": 0.55},
                    type="dot",
                    color="#6c7a96",
                ),
                className="page",
            ),
        ]
    )
    return app
