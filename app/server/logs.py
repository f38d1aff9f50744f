"""Logging in one place: text or JSON lines, uvicorn's logs included, secrets redacted."""

from __future__ import annotations

import json
import logging
import re
import sys
from datetime import UTC, datetime
from typing import IO, Any

from app.config import Settings

HANDLER_NAME = "tokenshape"
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
REDACTED = "[redacted]"

# Our API tokens: the prefix and 8 characters stay, as `tokenshape token list` shows them.
_TOKEN = re.compile(r"tks_[A-Za-z0-9]{20,}")
# A value: a quoted string or a run up to a separator (query strings, headers, dict reprs).
_VALUE = r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[^\s\"',;&}]+)"
_AUTH = re.compile(
    r"(?i)\b(authorization|x-api-key|api[_-]?key)([\"']?\s*[:=]\s*[\"']?)"
    r"((?:bearer|basic|token)\s+)?([^\s\"',;&}]+)"
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)([^\s\"',;&}]+)")
_SECRET_KEY = r"[\w-]*(?:password|passwd|secret)[\w-]*"
_PASSWORD = re.compile(rf"(?i)\b({_SECRET_KEY})([\"']?\s*[:=]\s*)" + _VALUE)
_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s:@]+:)([^@\s/]+)(@)")
_SENSITIVE_KEY = re.compile(rf"(?i)^(?:{_SECRET_KEY}|authorization|x-api-key|api[_-]?key)$")


def _mask(value: str) -> str:
    """A secret value as it may be logged: tokens keep their prefix, anything else goes."""
    if REDACTED in value:  # already done by an earlier pattern
        return value
    if _TOKEN.fullmatch(value):
        return f"{value[:12]}…{REDACTED}"
    return REDACTED


def _quoted_mask(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[0] + _mask(value[1:-1]) + value[0]
    return _mask(value)


def redact(text: str) -> str:
    """Text with API tokens, Authorization values, passwords and URL passwords masked."""
    text = _AUTH.sub(lambda m: m[1] + m[2] + (m[3] or "") + _mask(m[4]), text)
    text = _BEARER.sub(lambda m: m[1] + _mask(m[2]), text)
    text = _PASSWORD.sub(lambda m: m[1] + m[2] + _quoted_mask(m[3]), text)
    text = _URL_USERINFO.sub(lambda m: m[1] + REDACTED + m[3], text)
    return _TOKEN.sub(lambda m: _mask(m[0]), text)


def scrub(value: Any) -> Any:
    """A structured value with every string redacted and every sensitive key's value masked."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {
            k: REDACTED if isinstance(k, str) and _SENSITIVE_KEY.match(k) else scrub(v)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple | set):
        return [scrub(v) for v in value]
    return value


_STANDARD = set(logging.makeLogRecord({}).__dict__) | {"message", "asctime", "taskName"}
# uvicorn adds an ANSI-coloured copy of some messages; it only duplicates `message`.
_DROPPED = {"color_message"}


def _extras(record: logging.LogRecord) -> dict[str, Any]:
    return {
        k: v
        for k, v in record.__dict__.items()
        if k not in _STANDARD and k not in _DROPPED and not k.startswith("_")
    }


class AccessFields(logging.Filter):
    """uvicorn's access lines also as fields: client, method, path, http_version, status."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Add the fields from the access line's arguments."""
        if record.name == "uvicorn.access" and isinstance(record.args, tuple):
            if len(record.args) == 5:
                names = ("client", "method", "path", "http_version", "status")
                for name, value in zip(names, record.args, strict=True):
                    setattr(record, name, value)
        return True


class Redact(logging.Filter):
    """Masks secrets in every record: the message, its arguments, extra fields, tracebacks."""

    def filter(self, record: logging.LogRecord) -> bool:
        """Rewrite the record in place with its final, redacted message."""
        try:
            message = record.getMessage()
        except Exception:  # arguments that do not fit the format: keep what can be shown
            message = f"{record.msg} {record.args!r}"
        record.msg, record.args = redact(message), None
        for key, value in _extras(record).items():
            setattr(record, key, scrub(value))
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ts, level, logger, message, extra fields, exception."""

    def format(self, record: logging.LogRecord) -> str:
        """The record as a single line of JSON."""
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in _extras(record).items():
            line.setdefault(key, value)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def configure(settings: Settings, stream: IO[str] | None = None) -> logging.Handler:
    """Route every logger, uvicorn's included, through one redacting handler on stderr."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.set_name(HANDLER_NAME)
    # Handler filters see every record that reaches the handler, propagated ones too
    # (a logger's own filters would miss its children's records).
    handler.addFilter(AccessFields())
    handler.addFilter(Redact())
    handler.setFormatter(
        JsonFormatter() if settings.log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    root = logging.getLogger()
    for old in [h for h in root.handlers if h.get_name() == HANDLER_NAME]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(settings.log_level.upper())
    # uvicorn keeps its own handlers unless told otherwise (see uvicorn_options): drop them
    # so its access log, which carries query strings, passes the same filter.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access", "uvicorn.asgi"):
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.setLevel(logging.NOTSET)  # the root's level; uvicorn.run sets its own again
        logger.propagate = True
    # httpx logs every request at INFO; in the server that is only the Dash warm-up call.
    logging.getLogger("httpx").setLevel(max(root.level, logging.WARNING))
    logging.captureWarnings(True)
    return handler


def uvicorn_options(settings: Settings) -> dict[str, Any]:
    """uvicorn.run/Config arguments that leave its logging to configure()."""
    return {"log_config": None, "log_level": settings.log_level}
