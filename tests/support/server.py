"""The real app served by uvicorn in a thread on a loopback port, and what tests do with it."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvicorn

from app.config import Settings
from app.main import create_app
from app.server.http_guard import guarded_protocol
from app.server.proxies import proxy_options
from app.storage import tokens, users
from app.storage.database import Database
from tests.support import http
from tests.support.database import open_migrated
from tests.support.net import free_port

PASSWORD = "correct horse battery"


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

    @property
    def port(self) -> int:
        """The loopback port it listens on."""
        return self.app.state.runtime.settings.port

    def token(self, scope: str = "ingest", gateway: str = "gw-test") -> str:
        """Create a token directly in the database."""
        plain, _ = tokens.create(self.db.cursor(), gateway, scope)
        return plain

    def client(self, token: str | None = None, **kw) -> httpx.Client:
        """An HTTP client for the server, authenticated when a token is given."""
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return http.client(base_url=self.url, headers=headers, timeout=30, **kw)

    def user(self, name: str, role: str, password: str = PASSWORD) -> str:
        """Add a dashboard user directly in the database; returns the password."""
        users.add(self.db.cursor(), name, password, role)
        return password

    @contextmanager
    def login(self, name: str, password: str = PASSWORD) -> Iterator[httpx.Client]:
        """A client logged in through the real form, sending the CSRF header as Dash does."""
        with http.client(base_url=self.url, timeout=30) as client:
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


def server_settings(db: Path, **extra) -> Settings:
    """Settings of a test server on a free loopback port over `db`."""
    # Retention off: fixture data has fixed dates, and a server that runs past the job's first
    # minute must not prune it as the real clock moves on (the retention tests turn it on).
    # Plans warmer off: it runs the performance model for every profiled engine in the
    # background, which a test that does not look at plans only pays for (tests/unit/app/jobs
    # drives it directly).
    values = {"retention_days": 0, "reject_retention_days": 0, "plans_refresh_s": 0} | extra
    return Settings(db=db, port=free_port(), _env_file=None, **values)


_stopping: list[threading.Thread] = []


def serve(settings: Settings, *, wait: bool = True, **app_kwargs) -> Iterator[LiveServer]:
    """Run the app until the generator is closed; app_kwargs go to create_app (e.g. clocks).

    The lifespan opens the file as in production: a copy of a template, already at the newest
    revision, without running Alembic again; a missing one is created and migrated.

    Closing the generator stops the server: it stops taking connections at once; with
    `wait=False` the rest of its stop (uvicorn's grace period, the writer, closing the file)
    goes on while the next test runs (`join_stopped` waits for all of them). Fixtures whose
    server nothing uses after their teardown pass wait=False; a test that reopens the file
    itself keeps the default."""
    db = Database(settings.db)
    app = create_app(settings, db=db, **app_kwargs)
    # As `tokenshape serve` runs it: the guarded protocol and proxies trusted only as set.
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=settings.port,
        log_level="warning",
        lifespan="on",
        http=guarded_protocol(settings.header_timeout_s),
        **proxy_options(settings),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            db.close()
            raise RuntimeError("server did not start")
        time.sleep(0.02)
    try:
        yield LiveServer(f"http://127.0.0.1:{settings.port}", db, app)
    finally:
        server.should_exit = True
        if wait:
            thread.join(timeout=30)
        else:
            _stopping.append(thread)


def join_stopped(timeout: float = 30) -> list[threading.Thread]:
    """Wait for every server stopped with wait=False; returns the threads still running."""
    for thread in _stopping:
        thread.join(timeout)
    running = [t for t in _stopping if t.is_alive()]
    _stopping.clear()
    return running


@contextmanager
def served(settings: Settings, **app_kwargs) -> Iterator[LiveServer]:
    """`serve` as a context manager: `with served(settings) as live: ...`."""
    gen = serve(settings, **app_kwargs)
    try:
        yield next(gen)
    finally:
        gen.close()


def offline_token(db_path: Path, gateway: str, scope: str = "ingest") -> str:
    """A token created in the database file before a server process owns it."""
    with open_migrated(db_path) as db:
        plain, _ = tokens.create(db.cursor(), gateway, scope)
    return plain
