"""Running `tokenshape serve` on a database for a benchmark, and waiting until it is healthy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import NamedTuple

import httpx

ROOT = Path(__file__).resolve().parents[1]


class Server(NamedTuple):
    """A running server: its base URL and process id (for memory readings)."""

    url: str
    pid: int


@contextmanager
def served(db: Path, port: int) -> Iterator[Server]:
    """Serve db on a loopback port (quiet logs); yields it, then stops the server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSHAPE_")}
    server = subprocess.Popen(
        [sys.executable, "-m", "app.cli", "serve", "--db", str(db), "--port", str(port)],
        cwd=ROOT,
        env={**env, "TOKENSHAPE_LOG_LEVEL": "warning"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/api/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise SystemExit(f"the server on {url} did not become healthy")
        yield Server(url, server.pid)
    finally:
        server.terminate()
        server.wait(timeout=60)
