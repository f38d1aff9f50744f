"""Every benchmark script imports against today's package layout (a moved module breaks the
bench long before anyone runs it); the benchmarks themselves run in `make bench`."""

from __future__ import annotations

import importlib

import pytest

from tests.support.paths import ROOT

SCRIPTS = sorted(p.stem for p in (ROOT / "bench").glob("*.py") if not p.stem.startswith("_"))


def test_every_bench_script_is_listed():
    assert {"ingest", "query", "dashboard", "retention", "faults", "soak", "bodies"} <= set(SCRIPTS)


@pytest.mark.parametrize("name", SCRIPTS)
def test_bench_script_imports(name):
    module = importlib.import_module(f"bench.{name}")
    assert callable(getattr(module, "main", None)), f"bench/{name}.py has no main()"
