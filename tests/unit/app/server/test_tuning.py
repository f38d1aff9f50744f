"""Process tuning (app/server/tuning): the server's, and a fresh interpreter's defaults."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import ROOT


def test_the_server_process_is_tuned_and_other_processes_keep_the_defaults():
    """`tokenshape serve` freezes start-up objects out of collections, collects the young
    generation less often and gives Arrow an allocator that keeps its pages; a fresh
    interpreter (tests, other commands) keeps Python's and Arrow's defaults."""
    probe = (
        "import gc, sys, pyarrow as pa\n"
        "before = (gc.get_threshold()[0], gc.get_freeze_count() > 0, sys.getswitchinterval())\n"
        "from app.server.tuning import tune_server_process\n"
        "tune_server_process()\n"
        "after = (gc.get_threshold()[0], gc.get_freeze_count() > 0, sys.getswitchinterval())\n"
        "print(before, after, pa.default_memory_pool().backend_name)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split(") ")
    assert out[0] == "(700, False, 0.005"
    assert out[1] == "(20000, True, 0.0005"
    assert out[2].strip() in ("jemalloc", "system")
