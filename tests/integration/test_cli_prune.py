"""tokenshape prune offline, and refused while a server holds the file."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

from tests.support.cli import cli
from tests.support.database import copy_database, open_migrated
from tests.support.retention import prefixes, put


def _cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return cli(*args, check=False, env=env, timeout=120)


def test_prune_cli_dry_run_then_for_real(db_template, tmp_path):
    path = copy_database(db_template, tmp_path / "p.duckdb")
    now = datetime.now(UTC)
    with open_migrated(path) as db:
        put(db, "new", 3, now - timedelta(days=1), rejects=1)
        put(db, "old", 5, now - timedelta(days=40), rejects=2)
    env = {"TOKENSHAPE_RETENTION_DAYS": "30", "TOKENSHAPE_REJECT_RETENTION_DAYS": "0"}
    dry = _cli("prune", "--dry-run", "--db", str(path), env=env)
    assert dry.returncode == 0, dry.stderr
    assert "requests: would delete 5 received before" in dry.stdout
    assert "(TOKENSHAPE_RETENTION_DAYS=30)" in dry.stdout
    assert "rejects: kept forever (TOKENSHAPE_REJECT_RETENTION_DAYS=0)" in dry.stdout
    done = _cli("prune", "--db", str(path), env=env)
    assert done.returncode == 0, done.stderr
    assert "requests: deleted 5 received before" in done.stdout and "MB after" in done.stdout
    with open_migrated(path) as db:
        assert prefixes(db) == {"new"} and prefixes(db, "rejects") == {"new", "old"}
    # The rollup tiers prune by their own retention: off only when all of it is off.
    tiers_off = {f"TOKENSHAPE_ROLLUP_{t}_DAYS": "0" for t in ("HOURLY", "HOURLY_NT", "DAILY")}
    off = _cli(
        "prune", "--db", str(path), env={**env, **tiers_off, "TOKENSHAPE_RETENTION_DAYS": "0"}
    )
    assert off.returncode == 0 and "retention is off" in off.stdout


def test_prune_cli_while_the_server_holds_the_file_says_what_to_do(live):
    out = _cli("prune", "--db", str(live.database.path), env={})
    assert out.returncode == 2
    assert "is in use by" in out.stderr and "Stop it first" in out.stderr
