"""Rollups computed elsewhere imported into the rollup tiers, and this node's own rollups
exported in the same layout (for `tokenshape lake push`).

The layout, as app/lake/job.py (Apache Spark over a data lake) writes it under its --output:

    ROOT/hourly/_manifest.json
    ROOT/hourly/{shapes,values,gaps,ttft}/day=YYYY-MM-DD/*.parquet   columns of rollup_*
    ROOT/daily/_manifest.json
    ROOT/daily/{shapes,values,gaps,ttft}/day=YYYY-MM-DD/*.parquet    columns of rollup_day_*

Each tier's manifest holds its schema version, the bucket constants the rows were binned with,
the time zone of the daily tier's days, the rows per table, and per partition the UTC hours it
covers ([from, to)). Either tier may be missing.

An import replaces, in each hour the hourly tier covers, the full-grain rows of the gateways
the import holds (so nodes that push different gateways for the same hour coexist, and
importing the same rows again changes nothing); the hours above are kept in step
(app/storage/tiers.py) and the hours are recorded as coming from the lake, which the rebuild
and the dirty-hour logic leave alone. Days the import holds only daily rows for (older than
the lake's hourly retention) go straight into the daily tier. One transaction per batch of
hours, so memory stays bounded and a failed batch leaves the earlier ones whole.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb
from sqlalchemy import DateTime, Double, Integer, String

from app.storage import tiers
from app.storage.rollups import (
    BUCKET_LIMIT,
    GAMMA,
    HALF_OCTAVE_EDGES,
    MEASURES,
    POSITION_EDGES,
    ZERO_BUCKET,
)
from app.storage.rows import first_row, rollback
from app.storage.schema import KINDS, ROLLUP_TABLES

MANIFEST = "_manifest.json"
SCHEMA_VERSION = 1
MANIFEST_KIND = "tokenshape-lake-rollups"
LAYOUT_TIERS = ("hourly", "daily")  # the layout's folders, named as the tiers they feed
BATCH_HOURS = 24  # hours per import transaction (whole days of this node's zone)
BATCH_DAYS = 31  # days per transaction of daily-only rows
CONFLICT_RETRIES = 3
HOUR = timedelta(hours=1)
MAX_SPAN = timedelta(hours=25)  # a partition is one day: at most 25 hours (DST)
# The constants of the buckets, by the names the manifests give them.
CONSTANTS: dict[str, Any] = {
    "gamma": GAMMA,
    "zero_bucket": ZERO_BUCKET,
    "bucket_limit": BUCKET_LIMIT,
    "half_octave_edges": list(HALF_OCTAVE_EDGES),
    "position_edges": list(POSITION_EDGES),
    "measures": list(MEASURES),
}
CONSTANT_NAMES = {
    "gamma": "GAMMA",
    "zero_bucket": "ZERO_BUCKET",
    "bucket_limit": "BUCKET_LIMIT",
    "half_octave_edges": "HALF_OCTAVE_EDGES",
    "position_edges": "POSITION_EDGES",
    "measures": "MEASURES",
}
REMOTE = ("s3://", "s3a://", "gs://", "gcs://", "https://", "http://")
# Parquet types DuckDB reads that hold each kind of rollup column exactly.
_TYPES = {
    "time": {"TIMESTAMP WITH TIME ZONE", "TIMESTAMP"},
    "integer": {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT", "UINTEGER"},
    "double": {"DOUBLE"},
    "text": {"VARCHAR"},
}
_WANTED = {
    "time": "TIMESTAMP (microseconds, UTC; not INT96 or nanoseconds)",
    "integer": "an integer",
    "double": "DOUBLE (not FLOAT: sums must stay exact)",
    "text": "a string",
}
# Value ranges of the bins: what tokenshape's own bucketing can produce.
_RANGES: dict[str, tuple[str, str]] = {
    "b": (
        f"b = {ZERO_BUCKET} OR b BETWEEN {-BUCKET_LIMIT} AND {BUCKET_LIMIT}",
        f"{ZERO_BUCKET} (zero) or {-BUCKET_LIMIT}..{BUCKET_LIMIT}",
    ),
    "ib": (f"ib BETWEEN 0 AND {len(HALF_OCTAVE_EDGES) - 1}", f"0..{len(HALF_OCTAVE_EDGES) - 1}"),
    "ob": (f"ob BETWEEN 0 AND {len(HALF_OCTAVE_EDGES) - 1}", f"0..{len(HALF_OCTAVE_EDGES) - 1}"),
    "pb": (f"pb BETWEEN 0 AND {len(POSITION_EDGES) - 1}", f"0..{len(POSITION_EDGES) - 1}"),
    "measure": (f"measure BETWEEN 0 AND {len(MEASURES) - 1}", f"0..{len(MEASURES) - 1}"),
    "n": ("n >= 1", "1 or more"),
}


class LakeError(ValueError):
    """An import that cannot be used as it is: the message names what and what to do."""


class LakeUnreadable(LakeError):
    """A file of the import cannot be read at all (not Parquet, a manifest not JSON)."""


class LakeBusy(RuntimeError):
    """A concurrent write kept conflicting with the import: nothing of the batch was kept."""


@dataclass(frozen=True)
class TierManifest:
    """What one tier's _manifest.json says: its zone, the hours it covers and its rows."""

    tier: str
    tz: str
    hours: list[datetime]  # UTC hours covered, sorted
    rows: dict[str, int]  # rows per table, when the manifest counts them


