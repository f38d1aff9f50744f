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
        assert shown.get(var) == str(field.default), f"{var}: .env.example shows {shown.get(var)!r}"


def test_docker_image_fetches_the_plotly_bundle_the_app_accepts():
    from plotly.offline import get_plotlyjs_version

    args = [rest for word, rest in dockerfile_instructions() if word == "ARG"]
    assert f"PLOTLY_JS_VERSION={get_plotlyjs_version()}" in args, (
        "the Dockerfile's PLOTLY_JS_VERSION must equal the plotly package's plotly.js version, "
        "or the image falls back to the full (slower) bundle"
    )
