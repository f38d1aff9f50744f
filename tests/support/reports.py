"""The weekly email's test week, and settings that send it to a loopback SMTP server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from app.config import Settings
from tests.support.net import free_port

NOW = datetime(2026, 11, 25, 9, 0, tzinfo=UTC)  # a Wednesday: the last full week is 2026-W47
WEEK = "2026-W47"


def report_settings(tmp_path: Path, port: int, **extra) -> Settings:
    """Settings over tmp_path/r.duckdb (`report_db`) with the email going to SMTP at `port`."""
    return Settings(
        db=tmp_path / "r.duckdb",
        port=free_port(),
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_tls="none",
        smtp_from="tokenshape@example.com",
        report_to="lead@example.com, oncall@example.com",
        _env_file=None,
        **extra,
    )