@dataclass(frozen=True)
class Part:
    """The Parquet files of one table of one tier, as checked."""

    tier: str
    kind: str
    files: list[str]
    hour: str  # SQL giving a row's UTC hour as TIMESTAMPTZ (a naive TIMESTAMP is UTC)
    rows: int
    gateways: list[str]

    def relation(self) -> str:
        """A subquery of the files' rows in the table's columns (binds the file list)."""
        cols = ", ".join(
            f"{self.hour} AS hour" if c == "hour" else f'"{c}"'
            for c in tiers.columns(self.tier, self.kind)
        )
        return (
            f"(SELECT {cols} FROM read_parquet(?::VARCHAR[], hive_partitioning = false, "
            "union_by_name = true))"
        )


@dataclass
class Layout:
    """A checked import: the tiers' manifests and the files of every table."""

    root: str
    manifests: dict[str, TierManifest]
    parts: dict[tuple[str, str], Part]

    @property
    def gateways(self) -> list[str]:
        """Every gateway the import holds rows of."""
        return sorted({g for p in self.parts.values() for g in p.gateways})

    def files(self, tier: str, kind: str) -> list[str]:
        """The table's files (empty when the import has none)."""
        part = self.parts.get((tier, kind))
        return part.files if part else []


@dataclass
class ImportResult:
    """What an import wrote: rows per table, hours at hourly grain, days from daily rows only,
    and what it had to leave out (with why)."""

    origin: str | None
    gateways: list[str]
    rows: dict[str, int] = field(default_factory=dict)
    hours: int = 0
    days: int = 0
    skipped_hours: int = 0
    skipped_days: int = 0
    notes: list[str] = field(default_factory=list)


# --- reading and checking ---------------------------------------------------------------------


def is_remote(root: str) -> bool:
    """Whether a path names object storage or a web server (read through httpfs)."""
    return root.lower().startswith(REMOTE)


def _join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts])


def _normal_root(root: str) -> str:
    # Spark's Hadoop scheme for S3; DuckDB's httpfs names the same objects s3://.
    return "s3://" + root[len("s3a://") :] if root.lower().startswith("s3a://") else root


def use_remote(con: duckdb.DuckDBPyConnection, root: str) -> None:
    """Load DuckDB's httpfs for a remote path, only if it is installed: this never downloads
    an extension (DuckDB would try to, and hang or fail, on a machine without network)."""
    installed = {
        r[0]: r[1]
        for r in con.execute(
            "SELECT extension_name, installed FROM duckdb_extensions() "
            "WHERE extension_name IN ('httpfs', 'aws')"
        ).fetchall()
    }
    if not installed.get("httpfs"):
        platform = first_row(con, "PRAGMA platform")
        where = f"~/.duckdb/extensions/v{duckdb.__version__}/{platform[0] if platform else '?'}/"
        raise LakeError(
            f"reading {root} needs DuckDB's httpfs extension, which is not installed here "
            "(tokenshape never downloads extensions). On a machine with network, run "
            '`duckdb -c "INSTALL httpfs"` as the user tokenshape runs as (or, in Python, '
            "duckdb.connect().install_extension('httpfs')); without network, copy "
            f"httpfs.duckdb_extension for DuckDB {duckdb.__version__} into {where} or run "
            "`INSTALL '/path/to/httpfs.duckdb_extension'`. Credentials come from the usual "
            "AWS/GCS environment: with DuckDB's aws extension installed too, s3:// paths use "
            "CREATE SECRET (TYPE s3, PROVIDER credential_chain) (AWS_* variables, ~/.aws, "
            "instance roles); otherwise create a persistent DuckDB secret (CREATE PERSISTENT "
            "SECRET (TYPE s3 | gcs, KEY_ID …, SECRET …)). Or copy the folder here and import "
            "the local copy"
        )
    con.execute("LOAD httpfs")
    if root.lower().startswith("s3://") and installed.get("aws"):
        con.execute("LOAD aws")
        con.execute(
            "CREATE OR REPLACE TEMPORARY SECRET tokenshape_lake_s3 "
            "(TYPE s3, PROVIDER credential_chain)"
        )


