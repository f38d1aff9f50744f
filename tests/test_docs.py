"""The docs stay true to the code: every setting and command is documented."""

from __future__ import annotations

from pathlib import Path

from app.cli import build_parser
from app.config import Settings, setting_names

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_lists_every_setting_with_its_default():
    for name, field in Settings.model_fields.items():
        env = f"TOKENSHAPE_{name.upper()}"
        assert f"| `{env}` | `{field.default}` |" in README, env
    assert len(setting_names()) == len(Settings.model_fields)


def test_readme_names_the_two_commands_and_ci_runs_them():
    assert "make demo" in README and "make test" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_documents_every_subcommand():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    for name in sub.choices:
        assert f"`tokenshape {name}" in README, name


def test_architecture_doc_names_every_module():
    text = (ROOT / "docs" / "architecture.md").read_text()
    for path in sorted((ROOT / "app").rglob("*.py")) + sorted((ROOT / "ingest").rglob("*.py")):
        if path.name == "__init__.py":
            continue
        rel = path.relative_to(ROOT).as_posix()
        assert rel in text or path.name in text, rel
