"""Structured logs (app/server/logs): JSON lines and text from the formatter, secrets redacted."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from app.cli import main
from app.config import Settings
from app.server import logs

PASSWORD = "hunter2-Plaintext"


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