def _read_text(con: duckdb.DuckDBPyConnection, path: str) -> str | None:
    """A small file's text, or None when it does not exist (local or remote)."""
    if not is_remote(path):
        p = Path(path)
        return p.read_text(encoding="utf-8", errors="replace") if p.is_file() else None
    try:
        row = first_row(con, "SELECT content FROM read_text(?)", [path])
    except duckdb.IOException as exc:
        if "no files found" in str(exc).lower() or "not found" in str(exc).lower():
            return None
        raise LakeError(f"could not read {path}: {exc}") from None
    return row[0] if row else None


def _hour_of(value: Any, where: str) -> datetime:
    """An ISO 8601 time from a manifest as a whole UTC hour (no zone: UTC)."""
    try:
        t = datetime.fromisoformat(str(value))
    except ValueError:
        raise LakeError(f"{where}: {value!r} is not an ISO 8601 time") from None
    t = t.replace(tzinfo=UTC) if t.tzinfo is None else t.astimezone(UTC)
    if t.minute or t.second or t.microsecond:
        raise LakeError(f"{where}: {value} is not a whole UTC hour (rollups are whole hours)")
    return t


def _check_constants(found: Any, where: str) -> None:
    if not isinstance(found, dict):
        raise LakeError(
            f"{where} has no bucket constants: it was not written by tokenshape's lake job "
            "(`tokenshape lake rollup`)"
        )
    given = {str(k).lower(): v for k, v in found.items()}
    for key, ours in CONSTANTS.items():
        name = CONSTANT_NAMES[key]
        if key not in given:
            raise LakeError(f"{where} lacks the bucket constant {name} ({key})")
        theirs = given[key]
        same = theirs == ours if not isinstance(ours, list) else list(theirs or []) == ours
        if not same:
            raise LakeError(
                f"{where}: the bucket constant {name} is {json.dumps(theirs)}, tokenshape's is "
                f"{json.dumps(ours)}: these rollups were binned differently and cannot be "
                "merged with this node's; compute them again with this tokenshape's "
                "`tokenshape lake rollup` (or the spec `tokenshape lake spec` writes)"
            )


def read_manifest(con: duckdb.DuckDBPyConnection, root: str, tier: str) -> TierManifest | None:
    """The tier's manifest, checked (None when the tier has none)."""
    path = _join(root, tier, MANIFEST)
    text = _read_text(con, path)
    if text is None:
        return None
    where = f"{tier}/{MANIFEST}"
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise LakeUnreadable(
            f"{where} is not JSON ({exc}); write it again with the lake job"
        ) from None
    if not isinstance(data, dict):
        raise LakeError(f"{where} is not a JSON object")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise LakeError(
            f"{where} has schema_version {json.dumps(version)}; this tokenshape reads version "
            f"{SCHEMA_VERSION}: compute the rollups with the lake job of the same tokenshape"
        )
    if data.get("tier", tier) != tier:
        raise LakeError(f"{where} describes the {data.get('tier')!r} tier, not {tier!r}")
    _check_constants(data.get("constants"), where)
    tz = data.get("tz") or "UTC"
    try:
        ZoneInfo(str(tz))
    except (ZoneInfoNotFoundError, ValueError):
        raise LakeError(f"{where}: {tz!r} is not an IANA time zone") from None
    partitions = data.get("partitions")
    if not isinstance(partitions, dict):
        raise LakeError(f"{where} lists no partitions (the hours it covers)")
    hours: set[datetime] = set()
    for day, part in partitions.items():
        if not isinstance(part, dict):
            raise LakeError(f"{where}: partition {day!r} is not an object")
        lo = _hour_of(part.get("from"), f"{where}, partition {day} 'from'")
        hi = _hour_of(part.get("to"), f"{where}, partition {day} 'to'")
        if not lo < hi <= lo + MAX_SPAN:
            raise LakeError(
                f"{where}, partition {day}: 'to' must follow 'from' by at most 25 hours (a day)"
            )
        h = lo
        while h < hi:
            hours.add(h)
            h += HOUR
    rows = data.get("rows") or {}
    counts = {k: int(v) for k, v in rows.items() if k in KINDS and isinstance(v, int)}
    return TierManifest(tier, str(tz), sorted(hours), counts)


