"""Structured logs: JSON lines from the formatter and from a served process, secrets redacted."""

from __future__ import annotations

import io
import json
import logging
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.cli import main
from app.config import Settings
from app.server import logs
from app.storage import tokens
from app.storage.database import Database
from bench._server import start_server
from tests.conftest import free_port
from tests.fixtures import batch

PASSWORD = "hunter2-Plaintext"
WRONG = "tks_" + "Z" * 38  # well formed, never issued


@pytest.fixture
def restore_logging() -> Iterator[None]:
    """Put the loggers configure() touches back as they were."""
    names = (None, "uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi", "httpx")
    loggers = [logging.getLogger(n) for n in names]
    saved = [(lg, lg.level, lg.propagate, list(lg.handlers)) for lg in loggers]
    yield
    for logger, level, propagate, handlers in saved:
        logger.setLevel(level)
        logger.propagate = propagate
        logger.handlers[:] = handlers
    logging.captureWarnings(False)


def configured(log_format: str) -> io.StringIO:
    out = io.StringIO()
    logs.configure(Settings(log_format=log_format, log_level="debug", _env_file=None), out)
    return out


def secret_token() -> str:
    return "tks_" + "Ab3" * 12 + "xy"


def test_json_lines_carry_fields_and_no_secrets(restore_logging):
    out = configured("json")
    token = secret_token()
    log = logging.getLogger("tokenshape.test")
    log.info("shipping with %s and password=%s", token, PASSWORD)
    log.warning(
        "request headers",
        extra={
            "headers": {"Authorization": f"Bearer {token}"},
            "body": f'{{"password": "{PASSWORD}"}}',
            "gateway": "gw-a",
        },
    )
    try:
        raise RuntimeError(f"login failed for smtp://ops:{PASSWORD}@mail.example.com with {token}")
    except RuntimeError:
        log.exception("sending the weekly email failed")
    logging.getLogger("uvicorn.access").info(
        '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5555", "GET", f"/api/x?token={token}", "1.1", 200
    )

    text = out.getvalue()
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 4
    assert token not in text and PASSWORD not in text
    assert token[4:] not in text  # not even the token's body without its prefix
    first, extra, failed, access = lines
    assert set(first) >= {"ts", "level", "logger", "message"}
    assert (first["level"], first["logger"]) == ("info", "tokenshape.test")
    assert first["message"] == f"shipping with {token[:12]}…[redacted] and password=[redacted]"
    assert first["ts"].endswith("+00:00")
    assert extra["gateway"] == "gw-a" and extra["headers"] == {"Authorization": "[redacted]"}
    assert extra["body"] == '{"password": "[redacted]"}'
    assert failed["level"] == "error" and "RuntimeError" in failed["exception"]
    assert "smtp://ops:[redacted]@mail.example.com" in failed["exception"]
    assert (access["method"], access["status"]) == ("GET", 200)
    assert access["path"] == f"/api/x?token={token[:12]}…[redacted]"


def test_text_format_redacts_the_same(restore_logging):
    out = configured("text")
    token = secret_token()
    logging.getLogger("tokenshape.test").error(
        "Authorization: Bearer %s, TOKENSHAPE_SMTP_PASSWORD=%s", token, PASSWORD
    )
    line = out.getvalue().strip()
    assert " ERROR tokenshape.test: Authorization: Bearer " in line
    assert token not in line and PASSWORD not in line
    assert line.endswith(f"Bearer {token[:12]}…[redacted], TOKENSHAPE_SMTP_PASSWORD=[redacted]")


def test_an_unknown_log_format_is_refused_with_the_choices(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # no .env of the developer's
    monkeypatch.setenv("TOKENSHAPE_LOG_FORMAT", "xml")
    assert main(["serve", "--db", str(tmp_path / "t.duckdb")]) == 2
    err = capsys.readouterr().err
    assert "log_format" in err and "'text' or 'json'" in err


def test_served_process_logs_json_lines_without_tokens(tmp_path: Path):
    db_path = tmp_path / "t.duckdb"
    with Database(db_path).open() as db:
        token, _ = tokens.create(db.cursor(), "gw-a", "ingest")
    port = free_port()
    err_path = tmp_path / "stderr.log"
    with err_path.open("wb") as err:
        proc = start_server(
            db_path,
            port,
            err,
            stdout=subprocess.DEVNULL,
            TOKENSHAPE_LOG_FORMAT="json",
            TOKENSHAPE_LOG_LEVEL="info",
        )
        try:
            url = f"http://127.0.0.1:{port}"
            ok = httpx.post(
                url + "/v1/requests",
                json=batch(2),
                headers={"Authorization": f"Bearer {token}"},
            )
            wrong = httpx.post(
                url + "/v1/requests", json=batch(1), headers={"Authorization": f"Bearer {WRONG}"}
            )
            leaky = httpx.get(
                url + "/metrics", params={"token": token, "password": PASSWORD, "t2": WRONG}
            )
            assert (ok.status_code, wrong.status_code, leaky.status_code) == (200, 401, 200)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)

    text = err_path.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert token not in text and WRONG not in text and PASSWORD not in text
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    statuses = {(a["method"], a["path"], a["status"]) for a in access}
    assert ("POST", "/v1/requests", 200) in statuses
    assert ("POST", "/v1/requests", 401) in statuses
    leaked = [a["path"] for a in access if a["path"].startswith("/metrics?")]
    assert leaked == [
        f"/metrics?token={token[:12]}…[redacted]&password=[redacted]&t2={WRONG[:12]}…[redacted]"
    ]
    assert any(line["logger"] == "tokenshape" and "serving" in line["message"] for line in lines)
