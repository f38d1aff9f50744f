"""The docs stay true to the code: every setting, command, route, table and module is in the
generated reference, the committed reference is current, and the hand-written pages name only
settings, commands, options and metrics that exist."""

from __future__ import annotations

import argparse
import importlib.util
import re
from pathlib import Path

import pytest

from app.cli import build_parser
from app.config import Settings, setting_names


def _root() -> Path:
    """The repository root, wherever this file sits under tests/."""
    here = Path(__file__).resolve()
    return next(p for p in here.parents if (p / "pyproject.toml").exists())


ROOT = _root()
DOCS = ROOT / "docs"
REFERENCE = DOCS / "reference"
README = (ROOT / "README.md").read_text()
# Extra environment variables the code reads besides the settings (the shipping client's).
EXTRA_ENV = {"TOKENSHAPE_SHIP_TOKEN": ROOT / "app", "TOKENSHAPE_PUSH_TOKEN": ROOT / "app"}


def _generator():
    spec = importlib.util.spec_from_file_location("gen_reference", DOCS / "gen_reference.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    """Every reference page as the generator renders it from the code now."""
    return _generator().render_all()


def _hand_written() -> dict[str, str]:
    """README, CONTRIBUTING, the benchmark history and every non-generated docs page."""
    pages = {
        p.relative_to(ROOT).as_posix(): p.read_text()
        for p in [ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "bench" / "RESULTS.md"]
    }
    for path in sorted(DOCS.rglob("*.md")):
        if REFERENCE not in path.parents:
            pages[path.relative_to(ROOT).as_posix()] = path.read_text()
    return pages


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """'serve', 'token', 'token create', … → their parsers."""
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[name] = sub
                found.update({f"{name} {k}": v for k, v in _commands(sub).items()})
    return found


def test_reference_pages_are_generated_from_the_current_code(generated):
    stale = [
        name
        for name, text in generated.items()
        if not (REFERENCE / name).exists() or (REFERENCE / name).read_text() != text
    ]
    assert not stale, (
        f"docs/reference/{', '.join(stale)} differ from the code: "
        "run .venv/bin/python docs/gen_reference.py and commit the pages"
    )


def test_configuration_reference_lists_every_setting_with_its_default(generated):
    text = generated["configuration.md"]
    for name, field in Settings.model_fields.items():
        env = f"TOKENSHAPE_{name.upper()}"
        default = field.default
        if hasattr(default, "get_secret_value"):
            default = default.get_secret_value()
        shown = f"`{default}`" if str(default) else '`""`'
        assert f"| `{env}` | {shown} |" in text, env
        assert field.description, f"{env} has no description"
    assert len(setting_names()) == len(Settings.model_fields)


def test_readme_names_the_two_commands_and_ci_runs_them():
    assert "make demo" in README and "make test" in README
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_cli_reference_documents_every_command(generated):
    text = generated["cli.md"]
    commands = _commands(build_parser())
    assert "serve" in commands and "token create" in commands
    for name in commands:
        assert f"`tokenshape {name}" in text, name


def test_api_reference_documents_every_route(generated):
    spec = _generator().openapi_app().openapi()
    text = generated["api.md"]
    for path, ops in spec["paths"].items():
        for method in ops:
            assert f"`{method.upper()} {path}`" in text, (method, path)
    for status in ("200", "400", "401", "403", "408", "413", "415", "422", "429", "503"):
        assert f"| `{status}` |" in generated["ingest.md"], status


def test_data_model_documents_every_table_and_column(generated):
    from app.storage import schema

    text = generated["data-model.md"]
    for name, table in schema.metadata.tables.items():
        assert f"## `{name}`" in text, name
        for column in table.columns:
            assert f"| `{column.name}` |" in text, f"{name}.{column.name}"


def test_module_map_names_every_module(generated):
    # Was: architecture.md names every module; the module map is generated and replaces it.
    text = generated["modules.md"]
    for path in sorted((ROOT / "app").rglob("*.py")) + sorted((ROOT / "ingest").rglob("*.py")):
        if path.name == "__init__.py" or "__pycache__" in path.parts:
            continue
        rel = path.relative_to(ROOT).as_posix()
        assert f"`{rel}`" in text, rel


def test_docs_name_only_settings_that_exist():
    known = set(setting_names())
    for name, where in EXTRA_ENV.items():
        assert any(name in p.read_text() for p in where.rglob("*.py")), name
    known |= set(EXTRA_ENV)
    for page, text in _hand_written().items():
        for match in re.finditer(r"TOKENSHAPE_[A-Z0-9_]*(\*|<NAME>)?", text):
            word, wildcard = match.group(0), match.group(1)
            if wildcard:  # TOKENSHAPE_RATE_LIMIT_*, TOKENSHAPE_<NAME>: a prefix of real ones
                prefix = word.removesuffix(wildcard)
                assert any(k.startswith(prefix) for k in known), (page, word)
            else:
                assert word in known, (page, word)


def _code(text: str) -> list[str]:
    """Lines of fenced code blocks and inline code spans."""
    lines: list[str] = []
    for block in re.findall(r"```[^\n]*\n(.*?)```", text, flags=re.S):
        lines += block.splitlines()
    prose = re.sub(r"```[^\n]*\n.*?```", "", text, flags=re.S)
    lines += re.findall(r"`([^`\n]+)`", prose)
    return lines


# "tokenshape" followed by a word that is not a command: the compose service name before the
# command (`docker compose run tokenshape tokenshape …`) and the server in an error line.
NOT_COMMANDS = {"tokenshape", "server"}


def test_docs_name_only_commands_and_options_that_exist():
    parser = build_parser()
    commands = _commands(parser)
    checked = 0
    for page, text in _hand_written().items():
        for line in _code(text):
            for match in re.finditer(r"(?:^|[\s/(])tokenshape ([a-z][a-z|-]*)([^`;&#]*)", line):
                first, rest = match.group(1), match.group(2).split()
                if first in NOT_COMMANDS:
                    continue
                for name in first.split("|"):
                    assert name in commands, (page, line)
                    sub = commands[name]
                    words = rest
                    nested = any(c.startswith(f"{name} ") for c in commands)
                    if nested and rest and re.fullmatch(r"[a-z|]+", rest[0]):
                        children = rest[0].split("|")
                        for child in children:
                            assert f"{name} {child}" in commands, (page, line)
                        sub, words = commands[f"{name} {children[0]}"], rest[1:]
                    options = {o for a in sub._actions for o in a.option_strings}
                    for word in words:
                        flag = word.strip("[]()").split("=")[0].rstrip(",.")
                        if flag.startswith("--"):
                            assert flag in options, (page, line, flag)
                    checked += 1
    assert checked > 20  # the pages do show commands


def test_operations_lists_every_metric():
    source = (ROOT / "app" / "server" / "metrics.py").read_text()
    text = (DOCS / "operations.md").read_text()
    defined = set(re.findall(r'"(tokenshape_[a-z_]+)"', source))
    assert defined
    for name in defined:
        assert name in text, name
    # The cookies share the prefix; any other tokenshape_… name must be a metric.
    cookies = set(re.findall(r'"(tokenshape_[a-z_]+)"', (ROOT / "app/auth/cookies.py").read_text()))
    for name in set(re.findall(r"tokenshape_[a-z_]+", text)) - cookies:
        base = name.removesuffix("_total")
        assert base in defined or name in defined, name


def test_docs_carry_no_design_citations():
    for page, text in _hand_written().items():
        assert "DESIGN §" not in text and "DESIGN.md" not in text, page
    for path in REFERENCE.glob("*.md"):
        assert "DESIGN §" not in path.read_text(), path.name


def test_every_page_is_in_the_navigation():
    nav = (ROOT / "mkdocs.yml").read_text()
    for path in DOCS.rglob("*.md"):
        assert path.relative_to(DOCS).as_posix() in nav, path


def test_readme_and_architecture_stay_short():
    assert len(README.splitlines()) <= 150
    assert len((DOCS / "architecture.md").read_text().splitlines()) <= 200
    shot = DOCS / "img" / "shapes.png"
    assert shot.exists() and shot.stat().st_size < 400_000
    assert "docs/img/shapes.png" in README


def test_docs_name_only_paths_that_exist():
    # bench/RESULTS.md is history: it names paths as they were at each commit.
    # A path from the repository root (tests/unit/app/… is a tests/ path, not an app/ one).
    pattern = re.compile(
        r"(?<![\w./-])(?:app|ingest|bench|migrations|static|jsbundle|tests)/[\w./-]*"
    )
    for page, text in _hand_written().items():
        if page == "bench/RESULTS.md":
            continue
        for match in pattern.finditer(text):
            path = match.group(0).rstrip(".")
            assert (ROOT / path).exists(), (page, path)