def _files(con: duckdb.DuckDBPyConnection, root: str, tier: str, kind: str) -> list[str]:
    """The table's Parquet files under day=… folders; hidden and underscore entries (Spark's
    _SUCCESS, _temporary, .crc) are not data, as Spark itself reads them."""
    pattern = _join(root, tier, kind, "**", "*.parquet")
    if not is_remote(root):
        base = Path(root, tier, kind)
        found = sorted(str(p) for p in base.rglob("*.parquet")) if base.is_dir() else []
    else:
        try:
            found = sorted(
                r[0] for r in con.execute("SELECT file FROM glob(?)", [pattern]).fetchall()
            )
        except duckdb.Error as exc:
            raise LakeError(
                f"could not list {pattern} ({exc}); an https:// server cannot be listed: "
                "import from s3:// or gs://, or from a local copy of the folder"
            ) from None
    prefix = _join(root, tier, kind) + "/"
    out = []
    for f in found:
        rel = f[len(prefix) :] if f.startswith(prefix) else f.rsplit(f"/{kind}/", 1)[-1]
        if any(p.startswith(("_", ".")) for p in rel.split("/")):
            continue
        out.append(f)
    return out


def _class(column) -> str:
    kind = column.type
    if isinstance(kind, DateTime):
        return "time"
    if isinstance(kind, Double):
        return "double"
    if isinstance(kind, Integer):
        return "integer"
    if isinstance(kind, String):
        return "text"
    raise TypeError(f"no import type for {column}")


def _describe(con: duckdb.DuckDBPyConnection, where: str, files: list[str]) -> dict[str, str]:
    """The files' columns and types; a file that is not Parquet is named."""
    try:
        rows = con.execute(
            "DESCRIBE SELECT * FROM read_parquet(?::VARCHAR[], hive_partitioning = false, "
            "union_by_name = true)",
            [files],
        ).fetchall()
    except duckdb.Error as exc:
        for f in files:  # which one: the message names the file to look at
            try:
                con.execute("SELECT * FROM parquet_schema(?)", [f]).fetchall()
            except duckdb.Error as one:
                raise LakeUnreadable(
                    f"{where}: {f} is not a Parquet file DuckDB can read ({one}); write it "
                    "again (the lake job writes Parquet with zstd)"
                ) from None
        raise LakeUnreadable(f"{where}: the files cannot be read together ({exc})") from None
    return {r[0]: r[1] for r in rows}


def days_of(con: duckdb.DuckDBPyConnection, manifest: TierManifest) -> dict[datetime, list]:
    """The days (start instants in the manifest's zone) its hours fall in, with those hours."""
    rows = con.execute(
        "SELECT timezone(?, date_trunc('day', timezone(?, h))) AS d, list(h ORDER BY h) "
        "FROM unnest(?::TIMESTAMPTZ[]) AS t(h) GROUP BY d ORDER BY d",
        [manifest.tz, manifest.tz, manifest.hours],
    ).fetchall()
    return {d: hs for d, hs in rows}


def _check_part(
    con: duckdb.DuckDBPyConnection, tier: str, kind: str, files: list[str], manifest: TierManifest
) -> Part:
    """Columns, types and values of one table's files against tokenshape's table."""
    where = f"{tier}/{kind}"
    found = _describe(con, where, files)
    table = ROLLUP_TABLES[tier, kind]
    for column in table.columns:
        wanted = _class(column)
        if column.name not in found:
            raise LakeError(
                f"{where}: the files have no column {column.name!r} (they have "
                f"{', '.join(found)}); write the columns of tokenshape's {table.name}"
            )
        if found[column.name] not in _TYPES[wanted]:
            raise LakeError(
                f"{where}: column {column.name!r} is {found[column.name]}; write it as "
                f"{_WANTED[wanted]}"
            )
    hour = "hour" if found["hour"] == "TIMESTAMP WITH TIME ZONE" else "timezone('UTC', hour)"
    part = Part(tier, kind, files, hour, 0, [])
    checks: list[tuple[str, str]] = []  # (condition of a bad row, what is wrong with it)
    for column in table.columns:
        if not column.nullable:
            checks.append((f'"{column.name}" IS NULL', f"have no {column.name}"))
    for name, (ok, words) in _RANGES.items():
        if any(c.name == name for c in table.columns):
            checks.append((f"NOT ({ok})", f"have {name} outside {words}"))
    checks.append(("epoch_us(hour) % 3600000000 <> 0", "have an hour that is not a whole UTC hour"))
    bad_sql = ", ".join(
        f"count(*) FILTER (WHERE {cond}), min(hour) FILTER (WHERE {cond})" for cond, _ in checks
    )
    row = first_row(
        con,
        f"SELECT count(*), list(DISTINCT gateway), list(DISTINCT hour), {bad_sql} "
        f"FROM {part.relation()}",
        [files],
    )
    assert row is not None
    for i, (_, words) in enumerate(checks):
        bad, example = row[3 + 2 * i], row[4 + 2 * i]
        if bad:
            at = f" (the first at {example:%Y-%m-%d %H:%M:%S%z})" if example else ""
            raise LakeError(f"{where}: {bad:,} rows {words}{at}")
    # On the distinct hours, not per row: a year of a big fleet is billions of rows.
    hours = sorted(h for h in (row[2] or []) if h is not None)
    if tier == "daily" and hours:
        odd = first_row(
            con,
            "SELECT min(h) FROM unnest(?::TIMESTAMPTZ[]) AS t(h) "
            "WHERE h <> timezone(?, date_trunc('day', timezone(?, h)))",
            [hours, manifest.tz, manifest.tz],
        )
        if odd and odd[0] is not None:
            raise LakeError(
                f"{where}: the row of {odd[0]:%Y-%m-%d %H:%M%z} is not the start of a day in "
                f"{manifest.tz} (the manifest's tz): a daily row's hour is its day's start"
            )
    covered = set(manifest.hours) if tier == "hourly" else set(days_of(con, manifest))
    outside = sorted(set(hours) - covered)
    if outside:
        raise LakeError(
            f"{where}: rows of {len(outside)} {'hours' if tier == 'hourly' else 'days'} lie "
            f"outside what the manifest covers (the first {outside[0]:%Y-%m-%d %H:%M%z}): the "
            "manifest does not describe these files; copy the folder again"
        )
    rows = int(row[0])
    expected = manifest.rows.get(kind)
    if expected is not None and expected != rows:
        raise LakeError(
            f"{where}: the manifest counts {expected:,} rows, the files hold {rows:,}: the "
            "copy is incomplete or mixes runs; copy the whole folder again"
        )
    gateways = sorted(g for g in (row[1] or []) if g is not None)
    return Part(tier, kind, files, hour, rows, gateways)


