"""tokenshape's rollups computed by Apache Spark from request logs in a data lake.

A standalone PySpark job: it imports only pyspark and the standard library, and uses only
Spark SQL expressions (no Python UDFs), so a cluster runs it with nothing of tokenshape on
its executors (or its driver). What it needs of tokenshape (the bucket constants, the exact
bucket edges, the rollup tables' columns and the column mapping) comes in a spec file that
`tokenshape lake spec` writes, or that `tokenshape lake rollup` writes and passes itself:

    spark-submit job.py --spec spec.json --input 's3a://logs/requests/dt=2026-11-*/' \\
        --output s3a://lake/tokenshape/ --from 2026-11-01 --to 2026-11-08 --tz Europe/Paris

Steps: read Parquet or NDJSON; map the columns to the canonical record's fields; check every
row by the canonical record's rules (an invalid row is counted under its first failing
reason, never dropped unseen); keep the first row of each (gateway, request_id) as tokenshape's
store does; keep started_at in [--from, --to); build the four hourly rollups exactly as
tokenshape's rebuild() does (weights 1/sample_rate; value buckets corrected against the exact
edge table, see app/lake/edges.py); regroup them by local day in --tz for the daily tier;
write each table as Parquet partitioned by `day`, and a _manifest.json per tier.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from functools import reduce

from pyspark.errors import AnalysisException, PySparkException
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

SPEC_VERSION = 1
MANIFEST_VERSION = 1
HOUR_US = 3_600_000_000
DIMS = ("model", "engine", "gateway", "tenant", "status")
TABLES = ("shapes", "values", "gaps", "ttft")
TIERS = ("hourly", "daily")
MANIFEST = "_manifest.json"
SUMMARY_MARK = "tokenshape-lake-summary: "  # the summary line `tokenshape lake rollup` reads
_P = "__ts_"  # prefix of the job's own working columns, clear of any source column

# The canonical record's fields and how each is read: its kind, and whether a row needs it.
FIELDS: dict[str, tuple[str, bool]] = {
    "gateway": ("name", True),
    "request_id": ("name", False),
    "started_at": ("time", False),
    "received_at": ("time", False),
    "model": ("name", True),
    "engine": ("name", False),
    "tenant": ("name", False),
    "isl": ("count", True),
    "osl": ("count", True),
    "tokens_estimated": ("flag", False),
    "ttft_ms": ("millis", False),
    "e2e_ms": ("millis", False),
    "itl_ms": ("millis", False),
    "queue_ms": ("millis", False),
    "token_gaps_ms": ("gaps", False),
    "status": ("status", False),
    "error_type": ("name", False),
    "stream": ("flag", False),
    "cached_tokens": ("count", False),
    "sample_rate": ("probability", False),
}
UNITS = {"ms": 1.0, "s": 1000.0, "us": 1e-3, "ns": 1e-6}
TIME_FORMATS = ("auto", "iso", "timestamp", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns")
# Epoch numbers to microseconds: the factor per unit (auto: by magnitude, as tokenshape does).
_EPOCH_SCALE = {"epoch_s": 1e6, "epoch_ms": 1e3, "epoch_us": 1.0, "epoch_ns": 1e-3}
_ZONED = re.compile(r"(Z|[+-]\d\d(:?\d\d)?)$", re.IGNORECASE)


class MappingError(ValueError):
    """The column mapping does not fit the input: names the field and what is wrong."""


class SpecError(ValueError):
    """The spec file or an option is not usable: says which and why."""


# --- the spec -------------------------------------------------------------------------------


def load_spec(text: str) -> dict:
    """The spec as a dict, checked for the keys the job reads."""
    try:
        spec = json.loads(text)
    except ValueError as exc:
        raise SpecError(f"the spec is not JSON ({exc})") from None
    if not isinstance(spec, dict) or spec.get("spec_version") != SPEC_VERSION:
        raise SpecError(
            f"the spec must be an object with spec_version {SPEC_VERSION}; write it with "
            "`tokenshape lake spec`"
        )
    for key in ("constants", "edges", "tables", "mapping"):
        if key not in spec:
            raise SpecError(f"the spec has no {key!r}; write it with `tokenshape lake spec`")
    c = spec["constants"]
    if len(spec["edges"]) != 2 * c["bucket_limit"] + 1:
        raise SpecError("the spec's edges do not cover every bucket")
    return spec


# --- reading and mapping ----------------------------------------------------------------------


def read_input(spark: SparkSession, paths: list[str], fmt: str) -> DataFrame:
    """The input rows, with the columns that order them as the files hold them."""
    if fmt == "parquet":
        df = spark.read.parquet(*paths)
    elif fmt == "json":
        df = spark.read.option("mode", "PERMISSIVE").json(paths)
    else:
        raise SpecError(f"--format must be parquet or json, not {fmt!r}")
    # First row of a key wins, as in tokenshape's store: "first" is the files' own order.
    return df.select(
        "*",
        F.input_file_name().alias(f"{_P}file"),
        F.input_file_block_start().alias(f"{_P}block"),
        F.monotonically_increasing_id().alias(f"{_P}row"),
    )


def _explode(df: DataFrame, steps: list[dict]) -> tuple[DataFrame, list[str]]:
    """One row per element of each array named by `explode`, in order; the positions kept
    for the first-row order."""
    order: list[str] = []
    for i, step in enumerate(steps):
        pos = f"{_P}pos{i}"
        try:
            source = F.expr(step["from"])
            df = df.select("*", F.posexplode(source).alias(pos, step["as"]))
        except (AnalysisException, PySparkException) as exc:
            raise MappingError(
                f"explode[{i}] ({step['as']} from {step['from']}): {_first_line(exc)}"
            ) from None
        order.append(pos)
    return df, order


def _let(df: DataFrame, lets: list[dict]) -> DataFrame:
    """The mapping's named expressions as columns, in order (each may use the ones before);
    an optional one that does not resolve against the input is null."""
    for item in lets:
        try:
            value = F.expr(item["expr"])
            df.select(value).schema  # noqa: B018  (analysed now, so an error names it)
        except (AnalysisException, PySparkException) as exc:
            if not item.get("optional"):
                raise MappingError(f"let.{item['as']}: {_first_line(exc)}") from None
            value = F.lit(None)
        df = df.withColumn(item["as"], value)
    return df


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _columns_of(df: DataFrame) -> str:
    names = [f.name for f in df.schema.fields if not f.name.startswith(_P)]
    shown = ", ".join(names[:40]) + (" …" if len(names) > 40 else "")
    return shown or "(none)"


def _missing_column(field: str, what: str, df: DataFrame) -> str:
    return (
        f"columns.{field}: {what} is not in the input (its columns: {_columns_of(df)}); a "
        "nested field is a dotted path (usage.prompt_tokens), a name with dots in it is "
        "quoted with backticks, and `optional: true` reads a column that may be absent as null"
    )


def _first_present(df: DataFrame, field: str, entry: dict) -> tuple[Column, T.DataType | None]:
    """`coalesce:` the first non-null of those columns the input has (JSON logs name only
    the fields some record held, so a column may be absent from one day's files)."""
    present = []
    for path in entry["coalesce"]:
        found = _path_type(df.schema, path)
        if found is _MISSING:
            continue
        if found is None:
            try:
                found = df.select(F.col(path)).schema[0].dataType
            except (AnalysisException, PySparkException):
                continue
        if not isinstance(found, T.NullType):
            present.append(F.col(path))
    if not present:
        if entry.get("optional"):
            return F.lit(None), None
        raise MappingError(
            f"columns.{field}: none of {', '.join(entry['coalesce'])} is in the input (its "
            f"columns: {_columns_of(df)})"
        )
    source = present[0] if len(present) == 1 else F.coalesce(*present)
    try:
        return source, df.select(source.alias("x")).schema["x"].dataType
    except (AnalysisException, PySparkException) as exc:
        raise MappingError(f"columns.{field}: coalesce fails: {_first_line(exc)}") from None


def _resolve(df: DataFrame, field: str, entry: dict) -> tuple[Column, T.DataType | None]:
    """The source of one field as a Column and its type (None: a null constant)."""
    if "const" in entry:
        value = entry["const"]
        return F.lit(value), None if value is None else df.select(F.lit(value)).schema[0].dataType
    if "coalesce" in entry:
        return _first_present(df, field, entry)
    if "column" in entry:
        source, what = F.col(entry["column"]), f"column {entry['column']!r}"
        found = _path_type(df.schema, entry["column"])
        if found is _MISSING:
            if entry.get("optional"):
                return F.lit(None), None
            raise MappingError(_missing_column(field, what, df))
        if found is not None:  # read off the schema: no analysis (a second each, cold)
            return (F.lit(None), None) if isinstance(found, T.NullType) else (source, found)
    else:
        try:
            source, what = F.expr(entry["expr"]), f"expression {entry['expr']!r}"
        except PySparkException as exc:
            raise MappingError(
                f"columns.{field}: expr does not parse: {_first_line(exc)}"
            ) from None
    try:
        kind = df.select(source.alias("x")).schema["x"].dataType
    except (AnalysisException, PySparkException) as exc:
        if entry.get("optional"):
            return F.lit(None), None
        if "column" in entry:
            raise MappingError(_missing_column(field, what, df)) from None
        raise MappingError(f"columns.{field}: {what} fails: {_first_line(exc)}") from None
    if isinstance(kind, T.NullType):
        return F.lit(None), None
    return source, kind


# What _path_type says of a path the schema has no field for (its own instance: compared by
# identity, never equal to a real type of the input).
_MISSING: T.DataType = T.StructType([T.StructField(f"{_P}missing", T.NullType())])


def _path_type(schema: T.StructType, path: str) -> T.DataType | None:
    """The type at a column path (a.b.c, `a.b`.c) through structs, matched as Spark matches
    names (case-insensitively); _MISSING when a struct on the way has no such field, None
    when the walk cannot tell (through an array or a map: Spark's analysis decides)."""
    parts = re.findall(r"`((?:[^`]|``)*)`|([^.`]+)", path)
    if not parts:
        return None
    kind: T.DataType = schema
    for quoted, plain in parts:
        name = quoted.replace("``", "`") if quoted else plain
        if not isinstance(kind, T.StructType):
            return None
        fields = [f for f in kind.fields if f.name == name] or [
            f for f in kind.fields if f.name.lower() == name.lower()
        ]
        if len(fields) != 1:
            return _MISSING if not fields else None
        kind = fields[0].dataType
    return kind


def _numeric(kind: T.DataType | None) -> bool:
    return isinstance(kind, T.NumericType)


def _type_error(field: str, kind: T.DataType, wanted: str, hint: str = "") -> MappingError:
    extra = f"; {hint}" if hint else ""
    return MappingError(
        f"columns.{field}: is {kind.simpleString()}, but {field} takes {wanted}{extra}"
    )


class Checked:
    """The mapped fields as typed columns, and the first failing rule of each row."""

    def __init__(self, constants: dict, received_us: int):
        self.c = constants
        self.received_us = received_us
        self.values: dict[str, Column] = {}
        self.rules: list[tuple[Column, str]] = []  # (row breaks it, reason), in check order

    def rule(self, broken: Column, reason: str) -> None:
        """Add a rule; `broken` is true (not null) for a row that breaks it."""
        self.rules.append((F.coalesce(broken, F.lit(False)), reason))


def _not_finite(v: Column) -> Column:
    return F.isnan(v) | (F.abs(v) == F.lit(float("inf")))


def _name(ck: Checked, field: str, src: Column, kind, required: bool) -> None:
    limit = ck.c["name_max"]
    if kind is not None and not isinstance(kind, T.StringType):
        raise _type_error(field, kind, "text", "use expr: CAST(... AS STRING) to read it as text")
    value = src.cast("string") if kind is not None else F.lit(None).cast("string")
    if required:
        ck.rule(value.isNull(), f"{field}: missing")
    ck.rule(
        value.isNotNull() & ((F.length(value) < 1) | (F.length(value) > limit)),
        f"{field}: must be 1 to {limit} characters",
    )
    ck.values[field] = value


def _count(ck: Checked, field: str, src: Column, kind, required: bool) -> None:
    top = ck.c["max_tokens"]
    if kind is not None and not _numeric(kind):
        raise _type_error(
            field, kind, "a whole number", "use expr: try_cast(... AS BIGINT) for numbers as text"
        )
    if required:
        ck.rule(src.isNull() if kind is not None else F.lit(True), f"{field}: missing")
    if kind is None:
        ck.values[field] = F.lit(None).cast("bigint")
        return
    whole = isinstance(kind, T.IntegralType) or (
        isinstance(kind, T.DecimalType) and kind.scale == 0
    )
    d = src.cast("double")
    if not whole:
        ck.rule(_not_finite(d), f"{field}: must be a finite number")
    ck.rule((d < 0) | (d > top), f"{field}: must be from 0 to {top:,}")
    if not whole:
        ck.rule(d % 1.0 != 0, f"{field}: must be a whole number")
    in_range = (d >= 0) & (d <= top)
    ck.values[field] = F.when(in_range, d.cast("bigint"))


def _millis(ck: Checked, field: str, src: Column, kind, unit: str) -> None:
    if kind is not None and not _numeric(kind):
        raise _type_error(field, kind, "a number", "use expr: try_cast(... AS DOUBLE)")
    if kind is None:
        ck.values[field] = F.lit(None).cast("double")
        return
    v = src.cast("double") * F.lit(UNITS[unit]) if unit != "ms" else src.cast("double")
    ck.rule(_not_finite(v), f"{field}: must be a finite number")
    ck.rule(v < 0, f"{field}: must be 0 or more")
    ck.values[field] = v


def _gaps(ck: Checked, field: str, src: Column, kind, unit: str) -> None:
    if kind is None:
        ck.values[field] = F.lit(None).cast("array<double>")
        return
    if not isinstance(kind, T.ArrayType) or not _numeric(kind.elementType):
        raise _type_error(field, kind, "an array of numbers")
    factor = F.lit(UNITS[unit])
    v = F.transform(src, lambda x: x.cast("double") * factor)
    most = ck.c["max_gaps"]
    ck.rule(F.size(v) > most, f"{field}: more than {most:,} gaps")
    ck.rule(F.exists(v, lambda x: x.isNull()), f"{field}: holds a null")
    ck.rule(F.exists(v, _not_finite), f"{field}: must hold finite numbers")
    ck.rule(F.exists(v, lambda x: x < 0), f"{field}: must hold numbers 0 or more")
    ck.values[field] = v


def _status(ck: Checked, field: str, src: Column, kind) -> None:
    if kind is not None and not isinstance(kind, T.StringType):
        raise _type_error(field, kind, "text (ok, error or cancelled)")
    allowed = ck.c["statuses"]
    value = F.coalesce(src.cast("string"), F.lit("ok")) if kind is not None else F.lit("ok")
    ck.rule(~value.isin(*allowed), f"{field}: must be {', '.join(allowed[:-1])} or {allowed[-1]}")
    ck.values[field] = value


def _flag(ck: Checked, field: str, src: Column, kind) -> None:
    if kind is not None and not isinstance(kind, T.BooleanType):
        raise _type_error(field, kind, "true or false")
    value = src if kind is not None else F.lit(None).cast("boolean")
    if field == "tokens_estimated":
        value = F.coalesce(value, F.lit(False))
    ck.values[field] = value


def _probability(ck: Checked, field: str, src: Column, kind) -> None:
    if kind is not None and not _numeric(kind):
        raise _type_error(field, kind, "a number with 0 < p <= 1")
    if kind is None:
        ck.values[field] = F.lit(None).cast("double")
        return
    p = src.cast("double")
    ck.rule(
        F.isnan(p) | (p < F.lit(ck.c["min_sample_rate"])) | (p > 1),
        f"{field}: must be a probability from 2^-56 to 1",
    )
    ck.values[field] = p


def _micros(field: str, src: Column, kind, fmt: str) -> tuple[Column, Column | None]:
    """(epoch microseconds, the value is there but no time) of a time field."""
    if isinstance(kind, T.TimestampType | T.TimestampNTZType | T.DateType):
        if fmt not in ("auto", "timestamp"):
            raise _type_error(field, kind, f"time: {fmt}", "use time: timestamp (or auto)")
        return F.unix_micros(src.cast("timestamp")), None  # a zoneless one read as UTC
    if fmt == "timestamp":
        raise _type_error(field, kind, "a timestamp column with time: timestamp")
    if isinstance(kind, T.StringType) and fmt in ("auto", "iso"):
        parsed = src.cast("timestamp")  # ANSI is off in the job: unreadable text is null
        return F.unix_micros(parsed), src.isNotNull() & parsed.isNull()
    if fmt == "iso" or not isinstance(kind, T.StringType | T.NumericType):
        raise _type_error(field, kind, f"a time as time: {fmt} reads it")
    # Epoch numbers (or text holding them, with an epoch_* time), as tokenshape reads them:
    # in double, times the unit's scale, rounded half to even (numpy's round).
    v = src.cast("double")
    if fmt == "auto":  # tokenshape's guess by magnitude: s, ms, us or ns
        scale = F.when(v >= 1e17, 1e-3).when(v >= 1e14, 1.0).when(v >= 1e11, 1e3).otherwise(1e6)
    else:
        scale = F.lit(_EPOCH_SCALE[fmt])
    us = F.bround(F.least(F.greatest(v * scale, F.lit(-9e18)), F.lit(9e18)), 0)
    bad = src.isNotNull() & (v.isNull() | _not_finite(v))
    return F.when(~bad, us.cast("bigint")), bad


def map_rows(df: DataFrame, spec: dict, received_us: int) -> tuple[DataFrame, list[str]]:
    """The input as canonical columns (typed) with `__ts_reason`: each row's first broken
    rule, null for a valid one; `__ts_skip` marks rows the mapping's `where` leaves out.
    Also the names of the columns that order rows as the files hold them."""
    mapping = spec["mapping"]
    c = spec["constants"]
    df, order = _explode(df, mapping.get("explode") or [])
    df = _let(df, mapping.get("let") or [])
    where = mapping.get("where")
    skip = F.lit(False)
    if where:
        try:
            cond = F.expr(where)
            df.select(cond).schema  # noqa: B018  (analysed now, so an error names `where`)
        except (AnalysisException, PySparkException) as exc:
            raise MappingError(f"where: {_first_line(exc)}") from None
        skip = ~F.coalesce(cond, F.lit(False))
    columns = mapping.get("columns") or {}
    unknown = sorted(set(columns) - set(FIELDS))
    if unknown:
        raise MappingError(
            f"columns: unknown field {unknown[0]!r}; the fields: {', '.join(FIELDS)}"
        )
    ordering = [f"{_P}file", f"{_P}block", f"{_P}row", *order]
    # Three projections, each over the last one's columns: the sources, then the typed
    # values with one boolean per rule, then the first broken rule. One projection of it all
    # repeats every source expression in every rule that reads it, and the optimizer then
    # spends seconds per query on the copies.
    resolved: dict[str, tuple[dict | None, T.DataType | None]] = {}
    sources: list[Column] = []
    for field, (_, required) in FIELDS.items():
        entry = columns.get(field)
        if entry is None:
            if required:
                raise MappingError(
                    f"columns.{field}: not mapped; give the column (or an expr, or a const)"
                )
            resolved[field] = (None, None)
            continue
        src, kind = _resolve(df, field, entry)
        resolved[field] = (entry, kind)
        if kind is not None:
            sources.append(src.alias(f"{_P}m_{field}"))
    corrupt = "_corrupt_record" in df.columns
    staged = df.select(
        *sources,
        *[F.col(o) for o in ordering],
        skip.alias(f"{_P}skip"),
        *([F.col("_corrupt_record")] if corrupt else []),
    )
    ck = Checked(c, received_us)
    if corrupt:
        ck.rule(F.col("_corrupt_record").isNotNull(), "record: not a JSON object")
    times: dict[str, tuple[Column, Column | None]] = {}
    for field, (kind_name, required) in FIELDS.items():
        entry, kind = resolved[field]
        src = F.col(f"{_P}m_{field}") if kind is not None else F.lit(None)
        unit = (entry or {}).get("unit", "ms")
        if kind_name == "name":
            _name(ck, field, src, kind, required)
        elif kind_name == "count":
            _count(ck, field, src, kind, required)
        elif kind_name == "millis":
            _millis(ck, field, src, kind, unit)
        elif kind_name == "gaps":
            _gaps(ck, field, src, kind, unit)
        elif kind_name == "status":
            _status(ck, field, src, kind)
        elif kind_name == "flag":
            _flag(ck, field, src, kind)
        elif kind_name == "probability":
            _probability(ck, field, src, kind)
        elif kind_name == "time":
            if kind is None:
                times[field] = (F.lit(None).cast("bigint"), None)
            else:
                times[field] = _micros(field, src, kind, (entry or {}).get("time", "auto"))
    # started_at: absent means the time it was received, as in the canonical record.
    received_col, received_bad = times["received_at"]
    received = F.coalesce(received_col, F.lit(received_us))
    started_col, started_bad = times["started_at"]
    started = F.coalesce(started_col, received)
    if received_bad is not None:
        ck.rule(received_bad, "received_at: not a readable time")
    if started_bad is not None:
        ck.rule(started_bad, "started_at: not a readable time")
    earliest = int(datetime.fromisoformat(c["earliest"]).timestamp() * 1_000_000)
    slack = int(c["future_slack_s"] * 1_000_000)
    ck.rule(
        (started < F.lit(earliest)) | (started > received + F.lit(slack)),
        "started_at: outside 2000-01-01 to one day after received_at",
    )
    ttft, e2e = ck.values["ttft_ms"], ck.values["e2e_ms"]
    ck.rule(ttft > e2e, "ttft_ms: exceeds e2e_ms")  # the cross-field rule last, as ingest's
    ck.values["started_us"] = started
    kept = [k for k in ck.values if k not in ("started_at", "received_at")]
    flags = [f"{_P}r{i}" for i in range(len(ck.rules))]
    typed = staged.select(
        *[ck.values[k].alias(k) for k in kept],
        *[broken.alias(flag) for (broken, _), flag in zip(ck.rules, flags, strict=True)],
        *[F.col(o) for o in ordering],
        f"{_P}skip",
    )
    reason = None
    for (_, text), flag in zip(ck.rules, flags, strict=True):  # one flat CASE
        reason = F.when(F.col(flag), text) if reason is None else reason.when(F.col(flag), text)
    checked = typed.select(
        *kept,
        *ordering,
        f"{_P}skip",
        (reason if reason is not None else F.lit(None).cast("string")).alias(f"{_P}reason"),
    )
    return checked, ordering


# --- first row of a key, the window -------------------------------------------------------------

_RECORD = [f for f in FIELDS if f not in ("started_at", "received_at")] + ["started_us"]


def dedupe(valid: DataFrame, ordering: list[str]) -> DataFrame:
    """The first row (in the files' order) of each (gateway, request_id); a row without a
    request_id is keyed by a hash of its content, so exact repeats of it count once."""
    content = F.concat(F.lit("sha1:"), F.sha1(F.to_json(F.struct(*_RECORD))))
    key = F.coalesce(F.col("request_id"), content)
    first = Window.partitionBy("gateway", f"{_P}key").orderBy(*ordering)
    return (
        valid.withColumn(f"{_P}key", key)
        .withColumn(f"{_P}n", F.row_number().over(first))
        .filter(F.col(f"{_P}n") == 1)
        .drop(f"{_P}key", f"{_P}n")
    )


# --- buckets ------------------------------------------------------------------------------------


_EDGE_FRAMES: dict[tuple[str, int], DataFrame] = {}  # per session and table: built once


def edges_frame(spark: SparkSession, spec: dict) -> DataFrame:
    """One row, one column: the lower edge of every bucket as an array (bucket b at index
    b + BUCKET_LIMIT + 1, counting from 1); cached, as every bucketed table joins it."""
    try:
        session = spark.sparkContext.applicationId
    except Exception:  # noqa: BLE001  (Spark Connect has no SparkContext)
        session = str(id(spark))
    key = (session, hash(tuple(spec["edges"])))
    if key not in _EDGE_FRAMES:
        _EDGE_FRAMES[key] = edges_row(spark, spec).persist()
    return _EDGE_FRAMES[key]


def edges_row(spark: SparkSession, spec: dict, arrow: bool = True) -> DataFrame:
    """The edge table's one row, made through Arrow when the driver has pyarrow (pyspark's
    SQL extra; faster), else from a Python list."""
    lo = [float(x) for x in spec["edges"]]
    name = f"{_P}edges"
    try:
        if arrow:
            import pyarrow as pa

            table = pa.table({name: pa.array([lo], pa.list_(pa.float64()))})
            return spark.createDataFrame(table)
    except ImportError:
        pass
    schema = T.StructType([T.StructField(name, T.ArrayType(T.DoubleType(), False), False)])
    return spark.createDataFrame([(lo,)], schema)


def bucketed(df: DataFrame, value: str, out: str, edges: DataFrame, c: dict) -> DataFrame:
    """`df` with `out`: the bucket of `value` exactly as tokenshape's bucket_sql gives it.

    Spark's ln is StrictMath.log, DuckDB's the C library's: they may differ in the last bit,
    which near an edge is a bucket. ln gives the guess; the edge table corrects it by one.
    The table is one row cross-joined by broadcast: each row reads its two edges by index,
    with no hash join (measured: as fast as the guess alone, a hash join cost 1-2 s more)."""
    limit, zero = c["bucket_limit"], c["zero_bucket"]
    v = F.col(value)
    guess = F.when(
        v > 0,
        F.least(
            F.greatest(F.floor(F.ln(v) / F.lit(c["ln_gamma"])), F.lit(-limit)), F.lit(limit)
        ).cast("int"),
    )
    joined = df.withColumn(f"{_P}b0", guess).crossJoin(F.broadcast(edges))
    b0 = F.col(f"{_P}b0")
    table = F.col(f"{_P}edges")
    lo = F.try_element_at(table, b0 + F.lit(limit + 1))
    hi = F.try_element_at(table, b0 + F.lit(limit + 2))  # null above the top bucket
    exact = F.when(v <= 0, F.lit(zero)).when(v < lo, b0 - 1).when(v >= hi, b0 + 1).otherwise(b0)
    return joined.withColumn(out, exact).drop(f"{_P}b0", f"{_P}edges")


def bin_of(column: Column, edges: list[int]) -> Column:
    """The bin index of an integer: how many of the edges after the first it reaches (the
    CASE half_octave_sql and position_sql build)."""
    out = None
    for i, edge in enumerate(edges[1:]):
        out = F.when(column < edge, i) if out is None else out.when(column < edge, i)
    return out.otherwise(len(edges) - 1) if out is not None else F.lit(0)


# --- the rollups ------------------------------------------------------------------------------


def hourly(used: DataFrame, spec: dict, edges: DataFrame) -> dict[str, DataFrame]:
    """The four hourly tables, column for column as rebuild() builds them."""
    c = spec["constants"]
    dims = [F.col(d) for d in DIMS]
    base = used.select(
        F.date_trunc("HOUR", F.timestamp_micros("started_us")).alias("hour"),
        *dims,
        "isl",
        "osl",
        "ttft_ms",
        "itl_ms",
        "e2e_ms",
        "token_gaps_ms",
        (F.lit(1.0) / F.coalesce(F.col("sample_rate"), F.lit(1.0))).alias("wt"),
    )
    keys = ["hour", *DIMS]
    half = c["half_octave_edges"]
    shapes = (
        base.withColumn("ib", bin_of(F.col("isl"), half))
        .withColumn("ob", bin_of(F.col("osl"), half))
        .groupBy(*keys, "ib", "ob")
        .agg(F.count(F.lit(1)).alias("n"), F.sum("wt").alias("w"))
    )
    measures = c["measures"]
    pairs = F.array(
        *[
            F.struct(F.lit(i).alias("measure"), F.col(m).cast("double").alias("v"))
            for i, m in enumerate(measures)
        ]
    )
    values = bucketed(
        base.select(*keys, "wt", F.inline(pairs)).filter(F.col("v").isNotNull()), "v", "b", edges, c
    )
    values = values.groupBy(*keys, "measure", "b").agg(
        F.count(F.lit(1)).alias("n"),
        F.max("v").alias("vmax"),
        F.sum(F.col("v") * F.col("wt")).alias("vsum"),
        F.sum("wt").alias("w"),
    )
    # posexplode counts from 0; token positions (gap k follows token k) from 1.
    gaps = base.filter(F.col("token_gaps_ms").isNotNull()).select(
        *keys, "wt", F.posexplode("token_gaps_ms").alias("p", "gap")
    )
    gaps = gaps.filter(F.col("gap").isNotNull()).withColumn(
        "pb", bin_of(F.col("p") + 1, c["position_edges"])
    )
    gaps = (
        bucketed(gaps, "gap", "b", edges, c)
        .groupBy(*keys, "pb", "b")
        .agg(F.count(F.lit(1)).alias("n"), F.max("gap").alias("vmax"), F.sum("wt").alias("w"))
    )
    x = F.col("isl").cast("double")  # isl::DOUBLE: every product in double, as DuckDB's
    ttft = bucketed(
        base.filter(F.col("ttft_ms").isNotNull()).withColumn("ib", bin_of(F.col("isl"), half)),
        "ttft_ms",
        "b",
        edges,
        c,
    )
    ttft = ttft.groupBy(*keys, "ib", "b").agg(
        F.count(F.lit(1)).alias("n"),
        F.max("ttft_ms").alias("vmax"),
        F.sum(x * F.col("wt")).alias("sx"),
        F.sum(F.col("ttft_ms") * F.col("wt")).alias("sy"),
        F.sum(x * F.col("ttft_ms") * F.col("wt")).alias("sxy"),
        F.sum(x * F.col("isl") * F.col("wt")).alias("sxx"),
        F.sum("wt").alias("w"),
    )
    out = {"shapes": shapes, "values": values, "gaps": gaps, "ttft": ttft}
    return {name: _conform(df, spec["tables"][name]) for name, df in out.items()}


def local_day(hour: Column, tz: str) -> Column:
    """The start instant of the local day in `tz` that holds the UTC hour: in DuckDB terms
    date_trunc('day', hour AT TIME ZONE tz) AT TIME ZONE tz (the session zone is UTC)."""
    return F.to_utc_timestamp(F.date_trunc("DAY", F.from_utc_timestamp(hour, tz)), tz)


_SUMMED = ("n", "w", "vsum", "sx", "sy", "sxy", "sxx")


def daily(hourly_tables: dict[str, DataFrame], spec: dict, tz: str) -> dict[str, DataFrame]:
    """The hourly tables regrouped by local day in `tz`, without tenant: counts and sums
    summed, maxima the maximum."""
    out = {}
    for name, df in hourly_tables.items():
        columns = [n for n, _ in spec["tables"][name] if n != "tenant"]
        measured = [n for n in columns if n in _SUMMED or n == "vmax"]
        keys = [n for n in columns if n not in measured and n != "hour"]
        aggs = [F.max(n).alias(n) if n == "vmax" else F.sum(n).alias(n) for n in measured]
        day = df.withColumn("hour", local_day(F.col("hour"), tz)).groupBy("hour", *keys).agg(*aggs)
        out[name] = _conform(day, [(n, t) for n, t in spec["tables"][name] if n != "tenant"])
    return out


def _conform(df: DataFrame, columns: list) -> DataFrame:
    """Exactly the table's columns, in its order and types."""
    return df.select(*[F.col(n).cast(t).alias(n) for n, t in columns])


# --- files on any Hadoop path ---------------------------------------------------------------


def _local(uri: str) -> str | None:
    """The local path of `uri`, or None for a path with another scheme (s3a:, abfss:, …)."""
    if uri.startswith("file:"):
        return re.sub(r"^file:(//)?", "", uri)
    return None if re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", uri) else uri


def _hadoop(spark: SparkSession, uri: str):
    """(Hadoop FileSystem, Path) of `uri`, resolved as Spark resolves the output (a path
    without a scheme is on fs.defaultFS: HDFS on a YARN cluster); None without a JVM to ask
    (Spark Connect), where only local and mounted paths (/dbfs, /Volumes) are written."""
    try:
        jvm, jsc = spark._jvm, spark._jsc  # type: ignore[attr-defined]
        if jvm is None or jsc is None:
            return None
        path = jvm.org.apache.hadoop.fs.Path(uri)
        return path.getFileSystem(jsc.hadoopConfiguration()), path
    except Exception:  # noqa: BLE001  (Spark Connect refuses JVM access)
        return None


def _local_only(uri: str) -> str:
    local = _local(uri)
    if local is None:
        raise SpecError(
            f"{uri}: this session gives no access to Hadoop's file systems (Spark Connect); "
            "write the output to a mounted path (/Volumes/…, /dbfs/…) or use classic compute"
        )
    return local


def read_text(spark: SparkSession, uri: str, local_first: bool = False) -> str | None:
    """A small file's text, None when it does not exist. Through Hadoop, so it is where
    Spark reads and writes; `local_first`: a file on this machine wins (the spec)."""
    local = _local(uri)
    if local_first and local is not None and os.path.isfile(local):
        with open(local, encoding="utf-8") as f:
            return f.read()
    found = _hadoop(spark, uri)
    if found is None:
        try:
            with open(_local_only(uri), encoding="utf-8") as f:
                return f.read()
        except FileNotFoundError:
            return None
    fs, path = found
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        return spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")  # type: ignore[union-attr]
    finally:
        stream.close()


def write_text(spark: SparkSession, uri: str, text: str) -> None:
    """Write a small file, replacing it (through Hadoop, else on a local path)."""
    found = _hadoop(spark, uri)
    if found is None:
        local = _local_only(uri)
        os.makedirs(os.path.dirname(os.path.abspath(local)), exist_ok=True)
        tmp = f"{local}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, local)
        return
    fs, path = found
    fs.setWriteChecksum(False)  # no .crc file beside it on a local file system
    out = fs.create(path, True)
    try:
        out.write(bytearray(text.encode()))
    finally:
        out.close()


def delete_tree(spark: SparkSession, uri: str) -> None:
    """Remove a folder if it is there."""
    found = _hadoop(spark, uri)
    if found is None:
        import shutil

        shutil.rmtree(_local_only(uri), ignore_errors=True)
        return
    fs, path = found
    if fs.exists(path):
        fs.delete(path, True)


def _join(root: str, *parts: str) -> str:
    return "/".join([root.rstrip("/"), *parts])


# --- the run ----------------------------------------------------------------------------------


def parse_time(spark: SparkSession, text: str | None, tz: str, option: str) -> int | None:
    """An --from/--to value as epoch microseconds: ISO 8601, a time without a zone read in
    `tz`; it must fall on a UTC hour (rollups are whole hours)."""
    if not text:
        return None
    t = text.strip()
    if _ZONED.search(t):  # a zone of its own: Python reads it, no Spark job needed
        try:
            when = datetime.fromisoformat(t.replace("z", "Z"))
        except ValueError:
            when = None
        if when is not None and when.tzinfo is not None:
            us = (when - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
            if us % HOUR_US:
                raise SpecError(
                    f"{option} {text!r} does not fall on a UTC hour: rollups are whole hours"
                )
            return int(us)
    lit = F.lit(t)
    instant = (
        lit.cast("timestamp") if _ZONED.search(t) else F.to_utc_timestamp(lit.cast("timestamp"), tz)
    )
    row = spark.range(1).select(F.unix_micros(instant).alias("us")).first()
    read = row["us"] if row is not None else None
    if read is None:
        raise SpecError(f"{option} {text!r} is not an ISO 8601 date or time")
    us = int(read)
    if us % HOUR_US:
        raise SpecError(f"{option} {text!r} does not fall on a UTC hour: rollups are whole hours")
    return int(us)


def _iso(us: int) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=us)).strftime(
        "%Y-%m-%dT%H:%M:%SZ"
    )


