"""`tokenshape serve`: the server (ingest, API, dashboard) in the foreground."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from app.cli.common import command, open_db, settings_for
from app.jobs.cron import check_setting

if TYPE_CHECKING:
    from app.cli.common import Subparsers


def server_options(parser: argparse.ArgumentParser) -> None:
    """Declare --host and --port (serve, and demo --serve)."""
    parser.add_argument("--host", help="bind address (default: TOKENSHAPE_HOST or 127.0.0.1)")
    parser.add_argument("--port", type=int, help="port (default: TOKENSHAPE_PORT or 8050)")


def add_parser(subparsers: Subparsers) -> None:
    """Add `serve`."""
    server_options(
        command(subparsers, "serve", cmd_serve, "Run the server: ingest, API and dashboard.")
    )


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server (ingest, API, dashboard) until interrupted."""
    import uvicorn

    from app.main import create_app
    from app.server import logs
    from app.server.http_guard import guarded_protocol
    from app.server.proxies import proxy_options
    from app.server.tuning import tune_server_process

    settings = settings_for(args)
    check_setting(settings.report_cron)  # before the file is touched, as a bad setting should
    proxies = proxy_options(settings)
    db = open_db(settings)  # fail fast, with a clear line, if another process holds the file
    logs.configure(settings)
    print(f"tokenshape serving {settings.db} on http://{settings.host}:{settings.port}", flush=True)
    app = create_app(settings, db=db)
    tune_server_process()
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        timeout_graceful_shutdown=10,
        # httptools with a deadline and a size bound on headers (uvicorn has neither).
        http=guarded_protocol(settings.header_timeout_s),
        # X-Forwarded-For/-Proto believed only from TOKENSHAPE_TRUSTED_PROXIES (uvicorn's
        # default believes any local process).
        **proxies,
        **logs.uvicorn_options(settings),
    )
    return 0
