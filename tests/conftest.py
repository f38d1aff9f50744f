"""Shared fixtures: a migrated DuckDB file under tmp_path and the real app on a loopback port."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import uvicorn

from app.config import Settings
from app.main import create_app
from app.storage import tokens, users
from app.storage.database import Database


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class LiveServer:
    """The app served by uvicorn in a thread, with its database for assertions."""

    url: str
    database: Database
    app: object

    def settle(self) -> None:
        """Wait until every acknowledged row is visible to queries (the journal is moved)."""
        writer = self.app.state.runtime.writer
        deadline = time.monotonic() + 20
        while (writer.pending_rows or writer.unmoved_rows) and time.monotonic() < deadline:
            time.sleep(0.01)

    @property
    def db(self) -> Database:
        """The database, once every acknowledged row is visible."""
        self.settle()
        return self.database

    def token(self, scope: str = "ingest", gateway: str = "gw-test") -> str:
        """Create a token directly in the database."""
        plain, _ = tokens.create(self.db.cursor(), gateway, scope)
        return plain

    def client(self, token: str | None = None, **kw) -> httpx.Client:
        """An HTTP client for the server, authenticated when a token is given."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kw)

    def user(self, name: str, role: str, password: str = "correct horse battery") -> str:
        """Add a dashboard user directly in the database; returns the password."""
        users.add(self.db.cursor(), name, password, role)
        return password

    @contextmanager
    def login(self, name: str, password: str = "correct horse battery") -> Iterator[httpx.Client]:
        """A client logged in through the real form, sending the CSRF header as Dash does."""
        with httpx.Client(base_url=self.url, timeout=30) as client:
            yield self._log_in(client, name, password)

    def _log_in(self, client: httpx.Client, name: str, password: str) -> httpx.Client:
        form = client.get("/login")
        nonce = re.search(r'name="csrf" value="([^"]+)"', form.text)
        assert nonce, form.text
        answer = client.post(
            "/login",
            data={"csrf": nonce.group(1), "username": name, "password": password, "next": "/"},
        )
        assert answer.status_code == 303, answer.text
        client.headers["X-CSRFToken"] = client.cookies["_csrf_token"]
        return client

    def scalar(self, sql: str, params: list | None = None):
        """One value from the live database (read through the server's own instance)."""
        row = self.db.cursor().execute(sql, params or []).fetchone()
        return row[0] if row else None


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    """Settings pointing at a fresh database file."""
    # Retention off: fixture data has fixed dates, and a server that runs past the job's first
    # minute must not prune it as the real clock moves on (tests/test_retention.py turns it on).
    return Settings(
        db=tmp_path / "t.duckdb",
        port=free_port(),
        retention_days=0,
        reject_retention_days=0,
        _env_file=None,
    )


def serve(settings: Settings, **app_kwargs) -> Iterator[LiveServer]:
    """Run the app until the generator is closed; app_kwargs go to create_app (e.g. clocks)."""
    db = Database(settings.db)
    app = create_app(settings, db=db, **app_kwargs)
    config = uvicorn.Config(
        app, host="127.0.0.1", port=settings.port, log_level="warning", lifespan="on"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(f"http://127.0.0.1:{settings.port}", db, app)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    """The real app on a loopback port over a migrated database."""
    yield from serve(settings)


@pytest.fixture
def secured(tmp_path: Path) -> Iterator[LiveServer]:
    """The app with logins on (as on any non-loopback bind), with an admin and a viewer."""
    settings = Settings(db=tmp_path / "s.duckdb", port=free_port(), auth="on", _env_file=None)
    for live in serve(settings):
        live.user("ada", "admin")
        live.user("vic", "viewer")
        yield live


@pytest.fixture
def ingest(live: LiveServer) -> Iterator[httpx.Client]:
    """A client holding an `ingest` token for gateway gw-test."""
    with live.client(live.token("ingest")) as client:
        yield client