def check(con: duckdb.DuckDBPyConnection, root: str) -> Layout:
    """Read and check an import's manifests and files (nothing is written)."""
    root = _normal_root(str(root))
    if is_remote(root):
        use_remote(con, root)
    elif not Path(root).is_dir():
        raise LakeError(f"{root} is not a folder: give the lake job's --output folder")
    manifests: dict[str, TierManifest] = {}
    parts: dict[tuple[str, str], Part] = {}
    for tier in LAYOUT_TIERS:
        files = {kind: _files(con, root, tier, kind) for kind in KINDS}
        manifest = read_manifest(con, root, tier)
        if manifest is None:
            if any(files.values()):
                raise LakeError(
                    f"{tier}/ holds Parquet files but no {MANIFEST}: copy the manifest the "
                    "lake job wrote beside them (it says which hours the files cover)"
                )
            continue
        manifests[tier] = manifest
        for kind, found in files.items():
            if found:
                parts[tier, kind] = _check_part(con, tier, kind, found, manifest)
            elif manifest.rows.get(kind):
                raise LakeError(
                    f"{tier}/{kind}: the manifest counts {manifest.rows[kind]:,} rows but "
                    "there are no Parquet files: copy the whole folder"
                )
    if not manifests:
        raise LakeError(
            f"{root} holds no hourly/{MANIFEST} or daily/{MANIFEST}: give the folder the "
            "lake job wrote (its --output), with both tiers' folders in it"
        )
    return Layout(root, manifests, parts)


# --- importing --------------------------------------------------------------------------------


def _regroup(tier: str, kind: str, time: str = "hour") -> str:
    """SELECT list regrouping rows into `tier`'s columns (GROUP BY ALL): sums, maxima."""
    out = []
    for c in tiers.columns(tier, kind):
        if c == "hour":
            out.append(f"{time} AS hour")
        elif c in tiers.DIMS or c in tiers.KEYS[kind]:
            out.append(f'"{c}"')
        elif c in tiers.MAXIMA:
            out.append(f'max("{c}") AS "{c}"')
        else:
            out.append(f'sum("{c}") AS "{c}"')
    return ", ".join(out)


def _transaction(con: duckdb.DuckDBPyConnection, work: Callable[[], None]) -> None:
    """Run `work` in one transaction, again when a concurrent write conflicts with it."""
    for attempt in range(CONFLICT_RETRIES):
        try:
            con.execute("BEGIN TRANSACTION")
            work()
            con.execute("COMMIT")
            return
        except duckdb.TransactionException as exc:
            rollback(con)
            if attempt == CONFLICT_RETRIES - 1:
                raise LakeBusy(
                    f"a concurrent write kept conflicting with the import ({exc}); nothing of "
                    "this batch was kept: try again"
                ) from None
            time.sleep(0.05 * 2**attempt)
        except BaseException:
            rollback(con)
            raise


