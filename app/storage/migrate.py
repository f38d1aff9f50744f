"""Alembic migrations on the DuckDB file, run through duckdb_engine."""

from __future__ import annotations

import functools
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.ddl.impl import DefaultImpl
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine
from sqlalchemy.pool import NullPool

from app.storage.offline import OFFLINE

MIGRATIONS_DIR = Path(__file__).resolve().parents[2] / "migrations"


class DuckDBImpl(DefaultImpl):
    """Teaches Alembic the `duckdb` dialect name; DuckDB runs DDL inside transactions."""

    __dialect__ = "duckdb"
    transactional_ddl = True


def _config() -> Config:
    if not (MIGRATIONS_DIR / "env.py").exists():
        raise RuntimeError(
            f"migrations not found at {MIGRATIONS_DIR}; install tokenshape from its source "
            "tree (pip install -e .) so the migrations folder ships with it"
        )
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    return cfg


@functools.cache  # the migrations folder does not change while a process runs
def head_revision() -> str:
    """The newest migration revision this code knows."""
    head = ScriptDirectory.from_config(_config()).get_current_head()
    assert head is not None
    return head


def upgrade(db_path: Path) -> str:
    """Migrate the database file to the newest revision; returns that revision."""
    db_path.parent.mkdir(parents=True, exist_ok=True)
    cfg = _config()
    # NullPool: the file must be closed again before the server opens it with its own settings.
    engine = create_engine(
        f"duckdb:///{db_path}", poolclass=NullPool, connect_args={"config": dict(OFFLINE)}
    )
    try:
        with engine.begin() as connection:
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, "head")
            revision = MigrationContext.configure(connection).get_current_revision()
    finally:
        engine.dispose()
    return revision or ""
