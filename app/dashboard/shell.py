"""The Dash app mounted on the FastAPI server, with the page shell around every page."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import dash
from dash import Dash, html
from fastapi import FastAPI

from app.dashboard.pages import latency, overview, shapes, traffic
from app.storage.database import Database

STATIC = Path(__file__).resolve().parents[2] / "static"


def mount(server: FastAPI, db: Database, clock: Callable[[], datetime], tz: str = "UTC") -> Dash:
    """Create the Dash app on `server` (Dash's FastAPI backend) and register the pages."""
    app = Dash(
        __name__,
        server=server,
        use_pages=True,
        pages_folder="",
        assets_folder=str(STATIC),
        title="tokenshape",
        update_title=None,
        suppress_callback_exceptions=True,
    )
    overview.register(db, clock)
    shapes.register(db, clock)
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
            html.Main(dash.page_container, className="page"),
        ]
    )
    return app