def _day_batches(
    con: duckdb.DuckDBPyConnection, hours: list[datetime], tz: str, size: int
) -> list[list[datetime]]:
    """`hours` in batches of whole days (this node's: a known hour keeps its day, a new one
    takes its local day in `tz`), at least `size` hours each but the last."""
    rows = con.execute(
        "SELECT t.h, coalesce(r.day, timezone(?, date_trunc('day', timezone(?, t.h)))) AS d "
        "FROM unnest(?::TIMESTAMPTZ[]) AS t(h) LEFT JOIN rollup_hours r ON r.hour = t.h "
        "ORDER BY d, t.h",
        [tz, tz, hours],
    ).fetchall()
    batches: list[list[datetime]] = []
    current: list[datetime] = []
    last_day = None
    for h, d in rows:
        if d != last_day and len(current) >= size:
            batches.append(current)
            current = []
        current.append(h)
        last_day = d
    if current:
        batches.append(current)
    return batches


def _import_hours(
    con: duckdb.DuckDBPyConnection,
    layout: Layout,
    batch: list[datetime],
    tz: str,
    origin: str | None,
    result: ImportResult,
) -> None:
    """One batch (whole days) of hours at hourly grain, inside the caller's transaction."""
    gateways = layout.gateways
    state = con.execute(
        "SELECT t.h, r.day, r.hour IS NOT NULL, coalesce(r.in_full, false), "
        "coalesce(r.in_nt, false), coalesce(r.in_day, false) "
        "FROM unnest(?::TIMESTAMPTZ[]) AS t(h) LEFT JOIN rollup_hours r ON r.hour = t.h",
        [batch],
    ).fetchall()
    # An hour held without tenant but no longer at full grain: its other gateways' rows are
    # only in the tiers above, so its full-grain rows cannot be replaced for some gateways.
    old = {h for h, _, known, full, nt, _d in state if known and not full and nt}
    # Hours only the daily tier holds (an earlier import of daily rows, or pruned here): their
    # share of the day is not known by the hour, so their day's rows of the import's gateways
    # are rebuilt whole, which needs every such hour of the day in this import.
    day_only = {
        h: d for h, d, known, full, nt, in_day in state if known and not (full or nt) and in_day
    }
    resets: list[datetime] = []
    if day_only:
        batch_set = set(batch)
        for day, held in con.execute(
            "SELECT day, list(hour) FROM rollup_hours WHERE NOT in_full AND NOT in_nt AND in_day "
            "AND list_contains(?, day) GROUP BY day",
            [sorted(set(day_only.values()))],
        ).fetchall():
            if set(held) <= batch_set:
                resets.append(day)
            else:
                old |= {h for h, d in day_only.items() if d == day}
    hours = [h for h in batch if h not in old]
    if old:
        result.skipped_hours += len(old)
        result.notes.append(
            f"{len(old)} hours from {min(old):%Y-%m-%d %H:00} UTC were left as they are: this "
            "node keeps them only without tenant or as whole days, so their rows cannot be "
            "replaced for the import's gateways alone"
        )
    if not hours:
        return
    tiers.begin_replace(con, hours)
    for day_kind in KINDS if resets else ():
        target = tiers.table("daily", day_kind)
        con.execute(
            f"DELETE FROM {target} WHERE list_contains(?, hour) AND list_contains(?, gateway)",
            [resets, gateways],
        )
        # What the day keeps of the import's gateways: its hours held without tenant that
        # this batch does not replace (end_replace adds the replaced ones).
        con.execute(
            f"INSERT INTO {target} SELECT {_regroup('daily', day_kind, 'r.day')} "
            f"FROM {tiers.table('hourly_nt', day_kind)} t JOIN rollup_hours r ON r.hour = t.hour "
            "WHERE list_contains(?, r.day) AND r.in_nt AND NOT list_contains(?, t.hour) "
            "AND list_contains(?, t.gateway) GROUP BY ALL",
            [resets, hours, gateways],
        )
    lo, hi = min(hours), max(hours) + HOUR
    for kind in KINDS:
        target = tiers.table("hourly", kind)
        con.execute(
            f"DELETE FROM {target} WHERE list_contains(?, hour) AND list_contains(?, gateway)",
            [hours, gateways],
        )
        files = layout.files("hourly", kind)
        if not files:
            continue
        part = layout.parts["hourly", kind]
        row = first_row(
            con,
            f"INSERT INTO {target} SELECT {_regroup('hourly', kind)} FROM {part.relation()} "
            "WHERE hour >= ? AND hour < ? AND list_contains(?, hour) GROUP BY ALL",
            [files, lo, hi, hours],
        )
        result.rows[target] = result.rows.get(target, 0) + int(row[0] if row else 0)
    tiers.note_hours(con, hours, "lake", tz, origin=origin)
    tiers.end_replace(con, hours)
    con.execute("DELETE FROM rollup_dirty WHERE list_contains(?, hour)", [hours])
    result.hours += len(hours)