def configure(spark: SparkSession) -> None:
    """The session settings the rows depend on."""
    conf = spark.conf
    conf.set("spark.sql.session.timeZone", "UTC")  # hours are UTC hours
    conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")  # never INT96
    conf.set("spark.sql.sources.partitionOverwriteMode", "dynamic")  # a run replaces its days
    # Off: a mapping's cast that fails gives null (counted against its field), never the job.
    conf.set("spark.sql.ansi.enabled", "false")
    # A map built from a record's attributes keeps the last of a repeated key, as the
    # ingest routes' attribute dicts do (the default fails the job).
    conf.set("spark.sql.mapKeyDedupPolicy", "LAST_WIN")
    # Constraint propagation infers facts from every rule of the checks, at a cost that grows
    # steeply with them (measured: 20 s of PruneFilters planning one query of 5,000 rows);
    # the checks need none of what it infers.
    conf.set("spark.sql.constraintPropagation.enabled", "false")


def _covered(spark: SparkSession, start_us: int, end_us: int, tz: str) -> list[tuple]:
    """Per covered UTC hour: (hour us, UTC day, local day key us, next local day key us,
    local day)."""
    n = (end_us - start_us) // HOUR_US
    hour = F.timestamp_micros(F.lit(start_us) + F.col("id") * F.lit(HOUR_US))
    key = local_day(hour, tz)
    nxt = F.to_utc_timestamp(
        F.date_trunc("DAY", F.from_utc_timestamp(hour, tz)) + F.expr("INTERVAL 1 DAY"), tz
    )
    rows = (
        spark.range(n)
        .select(
            F.unix_micros(hour).alias("h"),
            F.date_format(hour, "yyyy-MM-dd").alias("utc_day"),
            F.unix_micros(key).alias("k"),
            F.unix_micros(nxt).alias("k2"),
            F.date_format(F.from_utc_timestamp(key, tz), "yyyy-MM-dd").alias("local_day"),
        )
        .collect()
    )
    return [tuple(r) for r in rows]


