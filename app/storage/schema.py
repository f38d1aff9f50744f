"""Table definitions (SQLAlchemy Core): the reference the Alembic migrations must produce."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow as pa
from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    Column,
    DateTime,
    Double,
    Integer,
    MetaData,
    SmallInteger,
    String,
    Table,
)

metadata = MetaData()

TSZ = DateTime(timezone=True)

requests = Table(
    "requests",
    metadata,
    Column("gateway", String, nullable=False),
    Column("request_id", String, nullable=False),
    Column("started_at", TSZ, nullable=False),
    Column("received_at", TSZ, nullable=False),
    Column("model", String, nullable=False),
    Column("engine", String),
    Column("tenant", String),
    Column("isl", Integer, nullable=False),
    Column("osl", Integer, nullable=False),
    Column("tokens_estimated", Boolean, nullable=False),
    Column("ttft_ms", Double),
    Column("e2e_ms", Double),
    Column("itl_ms", Double),
    Column("queue_ms", Double),
    Column("token_gaps_ms", ARRAY(Double)),
    Column("status", String, nullable=False),
    Column("error_type", String),
    Column("stream", Boolean),
    Column("cached_tokens", Integer),
    # The probability the gateway kept this record (0 < p <= 1; NULL means 1): the row stands
    # for 1/p requests. Last, as migration 0005 appends it.
    Column("sample_rate", Double),
)

rejects = Table(
    "rejects",
    metadata,
    Column("received_at", TSZ, nullable=False),
    Column("gateway", String),
    Column("format", String, nullable=False),
    Column("item_index", Integer),
    Column("field", String),
    Column("reason", String, nullable=False),
    Column("raw", String),
)

tokens = Table(
    "tokens",
    metadata,
    Column("id", String, primary_key=True),
    Column("token_hash", String, nullable=False, unique=True),
    Column("display", String, nullable=False),
    Column("gateway", String, nullable=False),
    Column("scope", String, nullable=False),
    Column("created_at", TSZ, nullable=False),
    Column("last_used_at", TSZ),
    Column("revoked_at", TSZ),
)

users = Table(
    "users",
    metadata,
    Column("name", String, primary_key=True),
    Column("password_hash", String, nullable=False),
    Column("role", String, nullable=False),
    Column("created_at", TSZ, nullable=False),
    Column("last_login_at", TSZ),
)

sessions = Table(
    "sessions",
    metadata,
    Column("id_hash", String, primary_key=True),
    Column("user_name", String, nullable=False),
    Column("created_at", TSZ, nullable=False),
    Column("expires_at", TSZ, nullable=False),
)

server_keys = Table(
    "server_keys",
    metadata,
    Column("name", String, primary_key=True),
    Column("value", String, nullable=False),
    Column("created_at", TSZ, nullable=False),
)

engines = Table(
    "engines",
    metadata,
    Column("name", String, primary_key=True),
    Column("model", String),
    Column("framework", String),
    Column("profile", String, nullable=False),
    Column("created_at", TSZ, nullable=False),
    Column("updated_at", TSZ, nullable=False),
)

# Every change of an engine profile (migration 0008): who, when, the JSON before and after.
profile_versions = Table(
    "profile_versions",
    metadata,
    Column("engine", String, primary_key=True),
    Column("seq", Integer, primary_key=True),  # 1, 2, … per engine
    Column("changed_at", TSZ, nullable=False),
    Column("author", String, nullable=False),
    Column("action", String, nullable=False),  # create | edit | delete | restore
    Column("before_json", String),  # NULL for a create
    Column("after_json", String),  # NULL for a delete
    Column("summary", String, nullable=False),
)

# Notes people add to the time charts ("deployed vLLM 0.33"), migration 0008.
annotation_notes = Table(  # not `annotations`: that name is the __future__ import
    "annotations",
    metadata,
    Column("id", String, primary_key=True),
    Column("happened_at", TSZ, nullable=False),
    Column("text", String, nullable=False),
    Column("engine", String),  # NULL: about the whole fleet
    Column("author", String, nullable=False),
    Column("created_at", TSZ, nullable=False),
)

report_runs = Table(
    "report_runs",
    metadata,
    Column("id", String, primary_key=True),
    Column("week", String, nullable=False),
    Column("engine", String),
    Column("recipients", String, nullable=False),
    Column("status", String, nullable=False),
    Column("attempt", Integer, nullable=False),
    Column("message_id", String),
    Column("error", String),
    Column("started_at", TSZ, nullable=False),
    Column("finished_at", TSZ),
)


# The rollup tiers (app/storage/tiers.py): the table-name prefix of each, whether it keeps
# `tenant`, and what its `hour` column holds.
TIERS: dict[str, tuple[str, bool]] = {
    "hourly": ("rollup_", True),  # UTC hours at full grain
    "hourly_nt": ("rollup_nt_", False),  # UTC hours without tenant
    "daily": ("rollup_day_", False),  # local days (their start instant) without tenant
}
KINDS = ("shapes", "values", "gaps", "ttft")


def _rollup(name: str, *columns: Column, tenant: bool = True) -> Table:
    """A rollup: one row per (hour or day, the filter's dimensions, a bin)."""
    dims: list[Column] = [
        Column("hour", TSZ, nullable=False),
        Column("model", String, nullable=False),
        Column("engine", String),
        Column("gateway", String, nullable=False),
        Column("tenant", String),
        Column("status", String, nullable=False),
    ]
    if not tenant:
        dims = [c for c in dims if c.name != "tenant"]
    return Table(name, metadata, *dims, *columns)


def _kind_columns(kind: str) -> list[Column]:
    n = Column("n", BigInteger, nullable=False)
    vmax = Column("vmax", Double, nullable=False)
    # w: sum of 1/sample_rate, the requests the rows stand for.
    w = Column("w", Double, nullable=False)
    if kind == "shapes":
        return [
            Column("ib", SmallInteger, nullable=False),
            Column("ob", SmallInteger, nullable=False),
            n,
            w,
        ]
    if kind == "values":
        # vsum weighted: sum of v/sample_rate
        return [
            Column("measure", SmallInteger, nullable=False),
            Column("b", SmallInteger, nullable=False),
            n,
            vmax,
            Column("vsum", Double, nullable=False),
            w,
        ]
    if kind == "gaps":
        return [
            Column("pb", SmallInteger, nullable=False),
            Column("b", SmallInteger, nullable=False),
            n,
            vmax,
            w,
        ]
    # ttft: weighted sums (each row times 1/sample_rate) for the least-squares TTFT-on-ISL slope
    return [
        Column("ib", SmallInteger, nullable=False),
        Column("b", SmallInteger, nullable=False),
        n,
        vmax,
        *(Column(c, Double, nullable=False) for c in ("sx", "sy", "sxy", "sxx")),
        w,
    ]


ROLLUP_TABLES: dict[tuple[str, str], Table] = {
    (tier, kind): _rollup(f"{prefix}{kind}", *_kind_columns(kind), tenant=tenant)
    for tier, (prefix, tenant) in TIERS.items()
    for kind in KINDS
}


# Derived daily tiers (app/storage/tiers.py `derive`): the daily rows regrouped without the
# dimensions views of months rarely filter by, rebuilt with their days. A year of the daily
# tier's values is 30.7 M rows in the simulated year (docs/performance.md); by model and engine
# 8.9 M, for the whole fleet 0.76 M. `bad` (values only): the weight of requests not ok, which
# the dropped status column held.
DERIVED: dict[str, tuple[str, tuple[str, ...]]] = {
    "daily_all": ("rollup_dall_", ()),
    "daily_me": ("rollup_dme_", ("model", "engine")),
}


def _derived(prefix: str, kind: str, dims: tuple[str, ...]) -> Table:
    kept: list[Column] = [Column("hour", TSZ, nullable=False)]
    if "model" in dims:
        kept.append(Column("model", String, nullable=False))
    if "engine" in dims:
        kept.append(Column("engine", String))
    extra = [Column("bad", Double, nullable=False)] if kind == "values" else []
    return Table(f"{prefix}{kind}", metadata, *kept, *_kind_columns(kind), *extra)


DERIVED_TABLES: dict[tuple[str, str], Table] = {
    (tier, kind): _derived(prefix, kind, dims)
    for tier, (prefix, dims) in DERIVED.items()
    for kind in KINDS
}

# When each day's derived rows were last built from its daily rows: a day whose hours were
# rebuilt later (rollup_hours.built_at) is read from the daily tier until it is derived again.
rollup_derived = Table(
    "rollup_derived",
    metadata,
    Column("day", TSZ, primary_key=True),
    Column("built_at", TSZ, nullable=False),
)

rollup_shapes = ROLLUP_TABLES["hourly", "shapes"]
rollup_values = ROLLUP_TABLES["hourly", "values"]
rollup_gaps = ROLLUP_TABLES["hourly", "gaps"]
rollup_ttft = ROLLUP_TABLES["hourly", "ttft"]

rollup_dirty = Table(
    "rollup_dirty",
    metadata,
    Column("hour", TSZ, nullable=False),
    Column("marked_at", TSZ, nullable=False),
)

# One row per UTC hour the rollups hold: where its rows came from, the day (of the daily
# tier) it belongs to, and which tiers still hold it (each prunes by its own retention).
rollup_hours = Table(
    "rollup_hours",
    metadata,
    Column("hour", TSZ, primary_key=True),
    Column("day", TSZ, nullable=False),  # start of its local day in the tz it was built in
    # raw: rebuilt from raw rows; sealed: raw rows pruned, the rollups are the record;
    # lake: imported (tokenshape never rebuilds it).
    Column("source", String, nullable=False),
    Column("origin", String),  # lake: the import's name (a path, a pushing node)
    Column("in_full", Boolean, nullable=False),
    Column("in_nt", Boolean, nullable=False),
    Column("in_day", Boolean, nullable=False),
    Column("built_at", TSZ, nullable=False),
)

# The requests one stored row stands for: 1/p of its sample rate (NULL means kept for sure).
# The one expression every count, sum and quantile weighs rows by (app/analytics/filters.py
# serves it to the analytics); a constant, never user input.
WEIGHT = "(1.0 / coalesce(sample_rate, 1.0))"

# Column order of `requests` as the writer inserts it; the ingest side builds Arrow tables in it.
REQUEST_COLUMNS: tuple[str, ...] = tuple(c.name for c in requests.columns)

# The gateway name the Azure LLM inference trace is imported under (its rows carry CC-BY).
AZURE_GATEWAY = "azure-llm-inference-2023"

# The canonical record's bounds, shared by every ingest path and the API's time checks.
MAX_TOKENS = 10_000_000  # most tokens one request may count
EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)  # no started_at before this
FUTURE_SLACK = timedelta(days=1)  # nor more than this after it was received


def _arrow_type(column: Column) -> pa.DataType:
    kind = column.type
    if isinstance(kind, ARRAY):
        return pa.list_(pa.float64())
    if isinstance(kind, DateTime):
        return pa.timestamp("us", tz="UTC")
    if isinstance(kind, Double):
        return pa.float64()
    if isinstance(kind, Boolean):
        return pa.bool_()
    if isinstance(kind, Integer):
        return pa.int32()
    return pa.string()


def arrow_schema(table: Table) -> pa.Schema:
    """The Arrow schema that matches a table column for column, so inserts need no casts."""
    return pa.schema([(c.name, _arrow_type(c)) for c in table.columns])


REQUESTS_SCHEMA = arrow_schema(requests)
REJECTS_SCHEMA = arrow_schema(rejects)


def conform_requests(rows: pa.Table) -> pa.Table:
    """`rows` with the columns of REQUESTS_SCHEMA, those it lacks as nulls (a journal segment
    written by an older release, before `sample_rate`)."""
    missing = [f for f in REQUESTS_SCHEMA if f.name not in rows.column_names]
    for f in missing:
        rows = rows.append_column(f, pa.nulls(rows.num_rows, f.type))
    return rows
