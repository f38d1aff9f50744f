"""The `tokenshape` command run as a user runs it: a subprocess in the repository root."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support.paths import ROOT


def clean_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without its TOKENSHAPE_* settings, plus `extra`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSHAPE_")}
    return {**base, **(extra or {})}


def cli(
    *args: str,
    check: bool = True,
    env: dict | None = None,
    stdin: str | None = None,
    timeout: float = 300,
) -> subprocess.CompletedProcess:
    """Run `tokenshape ARGS` as a user would, without this shell's TOKENSHAPE_* settings
    (`env` adds some back)."""
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=clean_env(env),
        timeout=timeout,
    )
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc
