"""The deployment files (Dockerfile, docker-compose.yml, .env.example) agree with the code."""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import yaml

from app import cli
from app.config import Settings, setting_names

ROOT = Path(__file__).resolve().parents[1]


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of the Dockerfile, continuation lines joined, comments dropped."""
    text = (ROOT / "Dockerfile").read_text()
    logical: list[str] = []
    current = ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):  # a comment inside a continued instruction
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    if current:
        logical.append(current)
    out = []
    for entry in logical:
        word, _, rest = entry.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def dockerfile_env() -> dict[str, str]:
    """Variables set by the Dockerfile's ENV instructions (KEY=VALUE form)."""
    env: dict[str, str] = {}
    for word, rest in dockerfile_instructions():
        if word == "ENV":
            for pair in shlex.split(rest):
                key, sep, value = pair.partition("=")
                assert sep, f"ENV {rest!r}: use the KEY=VALUE form"
                env[key] = value
    return env


def dockerfile_cmd() -> list[str]:
    """The last CMD of the Dockerfile, which must be in exec (JSON array) form."""
    cmds = [rest for word, rest in dockerfile_instructions() if word == "CMD"]
    assert cmds, "the Dockerfile has no CMD"
    argv = json.loads(cmds[-1])
    assert isinstance(argv, list) and argv, "CMD must be a non-empty JSON array (exec form)"
    return argv


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def container_ports(service: dict) -> list[int]:
    """Container-side ports of a compose service's `ports` (short or long syntax)."""
    ports = []
    for entry in service.get("ports", []):
        if isinstance(entry, dict):
            ports.append(int(entry["target"]))
        else:
            ports.append(int(str(entry).split("/")[0].rsplit(":", 1)[-1]))
    return ports


def test_compose_has_the_services(compose: dict) -> None:
    assert {"tokenshape", "mailpit"} <= set(compose["services"])
    assert "tokenshape-data" in (compose.get("volumes") or {})


def test_compose_command_is_a_valid_serve(compose: dict) -> None:
    command = compose["services"]["tokenshape"]["command"]
    assert isinstance(command, list) and command[0] == "tokenshape"
    try:
        args = cli.build_parser().parse_args(command[1:])
    except SystemExit:
        pytest.fail(f"{command} is not a valid `tokenshape` command line (see the error above)")
    assert args.func is cli.cmd_serve
    port = int(dockerfile_env()["TOKENSHAPE_PORT"])
    assert args.port == port
    assert port in container_ports(compose["services"]["tokenshape"])


def test_compose_keeps_the_database_on_the_volume(compose: dict) -> None:
    service = compose["services"]["tokenshape"]
    db = Path(service["environment"]["TOKENSHAPE_DB"])
    mounts = {
        str(v).split(":")[1] for v in service["volumes"] if str(v).startswith("tokenshape-data:")
    }
    assert any(db.is_relative_to(m) for m in mounts), f"{db} is not on the tokenshape-data volume"


def test_dockerfile_runs_the_console_script() -> None:
    assert dockerfile_cmd()[0] == "tokenshape"
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts.get("tokenshape") == "app.cli:main"


def test_dockerfile_port_and_healthcheck_agree() -> None:
    port = dockerfile_env()["TOKENSHAPE_PORT"]
    instructions = dockerfile_instructions()
    exposed = [
        p.split("/")[0] for word, rest in instructions if word == "EXPOSE" for p in rest.split()
    ]
    assert port in exposed
    checks = [rest for word, rest in instructions if word == "HEALTHCHECK"]
    assert checks and f"127.0.0.1:{port}/api/health" in checks[0]


def test_env_example_documents_every_setting() -> None:
    text = (ROOT / ".env.example").read_text()
    missing = [name for name in setting_names() if name not in text]
    assert not missing, f".env.example lacks {', '.join(missing)}"


def test_env_example_shows_the_defaults() -> None:
    shown = dict(
        re.findall(r"^#\s*(TOKENSHAPE_\w+)=(.*)$", (ROOT / ".env.example").read_text(), re.M)
    )
    for name, field in Settings.model_fields.items():
        var = f"TOKENSHAPE_{name.upper()}"
        default = "" if field.default is None else str(field.default)  # unset: shown empty
        assert shown.get(var) == default, f"{var}: .env.example shows {shown.get(var)!r}"


def dockerfile_stages() -> list[tuple[str, str | None, list[tuple[str, str]]]]:
    """(base image, stage name or None, the stage's instructions) for each FROM."""
    stages: list[tuple[str, str | None, list[tuple[str, str]]]] = []
    for word, rest in dockerfile_instructions():
        if word == "FROM":
            parts = rest.split()
            assert len(parts) in (1, 3) and (len(parts) == 1 or parts[1].upper() == "AS"), rest
            stages.append((parts[0], parts[2] if len(parts) == 3 else None, []))
        elif stages:
            stages[-1][2].append((word, rest))
    return stages


def dockerfile_global_args() -> dict[str, str]:
    """The ARGs declared before the first FROM, with their defaults."""
    args: dict[str, str] = {}
    for word, rest in dockerfile_instructions():
        if word == "FROM":
            break
        if word == "ARG":
            key, _, value = rest.partition("=")
            args[key] = value
    return args


def makefile_variable(name: str) -> str:
    found = re.search(rf"^{name}\s*:?=\s*(.*?)\s*$", (ROOT / "Makefile").read_text(), re.M)
    assert found, f"the Makefile sets no {name}"
    return found.group(1)


def makefile_recipe(target: str) -> list[str]:
    """The recipe lines of a Makefile target, with its prerequisites as the first item."""
    lines = (ROOT / "Makefile").read_text().splitlines()
    for i, line in enumerate(lines):
        if re.match(rf"^{re.escape(target)}\s*:(?!=)", line):
            recipe = [line.split(":", 1)[1].strip()]
            for body in lines[i + 1 :]:
                if not body.startswith("\t"):
                    break
                recipe.append(body.strip())
            return recipe
    raise AssertionError(f"the Makefile has no target {target}")


def test_dockerfile_copies_only_from_earlier_stages() -> None:
    stages = dockerfile_stages()
    assert len(stages) >= 3, "build (python), plotly (node) and the final image"
    names = [name for _, name, _ in stages]
    assert len(set(n for n in names if n)) == len([n for n in names if n]), "duplicate stage names"
    for i, (base, _, instructions) in enumerate(stages):
        earlier = {n for n in names[:i] if n}
        for word, rest in instructions:
            for ref in re.findall(r"--from=(\S+)", rest) if word == "COPY" else []:
                assert ref in earlier, f"COPY --from={ref}: no stage {ref!r} before it"
        if base in names[i:]:
            pytest.fail(f"FROM {base}: that stage is defined later")


def test_dockerfile_and_makefile_pin_the_same_uv() -> None:
    pinned = makefile_variable("UV_VERSION")
    assert re.fullmatch(r"\d+\.\d+\.\d+", pinned), f"the Makefile's UV_VERSION {pinned!r}"
    assert dockerfile_global_args().get("UV_VERSION") == pinned
    installs = [
        rest for word, rest in dockerfile_instructions() if word == "RUN" and "uv==" in rest
    ]
    assert installs and all("uv==${UV_VERSION}" in rest for rest in installs)


def test_dockerfile_installs_the_lock_editable() -> None:
    stages = dockerfile_stages()
    runs = [rest for _, _, ins in stages for word, rest in ins if word == "RUN"]
    assert not any("pip install" in r and "uv==" not in r for r in runs), "pip installs only uv"
    syncs = [r for r in runs if "uv sync" in r]
    assert syncs and all("--locked" in r for r in syncs), "every uv sync is --locked to uv.lock"
    # The last sync installs the project itself, editable (migrations/ beside the source tree).
    assert "--no-install-project" not in syncs[-1] and "--no-editable" not in syncs[-1]
    env = dockerfile_env()
    assert env["UV_PROJECT_ENVIRONMENT"] == "/srv/tokenshape/.venv"
    assert env["PATH"].startswith("/srv/tokenshape/.venv/bin:")
    final = stages[-1][2]
    assert ("COPY", "--from=build /srv/tokenshape /srv/tokenshape") in final, (
        "the final image keeps the source tree where the editable install points"
    )
    # The venv's interpreter is a link into the base image: both Python stages share one.
    python_bases = {base for base, name, _ in stages if name != "plotly"}
    assert python_bases == {"${PYTHON_IMAGE}"}, python_bases
    assert (ROOT / "uv.lock").is_file()
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert "uv.lock" not in ignored and "README.md" not in ignored


def test_docker_image_fetches_the_plotly_bundle_the_app_accepts() -> None:
    stages = {name: ins for _, name, ins in dockerfile_stages()}
    build = " ".join(rest for word, rest in stages["build"] if word == "RUN")
    found = re.search(r"get_plotlyjs_version.*?> (\S+)", build)
    assert found, "the build stage writes the locked plotly's plotly.js version to a file"
    version_file = found.group(1)
    node = stages["plotly"]
    copied = [rest for word, rest in node if word == "COPY" and rest.startswith("--from=build")]
    assert any(rest.split()[1] == version_file for rest in copied), copied
    runs = [rest for word, rest in node if word == "RUN"]
    assert any(re.search(r"jsbundle/build\.sh \"\$\(cat \S+\)\" /build/out", r) for r in runs)
    assert not any("||" in r for r in runs), "a failed bundle build must fail the image build"
    final = dockerfile_stages()[-1][2]
    assert ("COPY", "--from=plotly /build/out/ /srv/tokenshape/static/vendor/") in final
    # The app's own acceptance check runs in the image, so a mismatch fails the build.
    assert any("partial_plotly_usable()" in rest for word, rest in final if word == "RUN")
    assert not any(
        word == "ARG" and rest.startswith("PLOTLY_JS_VERSION")
        for word, rest in dockerfile_instructions()
    ), "no hand-kept plotly.js version"


def test_make_test_runs_the_checks_in_order() -> None:
    mkdocs = makefile_variable("MKDOCS")
    assert mkdocs.endswith("$(BIN)/mkdocs"), mkdocs
    steps = [
        s.replace("$(MKDOCS)", mkdocs)
        for s in makefile_recipe("lint")[1:] + makefile_recipe("test")[1:]
    ]
    wanted = [
        "ruff check",
        "ruff format --check",
        "lint-imports",
        "mypy app ingest",
        "mkdocs build --strict",
        "pytest",
    ]
    at = [next((i for i, s in enumerate(steps) if w in s), None) for w in wanted]
    assert None not in at and at == sorted(at), list(zip(wanted, at, strict=True))
    assert makefile_recipe("test")[0].split()[0] == "lint"
    assert "chromium" in makefile_recipe("test")[0].split()
    assert makefile_recipe("lint")[0] == "install"
    assert any("$(MKDOCS) build -d site" in s for s in makefile_recipe("docs")[1:])
    ignored = (ROOT / ".gitignore").read_text().split()
    assert "site/" in ignored and f"{makefile_variable('TOOLS')}/" in ignored


def test_make_install_syncs_the_lock_with_the_test_tools() -> None:
    prerequisites, *recipe = makefile_recipe("$(BIN)/tokenshape")
    assert {"pyproject.toml", "uv.lock"} <= set(prerequisites.split()), "re-sync when they change"
    assert any("sync --locked" in line and "$(EXTRAS)" in line for line in recipe)
    extras = re.findall(r"--extra (\w+)", makefile_variable("EXTRAS"))
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert set(extras) <= set(optional) and {"test", "docs"} <= set(extras)
    tools = " ".join(optional["test"])
    for tool in ("pytest", "ruff", "import-linter", "mypy", "tokenshape[tokenizer]"):
        assert tool in tools, f"the test extra lacks {tool}"
    assert {"mkdocs", "mkdocs-material"} <= {re.split(r"[<>=\[ ]", d)[0] for d in optional["docs"]}


def _requirement(spec: str) -> tuple[str, str]:
    """(normalised name, version specifier) of a PEP 508 requirement without markers."""
    found = re.fullmatch(r"([A-Za-z0-9._-]+)(\[[^\]]*\])?\s*(.*)", spec.split(";")[0].strip())
    assert found, spec
    return re.sub(r"[-_.]+", "-", found.group(1)).lower(), found.group(3)


def test_lock_matches_pyproject_and_the_caps() -> None:
    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lock = tomllib.loads((ROOT / "uv.lock").read_text())
    root = next(p for p in lock["package"] if p["name"] == "tokenshape")
    locked_reqs = {(r["name"], r.get("specifier", "")) for r in root["metadata"]["requires-dist"]}
    wanted = project["dependencies"] + [
        d for ds in project["optional-dependencies"].values() for d in ds
    ]
    for spec in wanted:
        name, specifier = _requirement(spec)
        if name == "tokenshape":
            continue
        assert (name, str(SpecifierSet(specifier))) in {
            (n, str(SpecifierSet(s))) for n, s in locked_reqs
        }, f"uv.lock is stale for {spec}: run `make lock`"
    versions: dict[str, list[str]] = {}
    for package in lock["package"]:
        versions.setdefault(package["name"], []).append(package["version"])
    for spec in project["dependencies"]:
        name, specifier = _requirement(spec)
        for version in versions[name]:
            assert version in SpecifierSet(specifier), f"{name} {version} is locked, outside {spec}"


def test_every_cap_names_the_internals_it_guards() -> None:
    """An upper bound sits under a comment naming a file of ours that relies on the library."""
    lines = (ROOT / "pyproject.toml").read_text().splitlines()
    start = lines.index("dependencies = [")
    comment: list[str] = []
    capped = 0
    for line in lines[start + 1 :]:
        stripped = line.strip()
        if stripped == "]":
            break
        if stripped.startswith("#"):
            comment.append(stripped)
            continue
        spec = stripped.split("#")[0].strip().strip('",')
        if "<" in spec:
            capped += 1
            text = " ".join(comment)
            paths = re.findall(r"(?:app|ingest|jsbundle)/[\w/.]*\w", text)
            assert paths, f"{spec}: say which of our files use which internals"
            for path in paths:
                assert (ROOT / path).exists(), f"{spec}: {path} does not exist"
        comment = []
    assert capped >= 4, "fastapi, uvicorn, dash and plotly are capped"


def test_a_missing_tokenizer_extra_says_how_to_install_it(monkeypatch, tmp_path) -> None:
    import sys

    from ingest.formats.benchmarks import BenchmarkFormatError, genai_perf_rows

    monkeypatch.setitem(sys.modules, "tokenizers", None)  # `import tokenizers` raises
    (tmp_path / "profile_export.json").write_text("{}")
    with pytest.raises(BenchmarkFormatError, match=r"pip install 'tokenshape\[tokenizer\]'"):
        next(genai_perf_rows(tmp_path / "profile_export.json", None, tmp_path / "tok.json"))
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(d.startswith("tokenizers") for d in optional["tokenizer"])
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not any(d.startswith("tokenizers") for d in deps), "tokenizers is optional"
