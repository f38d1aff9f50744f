"""Running `tokenshape serve` on a database for a benchmark, and waiting until it is healthy;
tokens made with the CLI before the server owns the file."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, NamedTuple

import httpx

ROOT = Path(__file__).resolve().parents[1]


class Server(NamedTuple):
    """A running server: its base URL and process id (for memory readings)."""

    url: str
    pid: int


@contextmanager
def served(db: Path, port: int) -> Iterator[Server]:
    """Serve db on a loopback port (quiet logs); yields it, then stops the server."""
    proc = start_server(db, port)
    try:
        yield Server(f"http://127.0.0.1:{port}", proc.pid)
    finally:
        stop_server(proc)


def tokenshape() -> list[str]:
    """The installed `tokenshape` command (the venv's entry point), else the module."""
    exe = Path(sys.executable).with_name("tokenshape")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "app.cli"]


def clean_env(**extra: str) -> dict[str, str]:
    """This environment without TOKENSHAPE_* settings (they would change the server)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSHAPE_")}
    return {**env, **extra}


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def create_token(db: Path, gateway: str) -> str:
    """An ingest token made with the CLI before the server starts (it owns the file after)."""
    out = subprocess.run(
        [*tokenshape(), "token", "create", "--gateway", gateway, "--scope", "ingest"]
        + ["--db", str(db)],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env=clean_env(),
    )
    return out.stdout.strip().splitlines()[-1]


def start_server(
    db: Path,
    port: int,
    log: IO[bytes] | int = subprocess.DEVNULL,
    *,
    stdout: IO[bytes] | int | None = None,
    timeout_s: float = 300,
    **settings: str,
) -> subprocess.Popen:
    """`tokenshape serve` on 127.0.0.1 as a subprocess; returns once /api/health answers 200.

    Its stderr (and stdout, unless given) go to `log`. The only TOKENSHAPE_* settings it gets
    are a warning log level and `settings` (e.g. TOKENSHAPE_HEADER_TIMEOUT_S="1.5")."""
    proc = subprocess.Popen(
        [*tokenshape(), "serve", "--db", str(db), "--host", "127.0.0.1", "--port", str(port)],
        cwd=ROOT,
        env=clean_env(**{"TOKENSHAPE_LOG_LEVEL": "warning", **settings}),
        stdout=log if stdout is None else stdout,
        stderr=log,
    )
    where = f"; see {log.name}" if hasattr(log, "name") else ""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=2).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}{where}")
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise RuntimeError(f"the server did not become healthy in {timeout_s:g} s{where}")


def stop_server(proc: subprocess.Popen) -> None:
    """SIGTERM (a clean stop: every journaled row moved), SIGKILL after a minute."""
    proc.terminate()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
