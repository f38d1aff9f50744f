"""The Dash app mounted on the FastAPI server, with the page shell around every page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

import dash
from dash import Dash, dcc, html
from fastapi import FastAPI

from app.config import Settings
from app.dashboard import plotlyjs
from app.dashboard.pages import (
    latency,
    overview,
    reports,
    rightsizing,
    seasonal,
    shapes,
    traffic,
)
from app.storage.database import Database


class _Dash(Dash):
    """Dash that leaves plotly.js to the partial bundle when it is usable (see plotlyjs)."""

    def _setup_plotlyjs(self) -> None:
        if not plotlyjs.partial_plotly_usable():
            super()._setup_plotlyjs()


def mount(
    server: FastAPI,
    db: Database,
    clock: Callable[[], datetime],
    tz: str = "UTC",
    *,
    editable: bool = True,
    seasonal_threshold: float = 0.10,
    settings: Settings | None = None,
) -> Dash:
    """Create the Dash app on `server` (Dash's FastAPI backend) and register the pages.

    `editable`: whether the dashboard may change engine profiles (no logins yet)."""
    partial = plotlyjs.partial_plotly_usable()
    app = _Dash(
        __name__,
        server=server,
        use_pages=True,
        pages_folder="",
        assets_folder=str(plotlyjs.STATIC),
        assets_ignore="" if partial else plotlyjs.STALE_BUNDLE,
        title="tokenshape",
        update_title=None,
        suppress_callback_exceptions=True,
        use_async=True,  # layouts and callbacks are coroutines that query in a worker thread
    )
    overview.register(db, clock)
    shapes.register(app, db, clock)
    latency.register(db, clock, tz)
    traffic.register(db, clock, tz)
    rightsizing.register(app, db, clock, editable=editable)
    seasonal.register(db, clock, tz, seasonal_threshold)
    if settings is not None:
        reports.register(db, clock, settings)
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
