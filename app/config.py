"""Settings: one object read from TOKENSHAPE_* environment variables and `.env`."""

from __future__ import annotations

import functools
import ipaddress
import re
import zoneinfo
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


def is_loopback(name: str) -> bool:
    """`localhost` or a loopback address (a name like 127.example.com is neither)."""
    name = name.strip("[]")
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class Settings(BaseSettings):
    """Every tunable of the server; each field is documented in README.md and .env.example."""

    model_config = SettingsConfigDict(
        env_prefix="TOKENSHAPE_", env_file=".env", extra="ignore", frozen=True
    )

    db: Path = Field(Path("data/tokenshape.duckdb"), description="DuckDB database file.")
    host: str = Field("127.0.0.1", description="Address the server binds to.")
    port: int = Field(8050, ge=1, le=65535, description="Port the server listens on.")
    auth: str = Field(
        "auto",
        description="Logins: on, off, or auto (on unless the server binds to a loopback address).",
    )
    admin_password: SecretStr = Field(
        SecretStr(""),
        description="At start, with no user yet: create user 'admin' with this password.",
    )
    session_hours: float = Field(
        168, gt=0, le=24 * 90, description="How long a dashboard login lasts, in hours."
    )
    tz: str = Field("UTC", description="IANA time zone for hour-of-day views and demo traffic.")
    max_body_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="Largest ingest body, counted after decompression."
    )
    max_items_per_request: int = Field(
        100_000, ge=1, description="Most records one ingest request may carry."
    )
    body_timeout_s: float = Field(
        30.0, gt=0, description="Longest an ingest body may take to arrive; slower gets 408."
    )
    header_timeout_s: float = Field(
        10.0, gt=0, description="Longest a request's headers may take to arrive (then 408)."
    )
    rollup_hourly_days: int = Field(
        14,
        ge=0,
        description="Days the hourly rollups keep full grain, tenant included (0: forever).",
    )
    rollup_hourly_nt_days: int = Field(
        90, ge=0, description="Days hourly rollups without tenant are kept (0: forever)."
    )
    rollup_daily_days: int = Field(
        400,
        ge=0,
        description="Days the daily rollups (days of TOKENSHAPE_TZ) are kept (0: forever).",
    )
    rollup_settle_s: float = Field(
        60.0, ge=0, description="An hour's rollup is rebuilt once no write touched it this long."
    )
    writer_queue_rows: int = Field(
        200_000, ge=1, description="Rows waiting for the writer before ingest answers 503."
    )
    writer_flush_rows: int = Field(
        50_000, ge=1, description="The writer commits once this many rows are waiting."
    )
    writer_flush_ms: float = Field(
        5.0, ge=0, description="Longest a batch waits for others to share its commit."
    )
    reject_raw_chars: int = Field(
        4096, ge=64, description="How much of a rejected item's raw text `rejects` keeps."
    )
    rate_limit_requests: int = Field(
        1000, ge=0, description="Ingest requests a second per token (0: unlimited); over → 429."
    )
    rate_limit_requests_burst: int = Field(
        2000, ge=1, description="Ingest requests a token may send at once above that rate."
    )
    rate_limit_records: int = Field(
        250_000, ge=0, description="Ingest records a second per token (0: unlimited); over → 429."
    )
    rate_limit_records_burst: int = Field(
        500_000, ge=1, description="Ingest records a token may send at once above that rate."
    )
    retention_days: int = Field(
        90, ge=0, description="Days raw requests are kept after they are received (0: forever)."
    )
    reject_retention_days: int = Field(
        14, ge=0, description="Days quarantined rejects are kept (0: forever)."
    )
    seasonal_threshold: float = Field(
        0.10, ge=0, le=1, description="Seasonal engines are advised only when they save this share."
    )
    slo_ttft_ms: float | None = Field(
        None, gt=0, description="Fleet latency target: TTFT at slo_percentile, ms (unset: none)."
    )
    slo_itl_ms: float | None = Field(
        None, gt=0, description="Fleet latency target: inter-token latency at the percentile, ms."
    )
    slo_e2e_ms: float | None = Field(
        None, gt=0, description="Fleet latency target (optional): total time at the percentile."
    )
    slo_percentile: float = Field(
        95, ge=50, le=99.99, description="The percentile latency targets hold at."
    )
    cost_per_gpu_hour: float | None = Field(
        None, ge=0, le=10_000, description="Fleet default cost of one GPU-hour, for plans in money."
    )
    plans_refresh_s: float = Field(
        240.0,
        ge=0,
        description="How often the fleet's replica plans are computed in the background, so "
        "pages find them ready (0: only when a page asks).",
    )
    currency: str = Field(
        "$", min_length=1, max_length=8, description="Currency symbol or code money is shown in."
    )
    api_price_input_per_mtok: float | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="An API's price per million input tokens, for comparison.",
    )
    api_price_output_per_mtok: float | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="An API's price per million output tokens, for comparison.",
    )
    trusted_proxies: str = Field(
        "",
        description=(
            "Comma-separated addresses (or CIDR networks) of reverse proxies whose "
            "X-Forwarded-For / X-Forwarded-Proto are believed; empty: none, the peer address is "
            "the client."
        ),
    )
    public_url: str = Field(
        "http://127.0.0.1:8050", description="The dashboard's address, for links in the email."
    )
    smtp_host: str = Field("", description="SMTP server for the weekly email (empty: no email).")
    smtp_port: int = Field(587, ge=1, le=65535, description="SMTP port.")
    smtp_tls: str = Field("starttls", description="SMTP security: starttls, ssl or none.")
    smtp_user: str = Field("", description="SMTP user name (empty: no login).")
    smtp_password: SecretStr = Field(SecretStr(""), description="SMTP password (never logged).")
    smtp_from: str = Field("tokenshape@localhost", description="The email's From address.")
    report_to: str = Field(
        "", description="Comma-separated recipients of the weekly email (empty: no schedule)."
    )
    report_cron: str = Field(
        "0 8 * * 1",
        description="When the weekly email goes out: minute hour * * weekday.",
        # Validated by app.jobs.cron.check_setting where the schedule is used (serve, the
        # Runtime): the settings import nothing of the app.
    )
    report_tz: str = Field("UTC", description="IANA time zone of the report schedule.")
    push_url: str = Field(
        "",
        description="A central tokenshape this server pushes its own hourly rollups to, e.g. "
        "https://central.example:8050 (empty: no push).",
    )
    push_token: SecretStr = Field(
        SecretStr(""),
        description="An ingest token of the central node, for the push (never logged).",
    )
    push_every_s: float = Field(
        300.0,
        gt=0,
        description="Seconds between push rounds; each sends the hours rebuilt since the last "
        "complete one.",
    )
    push_origin: str = Field(
        "", description="This node's name at the central node (empty: the host name)."
    )
    push_give_up_s: float = Field(
        600.0,
        ge=0,
        description="A push request the central node has not taken for this long fails its "
        "round; the next round sends its hours again (0: retry forever).",
    )
    log_level: str = Field("info", description="Log level: debug, info, warning, error.")
    log_format: Literal["text", "json"] = Field(
        "text", description="Log lines: text, or json (one object per line); secrets redacted."
    )

    @field_validator("auth")
    @classmethod
    def _auth_mode(cls, value: str) -> str:
        if value not in ("auto", "on", "off"):
            raise ValueError(f"{value!r}: use on, off or auto")
        return value

    @property
    def tier_days(self) -> tuple[int, int, int]:
        """Retention of the rollup tiers: (hourly full grain, hourly without tenant, daily)."""
        return (self.rollup_hourly_days, self.rollup_hourly_nt_days, self.rollup_daily_days)

    @model_validator(mode="after")
    def _tiers_nest(self) -> Settings:
        # Each tier is built from the one below: a coarser tier must live at least as long.
        days = [d or float("inf") for d in self.tier_days]
        if not days[0] <= days[1] <= days[2]:
            raise ValueError(
                "rollup retention must nest: TOKENSHAPE_ROLLUP_HOURLY_DAYS <= "
                "TOKENSHAPE_ROLLUP_HOURLY_NT_DAYS <= TOKENSHAPE_ROLLUP_DAILY_DAYS (0 is forever); "
                f"got {self.tier_days}"
            )
        return self

    @property
    def loopback(self) -> bool:
        """Whether the server listens only on this machine."""
        return is_loopback(self.host)

    @property
    def auth_enabled(self) -> bool:
        """Logins required: always when on, and under auto whenever the bind is not loopback."""
        return self.auth == "on" or (self.auth == "auto" and not self.loopback)

    @field_validator("push_url")
    @classmethod
    def _push_url(cls, value: str) -> str:
        value = value.strip()
        if re.match(r"^https?://[^/\s]*@", value):
            raise ValueError(
                "the URL holds a user name or password: put the central node's ingest token "
                "in TOKENSHAPE_PUSH_TOKEN instead (a URL is logged and shown on /api/health)"
            )
        if value and not re.match(r"^https?://[^/\s]+", value):
            raise ValueError(
                f"{value!r}: use the central node's address with its scheme, e.g. "
                "https://central.example:8050"
            )
        return value

    @model_validator(mode="after")
    def _push_needs_token(self) -> Settings:
        if self.push_url and not self.push_token.get_secret_value():
            raise ValueError(
                "TOKENSHAPE_PUSH_URL is set but TOKENSHAPE_PUSH_TOKEN is empty: set it to an "
                "ingest token of the central node (`tokenshape token create --gateway NAME "
                "--scope ingest` there), or unset TOKENSHAPE_PUSH_URL"
            )
        return self

    @field_validator("smtp_tls")
    @classmethod
    def _tls_mode(cls, value: str) -> str:
        if value not in ("starttls", "ssl", "none"):
            raise ValueError(f"{value!r}: use starttls, ssl or none")
        return value

    @field_validator("tz", "report_tz")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if value not in zones():
            raise ValueError(
                f"unknown time zone {value!r}: use an IANA name such as 'UTC' or 'Europe/Berlin'"
                + (
                    " (the host's aliases localtime and posixrules and the right/ and posix/ "
                    "variants are not zones the database knows)"
                    if value in ("localtime", "posixrules", "Factory")
                    or value.startswith(("right/", "posix/"))
                    else ""
                )
            )
        return value


@functools.cache
def zones() -> frozenset[str]:
    """The IANA zones tokenshape draws and buckets in: zoneinfo's names less the host's
    aliases and leap-second variants (localtime, posixrules, right/…), which DuckDB rejects."""
    return frozenset(
        name
        for name in zoneinfo.available_timezones()
        if not name.startswith(("posix/", "right/"))
        and name not in ("localtime", "posixrules", "Factory")
    )


def setting_names() -> list[str]:
    """Environment variable names of every setting, for docs checks and `--help`."""
    return [f"TOKENSHAPE_{name.upper()}" for name in Settings.model_fields]
