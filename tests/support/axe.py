"""axe-core in a real page: the script (installed by `make axe`), the WCAG tags every test
asks for, and the serious findings in one list of lines."""

from __future__ import annotations

import os
from collections.abc import Collection
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AXE_JS = ROOT / ".tools" / "axe" / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
SERIOUS = {"serious", "critical"}


def axe_script() -> str:
    """axe-core's script; the test is skipped without it, and failed in CI (`make test`
    installs it)."""
    if not AXE_JS.exists():
        why = f"{AXE_JS} is missing: `make axe` installs axe-core from the npm registry"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(why)
        pytest.skip(why)
    return AXE_JS.read_text()


def serious_violations(page, script: str, known: Collection[tuple[str, str]] = ()) -> list[str]:
    """axe-core's serious and critical WCAG A/AA findings on the page, one line per node;
    `known` lets through (rule, html fragment) pairs a test names as not its page's."""
    page.add_script_tag(content=script)
    result = page.evaluate(
        "tags => axe.run(document, {runOnly: {type: 'tag', values: tags}, resultTypes: "
        "['violations']})",
        TAGS,
    )
    return [
        f"{v['id']} ({v['impact']}): {n['target']} {n['html'][:160]}"
        for v in result["violations"]
        if v["impact"] in SERIOUS
        for n in v["nodes"]
        if not any(v["id"] == rule and css in n["html"] for rule, css in known)
    ]