def _days_only(
    con: duckdb.DuckDBPyConnection, layout: Layout, hourly: set[datetime]
) -> dict[datetime, list[datetime]]:
    """The daily tier's days (start instants) that hold no hour of the hourly tier, with the
    hours the manifest says each covers."""
    manifest = layout.manifests.get("daily")
    if manifest is None or not manifest.hours:
        return {}
    return {d: hs for d, hs in days_of(con, manifest).items() if not hourly.intersection(hs)}


def _import_days(
    con: duckdb.DuckDBPyConnection,
    layout: Layout,
    days: dict[datetime, list[datetime]],
    origin: str | None,
    result: ImportResult,
) -> None:
    """One batch of days from daily rows only, inside the caller's transaction.

    Daily rows cannot be split into hours, so their hours are recorded as held by the daily
    tier alone (in_full and in_nt false, in_day true, source 'lake'): the analytics then answer
    a whole day from its row (they need every hour of the day recorded, hence the manifest's
    hours), say which hours a window cutting the day could not count instead of reading
    empty hourly rows as no traffic, retention prunes the day with the daily tier, and
    rebuilds leave it alone. A day this node holds at hourly grain keeps those rows: its
    daily row is built from them, and the import's row for it is not used."""
    gateways = layout.gateways
    hours = [h for hs in days.values() for h in hs]
    held = con.execute(
        "SELECT hour, day, in_full OR in_nt FROM rollup_hours WHERE list_contains(?, hour)",
        [hours],
    ).fetchall()
    finer = {h: (d, fine) for h, d, fine in held}
    take: dict[datetime, list[datetime]] = {}
    for day, hs in days.items():
        if any(finer[h][1] or finer[h][0] != day for h in hs if h in finer):
            result.skipped_days += 1
            result.notes.append(
                f"the day starting {day:%Y-%m-%d %H:%M} UTC was left as it is: this node holds "
                "it at hourly grain (or as another zone's day), finer than the import's row"
            )
            continue
        take[day] = hs
    if not take:
        return
    keys = sorted(take)
    for kind in KINDS:
        target = tiers.table("daily", kind)
        files = layout.files("daily", kind)
        incoming = (
            f"SELECT * FROM {layout.parts['daily', kind].relation()} WHERE list_contains(?, hour)"
            if files
            else f"SELECT * FROM {target} WHERE false"
        )
        params: list[Any] = [keys, gateways, *([files, keys] if files else [])]
        # Merged as the tiers merge (sums and maxima) with the rows of other gateways.
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE _lake_day AS SELECT {_regroup('daily', kind)} FROM ("
            f"SELECT * FROM {target} WHERE list_contains(?, hour) "
            "AND NOT list_contains(?, gateway) "
            f"UNION ALL {incoming}) GROUP BY ALL HAVING sum(n) > 0",
            params,
        )
        con.execute(f"DELETE FROM {target} WHERE list_contains(?, hour)", [keys])
        con.execute(f"INSERT INTO {target} SELECT * FROM _lake_day")
        con.execute("DROP TABLE _lake_day")
        if files:
            row = first_row(
                con,
                f"SELECT count(*) FROM {layout.parts['daily', kind].relation()} "
                "WHERE list_contains(?, hour)",
                [files, keys],
            )
            result.rows[target] = result.rows.get(target, 0) + int(row[0] if row else 0)
    day_hours = [h for d in keys for h in take[d]]
    day_of = [d for d in keys for _ in take[d]]
    con.execute(
        "INSERT INTO rollup_hours (hour, day, source, origin, in_full, in_nt, in_day, built_at) "
        "SELECT unnest(?::TIMESTAMPTZ[]), unnest(?::TIMESTAMPTZ[]), 'lake', ?, false, false, "
        "true, get_current_timestamp() "
        "ON CONFLICT (hour) DO UPDATE SET source = 'lake', origin = excluded.origin, "
        "in_day = true, built_at = excluded.built_at",
        [day_hours, day_of, origin],
    )
    con.execute("DELETE FROM rollup_dirty WHERE list_contains(?, hour)", [day_hours])
    tiers.derive(con, keys)
    result.days += len(keys)