def _hours_from(k: int, k2: int) -> int:
    """UTC hours whose start lies in [k, k2)."""
    return -(-k2 // HOUR_US) - -(-k // HOUR_US)


class _Laps:
    """Seconds per step of a run, for the summary (where a slow run spends its time)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def __call__(self, step: str) -> None:
        now = time.monotonic()
        self.seconds[step] = round(self.seconds.get(step, 0.0) + now - self._last, 3)
        self._last = now


def run(
    spark: SparkSession,
    spec: dict,
    *,
    inputs: list[str],
    output: str,
    fmt: str = "parquet",
    start: str | None = None,
    end: str | None = None,
    tiers: tuple[str, ...] = TIERS,
    tz: str = "UTC",
    received_at: datetime | None = None,
    run_id: str | None = None,
) -> dict:
    """Run the job on a session; returns the run's summary (also the root _manifest.json)."""
    configure(spark)
    bad = [t for t in tiers if t not in TIERS]
    if bad or not tiers:
        raise SpecError(f"--tiers takes hourly and/or daily, not {','.join(bad) or 'nothing'}")
    try:
        spark.range(1).select(F.from_utc_timestamp(F.current_timestamp(), tz)).first()
    except Exception:  # noqa: BLE001  (the JVM's error for an unknown zone, whatever its class)
        raise SpecError(f"--tz {tz!r} is not a time zone Spark knows") from None
    created = datetime.now(UTC)
    received = received_at or created
    received_us = int((received - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))
    start_us = parse_time(spark, start, tz, "--from")
    end_us = parse_time(spark, end, tz, "--to")
    if start_us is not None and end_us is not None and end_us <= start_us:
        raise SpecError("--to must be after --from")
    run_id = run_id or uuid.uuid4().hex[:12]
    lap = _Laps()
    if "daily" in tiers:  # one folder holds the days of one zone: they would overlap
        earlier = read_text(spark, _join(output, "daily", MANIFEST))
        zone = json.loads(earlier).get("tz") if earlier else tz
        if zone != tz:
            raise SpecError(
                f"{_join(output, 'daily')} holds days in {zone}, not {tz}: write days of "
                "another zone to another --output"
            )

    source = read_input(spark, inputs, fmt)
    files = sorted(source.inputFiles())
    lap("list inputs")
    checked, ordering = map_rows(source, spec, received_us)
    lap("map columns")

    checked = checked.persist()  # read once: counted here, deduplicated next
    tally = checked.groupBy(f"{_P}skip", f"{_P}reason").count().collect()
    lap("check rows")
    read = sum(r["count"] for r in tally)
    skipped = sum(r["count"] for r in tally if r[f"{_P}skip"])
    invalid = {
        r[f"{_P}reason"]: r["count"] for r in tally if not r[f"{_P}skip"] and r[f"{_P}reason"]
    }
    valid = read - skipped - sum(invalid.values())

    keep = checked.filter(~F.col(f"{_P}skip") & F.col(f"{_P}reason").isNull())
    unique = dedupe(keep.drop(f"{_P}skip", f"{_P}reason"), ordering)
    inside = F.lit(True)
    if start_us is not None:
        inside = inside & (F.col("started_us") >= F.lit(start_us))
    if end_us is not None:
        inside = inside & (F.col("started_us") < F.lit(end_us))
    unique = unique.withColumn(f"{_P}in", inside).drop(*ordering).persist()
    stats = unique.groupBy(f"{_P}in").agg(
        F.count(F.lit(1)).alias("n"),
        F.min("started_us").alias("first"),
        F.max("started_us").alias("last"),
    )
    by_in = {r[f"{_P}in"]: r for r in stats.collect()}
    checked.unpersist()  # the kept rows are in `unique` now
    lap("first of each key")
    kept = sum(r["n"] for r in by_in.values())
    used_row = by_in.get(True)
    used_n = used_row["n"] if used_row else 0
    # Hours covered: the window; without one, the first to the last hour holding a row.
    lo = (
        start_us
        if start_us is not None
        else (used_row["first"] // HOUR_US * HOUR_US if used_row else None)
    )
    hi = (
        end_us
        if end_us is not None
        else (used_row["last"] // HOUR_US * HOUR_US + HOUR_US if used_row else None)
    )
    covered = _covered(spark, lo, hi, tz) if lo is not None and hi is not None else []
    lap("hours covered")

    used = unique.filter(F.col(f"{_P}in")).drop(f"{_P}in")
    edges = edges_frame(spark, spec)
    hourly_tables = {k: v.persist() for k, v in hourly(used, spec, edges).items()}
    lap("edges")
    rows_counts = {
        "read": read,
        "skipped_by_where": skipped,
        "invalid": dict(sorted(invalid.items())),
        "invalid_total": sum(invalid.values()),
        "valid": valid,
        "duplicates": valid - kept,
        "outside_window": kept - used_n,
        "used": used_n,
    }
    summary: dict = {
        "schema_version": MANIFEST_VERSION,
        "kind": "tokenshape-lake-run",
        "run_id": run_id,
        "created_at": created.isoformat().replace("+00:00", "Z"),
        "tokenshape_version": spec.get("tokenshape_version"),
        "tz": tz,
        "tiers": list(tiers),
        "window": {
            "from": _iso(start_us) if start_us is not None else None,
            "to": _iso(end_us) if end_us is not None else None,
        },
        "covered": {"from": _iso(lo), "to": _iso(hi)} if covered and lo and hi else None,
        "received_at": _iso(received_us - received_us % 1_000_000),
        "input": {"paths": list(inputs), "format": fmt, "files": files},
        "rows": rows_counts,
        "tables": {},
    }
    tables_out: dict[str, dict[str, DataFrame]] = {}
    if "hourly" in tiers:
        tables_out["hourly"] = {
            k: v.withColumn("day", F.date_format("hour", "yyyy-MM-dd"))
            for k, v in hourly_tables.items()
        }
    if "daily" in tiers:
        daily_tables = daily(hourly_tables, spec, tz)
        tables_out["daily"] = {
            k: v.withColumn("day", F.date_format(F.from_utc_timestamp("hour", tz), "yyyy-MM-dd"))
            for k, v in daily_tables.items()
        }
    for tier, tables in tables_out.items():
        counts = _day_counts(tables)
        lap(f"{tier} rollups")
        days = _tier_days(tier, covered)
        for name, df in tables.items():
            folder = _join(output, tier, name)
            # No shuffle by day: each task writes a file per day it holds, and adaptive
            # execution already sizes the tasks (a one-day run: files of ~64 MB). Sorted
            # within each, so a reader's filters on hour and model skip row groups.
            ordered = df.sortWithinPartitions("day", "hour", *[d for d in DIMS if d in df.columns])
            ordered.write.mode("overwrite").option("compression", "zstd").partitionBy(
                "day"
            ).parquet(folder)
            # A covered day without rows now: what an earlier run left there is stale.
            for day in days:
                if not counts.get((name, day)):
                    delete_tree(spark, _join(folder, f"day={day}"))
        summary["tables"][tier] = {
            name: sum(n for (t, _), n in counts.items() if t == name) for name in TABLES
        }
        lap(f"{tier} write")
        _merge_manifest(spark, output, tier, spec, summary, days, counts)
        lap("manifests")
    for df in hourly_tables.values():
        df.unpersist()
    unique.unpersist()
    lap("manifests")
    summary["seconds"] = lap.seconds
    summary["spark"] = _cluster(spark)
    write_text(spark, _join(output, MANIFEST), json.dumps(summary, indent=1) + "\n")
    return summary


def _cluster(spark: SparkSession) -> dict:
    """Where the run ran: Spark's version, the master, how many executors joined it (0 on a
    local master, whose tasks run in the driver)."""
    out: dict = {"version": spark.version, "master": None, "executors": None}
    try:
        sc = spark.sparkContext
        out["master"] = sc.master
        # One block manager per executor, and the driver's own.
        out["executors"] = sc._jsc.sc().getExecutorMemoryStatus().size() - 1  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001  (Spark Connect: no SparkContext to ask)
        pass
    return out


def _day_counts(tables: dict[str, DataFrame]) -> dict[tuple[str, str], int]:
    """Rows per (table, day), in one Spark job."""
    parts = [df.groupBy("day").count().withColumn("t", F.lit(name)) for name, df in tables.items()]
    union = reduce(DataFrame.unionByName, parts)
    return {(r["t"], r["day"]): r["count"] for r in union.collect()}


def _tier_days(tier: str, covered: list[tuple]) -> dict[str, dict]:
    """Each partition a run covers: its covered span in hours, and whether it is whole."""
    days: dict[str, dict] = {}
    for h, utc_day, k, k2, local in covered:
        day = utc_day if tier == "hourly" else local
        entry = days.setdefault(day, {"from": h, "to": h + HOUR_US, "hours": 0, "k": (k, k2)})
        entry["from"], entry["to"] = min(entry["from"], h), max(entry["to"], h + HOUR_US)
        entry["hours"] += 1
    out = {}
    for day, e in sorted(days.items()):
        whole = 24 if tier == "hourly" else _hours_from(*e["k"])
        out[day] = {
            "from": _iso(e["from"]),
            "to": _iso(e["to"]),
            "hours": e["hours"],
            "hours_in_day": whole,
            "complete": e["hours"] == whole,
        }
    return out


def _merge_manifest(
    spark: SparkSession,
    output: str,
    tier: str,
    spec: dict,
    summary: dict,
    days: dict[str, dict],
    counts: dict[tuple[str, str], int],
) -> None:
    """The tier's _manifest.json: this run's partitions replace those of earlier runs (a run
    overwrites every day it covers), the others are kept with the runs that wrote them."""
    uri = _join(output, tier, MANIFEST)
    old_text = read_text(spark, uri)
    old: dict = {}
    if old_text:
        try:
            old = json.loads(old_text)
        except ValueError:
            old = {}
    partitions = {d: p for d, p in (old.get("partitions") or {}).items() if d not in days}
    for day, info in days.items():
        partitions[day] = {
            **info,
            "rows": {name: counts.get((name, day), 0) for name in TABLES},
            "run_id": summary["run_id"],
        }
    live = {p["run_id"] for p in partitions.values()}
    runs = [
        r
        for r in old.get("runs") or []
        if r.get("run_id") in live and r.get("run_id") != summary["run_id"]
    ]
    runs.append(
        {
            k: summary[k]
            for k in (
                "run_id",
                "created_at",
                "tokenshape_version",
                "window",
                "covered",
                "received_at",
                "input",
                "rows",
            )
        }
    )
    c = spec["constants"]
    columns = spec["tables"]
    hours = sorted(partitions.items())
    manifest = {
        "schema_version": MANIFEST_VERSION,
        "kind": "tokenshape-lake-rollups",
        "tier": tier,
        "grain": "hour" if tier == "hourly" else "day",
        "tz": "UTC" if tier == "hourly" else summary["tz"],
        "partition_column": "day",
        "constants": {
            "gamma": c["gamma"],
            "zero_bucket": c["zero_bucket"],
            "bucket_limit": c["bucket_limit"],
            "half_octave_edges": c["half_octave_edges"],
            "position_edges": c["position_edges"],
            "measures": c["measures"],
        },
        "tables": {
            name: [[n, t] for n, t in columns[name] if tier == "hourly" or n != "tenant"]
            for name in TABLES
        },
        "covered": {
            "from": hours[0][1]["from"] if hours else None,
            "to": hours[-1][1]["to"] if hours else None,
            "hours": sum(p["hours"] for _, p in hours),
            "partitions": len(hours),
        },
        "rows": {name: sum(p["rows"][name] for _, p in hours) for name in TABLES},
        "partitions": dict(hours),
        "runs": runs,
        "updated_at": summary["created_at"],
        "tokenshape_version": summary["tokenshape_version"],
    }
    write_text(spark, uri, json.dumps(manifest, indent=1) + "\n")


# --- spark-submit entry -----------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The job's own options (spark-submit job.py --spec … --input … --output …)."""
    p = argparse.ArgumentParser(prog="job.py", description=__doc__.splitlines()[0])
    p.add_argument("--spec", required=True, help="spec.json from `tokenshape lake spec`")
    p.add_argument("--input", required=True, action="append", help="path or glob (repeatable)")
    p.add_argument("--output", required=True, help="folder the tiers are written under")
    p.add_argument("--format", default="parquet", choices=["parquet", "json"])
    p.add_argument("--from", dest="start", help="first UTC hour (ISO 8601; no zone: in --tz)")
    p.add_argument("--to", dest="end", help="end, exclusive (ISO 8601; no zone: in --tz)")
    p.add_argument("--tiers", default="hourly,daily", help="hourly,daily (default both)")
    p.add_argument("--tz", default="UTC", help="time zone of the daily tier's days")
    p.add_argument("--received-at", help="receive time for the future bound (default now)")
    p.add_argument("--run-id", help="the run's id in the manifests (default random)")
    return p


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry: read the spec, run, print the summary line."""
    args = build_parser().parse_args(argv)
    spark = SparkSession.builder.appName("tokenshape-lake-rollup").getOrCreate()
    try:
        text = read_text(spark, args.spec, local_first=True)
        if text is None:  # shipped with --files: in the driver's working folder
            text = read_text(spark, os.path.basename(args.spec), local_first=True)
        if text is None:
            raise SpecError(f"no spec at {args.spec}")
        received = datetime.fromisoformat(args.received_at) if args.received_at else None
        if received is not None and received.tzinfo is None:
            received = received.replace(tzinfo=UTC)
        summary = run(
            spark,
            load_spec(text),
            inputs=args.input,
            output=args.output,
            fmt=args.format,
            start=args.start,
            end=args.end,
            tiers=tuple(t.strip() for t in args.tiers.split(",") if t.strip()),
            tz=args.tz,
            received_at=received,
            run_id=args.run_id,
        )
    except (MappingError, SpecError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    brief = {k: summary[k] for k in ("run_id", "covered", "rows", "tables", "spark")}
    print(SUMMARY_MARK + json.dumps(brief), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
