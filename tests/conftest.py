"""Fixtures shared by every tier (helpers live in tests/support, not here).

Expensive things are built once: Alembic runs once into a session template database that
tests get copies of; demo traffic is seeded once per size into templates; a module that does
not need isolation between its tests shares one server (`module_live`, `module_secured`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest

from app.config import Settings
from app.storage import users
from app.storage.database import Database
from tests.support.browser import launched
from tests.support.database import build_template, copy_database, open_migrated
from tests.support.demo import END, seed_template
from tests.support.net import free_port
from tests.support.reports import NOW as REPORT_NOW
from tests.support.server import PASSWORD, LiveServer, join_stopped, serve, server_settings


@pytest.fixture(scope="session", autouse=True)
def _servers_stop() -> Iterator[None]:
    """Fixture servers finish stopping while the next test runs; all have stopped at the end."""
    yield
    assert not join_stopped(), "a test server did not stop within 30 s"


# -- databases ------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def db_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A database file migrated by Alembic once for the session; tests get copies of it."""
    return build_template(tmp_path_factory.mktemp("templates") / "migrated.duckdb")


@pytest.fixture(scope="session")
def secured_template(tmp_path_factory: pytest.TempPathFactory, db_template: Path) -> Path:
    """The migrated template with the dashboard users ada (admin) and vic (viewer)."""
    path = copy_database(db_template, tmp_path_factory.mktemp("templates") / "secured.duckdb")
    with open_migrated(path) as db:
        users.add(db.cursor(), "ada", PASSWORD, "admin")
        users.add(db.cursor(), "vic", PASSWORD, "viewer")
    return path


DemoTemplate = Callable[..., Path]


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory, db_template: Path) -> DemoTemplate:
    """`demo_template(requests=, days=, end=, sample_rate=)`: a template holding that demo
    traffic, seeded once per session and size (`end=None` means the hour the session first asked
    for it; `sample_rate=0.001` with ~33,000 requests: the platform at its production volume)."""
    made: dict[tuple, Path] = {}

    def template(
        *, requests: int, days: int, end: datetime | None = END, sample_rate: float | None = None
    ) -> Path:
        key = (requests, days, end, sample_rate)
        if key not in made:
            stamp = end.strftime("%Y%m%d") if end else "now"
            name = f"demo-{requests}-{days}-{stamp}-{sample_rate or 1}.duckdb"
            dest = tmp_path_factory.mktemp("templates") / name
            made[key] = seed_template(
                db_template, dest, requests=requests, days=days, end=end, sample_rate=sample_rate
            )
        return made[key]

    return template


@pytest.fixture
def report_db(tmp_path: Path, demo_template: DemoTemplate) -> Path:
    """tmp_path/r.duckdb: two weeks of demo traffic ending at the report tests' NOW, with the
    demo engine profiles (the database `report_settings` points at)."""
    template = demo_template(requests=20000, days=14, end=REPORT_NOW)
    return copy_database(template, tmp_path / "r.duckdb")


@pytest.fixture
def db_path(tmp_path: Path, db_template: Path) -> Path:
    """A fresh migrated database file of this test's own (a copy of the template)."""
    return copy_database(db_template, tmp_path / "t.duckdb")


@pytest.fixture
def fresh_db(db_template: Path) -> Callable[[Path], Database]:
    """`fresh_db(path)`: a copy of the migrated template at `path`, opened (close it, e.g. with
    `with fresh_db(tmp_path / "x.duckdb") as db:`)."""
    return lambda path: open_migrated(copy_database(db_template, path))


@pytest.fixture
def database(db_path: Path) -> Iterator[Database]:
    """A fresh migrated database, open (closed after the test)."""
    with open_migrated(db_path) as db:
        yield db


# -- servers --------------------------------------------------------------------------------------


@pytest.fixture
def settings(db_path: Path) -> Settings:
    """Settings pointing at a fresh database file."""
    return server_settings(db_path)


@pytest.fixture
def live(settings: Settings) -> Iterator[LiveServer]:
    """The real app on a loopback port over a fresh migrated database, for one test."""
    yield from serve(settings, wait=False)


@pytest.fixture(scope="module")
def module_live(
    tmp_path_factory: pytest.TempPathFactory, db_template: Path
) -> Iterator[LiveServer]:
    """One server for a whole test module whose tests need no isolation from one another
    (they count rows of their own gateways, or compare before and after)."""
    db = copy_database(db_template, tmp_path_factory.mktemp("module-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


def _secured_settings(db: Path) -> Settings:
    return Settings(db=db, port=free_port(), auth="on", _env_file=None)


@pytest.fixture
def secured(tmp_path: Path, secured_template: Path) -> Iterator[LiveServer]:
    """The app with logins on (as on any non-loopback bind), with an admin and a viewer."""
    db = copy_database(secured_template, tmp_path / "s.duckdb")
    yield from serve(_secured_settings(db), wait=False)


@pytest.fixture(scope="module")
def module_secured(
    tmp_path_factory: pytest.TempPathFactory, secured_template: Path
) -> Iterator[LiveServer]:
    """`secured`, shared by a module whose tests need no isolation from one another."""
    db = copy_database(secured_template, tmp_path_factory.mktemp("module-secured") / "s.duckdb")
    yield from serve(_secured_settings(db), wait=False)


@pytest.fixture
def gateway() -> str:
    """The gateway of the `ingest` fixture's token."""
    return "gw-test"


@pytest.fixture
def ingest(live: LiveServer, gateway: str) -> Iterator[httpx.Client]:
    """A client holding an `ingest` token for `gateway` (gw-test unless a module says)."""
    with live.client(live.token("ingest", gateway=gateway)) as client:
        yield client


# -- browsers -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def chromium():
    """Headless Chromium for one module (browser/ and security/ share one per tier: their
    conftest.py). Not for the session: Playwright's running event loop would break the
    asyncio tests of other tiers."""
    yield from launched()


@pytest.fixture
def browser(chromium):
    """The module's Chromium; every page a test opens (and its cookies) is closed after it."""
    yield chromium
    for context in chromium.contexts:
        context.close()