def import_layout(
    con: duckdb.DuckDBPyConnection,
    root: str | Path,
    *,
    tz: str,
    origin: str | None = None,
    batch_hours: int = BATCH_HOURS,
    progress: Callable[[int], None] | None = None,
) -> ImportResult:
    """Import a checked layout into the tiers (`tz`: this node's zone, the days of its daily
    tier); one transaction per batch of whole days. Raises LakeError before writing anything
    when the layout does not check."""
    layout = check(con, str(root))
    result = ImportResult(origin, layout.gateways)
    if not layout.gateways:
        result.notes.append("the import holds no rows: nothing was changed")
        return result
    hourly = layout.manifests.get("hourly")
    hourly_hours = hourly.hours if hourly is not None else []
    days = _days_only(con, layout, set(hourly_hours))
    daily = layout.manifests.get("daily")
    if days and daily is not None and daily.tz != tz:
        raise LakeError(
            f"the import's daily rows are days of {daily.tz}, this node's days are of {tz} "
            "(TOKENSHAPE_TZ): compute them with --tz "
            f"{tz}, or import only their hourly tier"
        )
    for batch in _day_batches(con, hourly_hours, tz, batch_hours) if hourly_hours else []:
        _transaction(con, functools.partial(_import_hours, con, layout, batch, tz, origin, result))
        if progress:
            progress(len(batch))
    keys = sorted(days)
    for i in range(0, len(keys), BATCH_DAYS):
        chunk = {d: days[d] for d in keys[i : i + BATCH_DAYS]}
        _transaction(con, functools.partial(_import_days, con, layout, chunk, origin, result))
        if progress:
            progress(sum(len(h) for h in chunk.values()))
    return result


# --- exporting (a node's own rollups, for `lake push`) ----------------------------------------


def clean_hours(
    con: duckdb.DuckDBPyConnection,
    since: datetime | None = None,
    built_after: datetime | None = None,
) -> list[tuple[datetime, datetime]]:
    """(hour, built_at) of this node's own clean hours at full grain: rebuilt from raw rows or
    sealed (not imported, not waiting for a rebuild), from `since`, rebuilt after
    `built_after`; oldest first."""
    rows = con.execute(
        "SELECT hour, built_at FROM rollup_hours r WHERE in_full AND source IN ('raw', 'sealed') "
        "AND hour >= coalesce(?, '-infinity'::TIMESTAMPTZ) "
        "AND built_at > coalesce(?, '-infinity'::TIMESTAMPTZ) "
        "AND NOT EXISTS (SELECT 1 FROM rollup_dirty d WHERE d.hour = r.hour) ORDER BY hour",
        [since, built_after],
    ).fetchall()
    return [(r[0], r[1]) for r in rows]


def export_hours(
    con: duckdb.DuckDBPyConnection, out: Path, hours: list[datetime], *, tz: str = "UTC"
) -> dict[str, int]:
    """Write the full-grain rollups of `hours` (contiguous within each UTC day) under `out`
    in the lake layout, with the hourly tier's manifest; returns rows per table."""
    hours = sorted(hours)
    base = out / "hourly"
    base.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    per_day: dict[str, dict[str, int]] = {}
    for kind in KINDS:
        rows = con.execute(
            "SELECT strftime(hour AT TIME ZONE 'UTC', '%Y-%m-%d'), count(*) FROM "
            f"{tiers.table('hourly', kind)} WHERE list_contains(?, hour) GROUP BY 1",
            [hours],
        ).fetchall()
        for day, n in rows:
            per_day.setdefault(day, {}).setdefault(kind, int(n))
        counts[kind] = sum(int(n) for _, n in rows)
        if counts[kind]:
            con.execute(
                f"COPY (SELECT *, strftime(hour AT TIME ZONE 'UTC', '%Y-%m-%d') AS day FROM "
                f"{tiers.table('hourly', kind)} WHERE list_contains(?, hour) ORDER BY hour) "
                "TO ? (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (day))",
                [hours, str(base / kind)],
            )
    partitions: dict[str, dict[str, Any]] = {}
    for h in hours:
        key = h.astimezone(UTC).strftime("%Y-%m-%d")
        p = partitions.setdefault(key, {"from": h, "to": h, "hours": 0})
        if h != p["to"]:  # a partition's hours are [from, to): a gap would claim the hours in it
            raise ValueError(f"the hours of {key} are not contiguous: export each run apart")
        p["to"] = h + HOUR
        p["hours"] += 1
    iso = "%Y-%m-%dT%H:%M:%SZ"
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "kind": MANIFEST_KIND,
        "tier": "hourly",
        "grain": "hour",
        "tz": "UTC",
        "source_tz": tz,
        "partition_column": "day",
        "constants": CONSTANTS,
        "rows": counts,
        "partitions": {
            key: {
                "from": p["from"].astimezone(UTC).strftime(iso),
                "to": p["to"].astimezone(UTC).strftime(iso),
                "hours": p["hours"],
                "hours_in_day": 24,
                "complete": p["hours"] == 24,
                "rows": {k: per_day.get(key, {}).get(k, 0) for k in KINDS},
            }
            for key, p in partitions.items()
        },
    }
    (base / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return {tiers.table("hourly", k): n for k, n in counts.items()}
