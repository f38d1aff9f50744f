"""Column mappings: which column of a lake's logs holds each field of the canonical record.

A mapping is YAML (version 1):

    version: 1
    format: json                      # optional: parquet or json, when --format is not given
    explode:                          # optional: one row per element of an array, in order
      - {as: span, from: spans}
    let:                              # optional: named expressions the others may use
      attrs: "map_from_entries(transform(span.attributes, a -> struct(a.key, a.value)))"
    where: "span.kind = 3"            # optional Spark SQL condition: other rows are skipped
    columns:                          # canonical field -> where its value comes from
      model: model_group              # a column, or a dotted path into a struct
      isl: {column: usage.prompt_tokens}
      gateway: {const: litellm-prod}  # the same value for every row
      e2e_ms: {expr: "(endTime - startTime) * 1000"}   # a Spark SQL expression
      ttft_ms: {column: ttft, unit: s}                  # seconds, converted to ms
      started_at: {column: startTime, time: epoch_s}
      tenant: {column: metadata.team, optional: true}  # null when the input lacks it
      sample_rate: {coalesce: [metadata.sample_rate, sampling.p]}  # the first one present

Checked here, before Spark starts, for its form; the job checks it against the input's
columns and types (app/lake/job.py) and names the field whose column is missing.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml

# The canonical record's fields as the job reads them (app/lake/job.py FIELDS, which must
# stay standalone; a test keeps the two equal) and those a mapping must give.
FIELDS = (
    "gateway",
    "request_id",
    "started_at",
    "received_at",
    "model",
    "engine",
    "tenant",
    "isl",
    "osl",
    "tokens_estimated",
    "ttft_ms",
    "e2e_ms",
    "itl_ms",
    "queue_ms",
    "token_gaps_ms",
    "status",
    "error_type",
    "stream",
    "cached_tokens",
    "sample_rate",
)
REQUIRED = ("gateway", "model", "isl", "osl", "started_at")
DURATIONS = ("ttft_ms", "e2e_ms", "itl_ms", "queue_ms", "token_gaps_ms")
TIMES = ("started_at", "received_at")
UNITS = ("ms", "s", "us", "ns")
TIME_FORMATS = ("auto", "iso", "timestamp", "epoch_s", "epoch_ms", "epoch_us", "epoch_ns")
FORMATS = ("parquet", "json")
_TOP = ("version", "description", "format", "explode", "let", "where", "columns")
_SOURCES = ("column", "expr", "const", "coalesce")
_OPTIONS = ("optional", "unit", "time")
# The mappings shipped with tokenshape, by the name --columns takes.
BUILTIN_DIR = Path(__file__).with_name("mappings")
BUILTIN = {p.stem: p for p in sorted(BUILTIN_DIR.glob("*.yaml"))}


class MappingError(ValueError):
    """A mapping that cannot be used: names the file, the key and what is wrong."""


def _unknown(where: str, key: object, known: tuple[str, ...]) -> MappingError:
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return MappingError(f"{where}: unknown key {key!r}{hint}; the keys: {', '.join(known)}")


def _entry(field: str, value: Any) -> dict:
    where = f"columns.{field}"
    if isinstance(value, str):
        if not value.strip():
            raise MappingError(f"{where}: an empty column name")
        return {"column": value}
    if not isinstance(value, dict):
        raise MappingError(
            f"{where}: give a column name, or a mapping with one of {', '.join(_SOURCES)}"
        )
    for key in value:
        if key not in _SOURCES + _OPTIONS:
            raise _unknown(where, key, _SOURCES + _OPTIONS)
    sources = [k for k in _SOURCES if k in value]
    if len(sources) != 1:
        raise MappingError(
            f"{where}: give exactly one of {', '.join(_SOURCES)}, not "
            f"{' and '.join(sources) or 'none'}"
        )
    source = sources[0]
    out: dict = {source: value[source]}
    if source in ("column", "expr") and (
        not isinstance(value[source], str) or not value[source].strip()
    ):
        raise MappingError(f"{where}.{source}: must be non-empty text")
    if source == "coalesce" and (
        not isinstance(value["coalesce"], list)
        or not value["coalesce"]
        or not all(isinstance(c, str) and c.strip() for c in value["coalesce"])
    ):
        raise MappingError(f"{where}.coalesce: must be a list of column names")
    if source == "const" and not isinstance(value["const"], str | int | float | bool | None):
        raise MappingError(f"{where}.const: must be text, a number, true/false or null")
    if "optional" in value:
        if not isinstance(value["optional"], bool):
            raise MappingError(f"{where}.optional: must be true or false")
        if field in REQUIRED and value["optional"]:
            raise MappingError(f"{where}.optional: {field} is required, it cannot be optional")
        out["optional"] = value["optional"]
    if "unit" in value:
        if field not in DURATIONS:
            raise MappingError(f"{where}.unit: only {', '.join(DURATIONS)} take a unit")
        if value["unit"] not in UNITS:
            raise MappingError(f"{where}.unit: must be one of {', '.join(UNITS)}")
        out["unit"] = value["unit"]
    if "time" in value:
        if field not in TIMES:
            raise MappingError(f"{where}.time: only {', '.join(TIMES)} take a time format")
        if value["time"] not in TIME_FORMATS:
            raise MappingError(f"{where}.time: must be one of {', '.join(TIME_FORMATS)}")
        out["time"] = value["time"]
    return out


def check(raw: object) -> dict:
    """The mapping in the form the job's spec holds; MappingError names what is wrong."""
    if not isinstance(raw, dict):
        raise MappingError("a mapping is a YAML object with version: 1 and columns:")
    for key in raw:
        if key not in _TOP:
            raise _unknown("the mapping", key, _TOP)
    if raw.get("version") != 1:
        raise MappingError("version: must be 1")
    out: dict = {"version": 1}
    if "format" in raw:
        if raw["format"] not in FORMATS:
            raise MappingError(f"format: must be one of {', '.join(FORMATS)}")
        out["format"] = raw["format"]
    steps = raw.get("explode") or []
    if not isinstance(steps, list):
        raise MappingError("explode: must be a list of {as: NAME, from: ARRAY}")
    out["explode"] = []
    for i, step in enumerate(steps):
        if not isinstance(step, dict) or set(step) != {"as", "from"}:
            raise MappingError(f"explode[{i}]: must be {{as: NAME, from: ARRAY}}")
        if not (isinstance(step["as"], str) and step["as"].isidentifier()):
            raise MappingError(f"explode[{i}].as: must be a plain name (letters, digits, _)")
        if not isinstance(step["from"], str) or not step["from"].strip():
            raise MappingError(f"explode[{i}].from: must be a column or an expression")
        out["explode"].append({"as": step["as"], "from": step["from"]})
    lets = raw.get("let") or {}
    if not isinstance(lets, dict):
        raise MappingError("let: must map names to Spark SQL expressions")
    out["let"] = []
    for name, value in lets.items():
        where = f"let.{name}"
        if not (isinstance(name, str) and name.isidentifier()):
            raise MappingError(f"{where}: a name must be plain (letters, digits, _)")
        if isinstance(value, str):
            value = {"expr": value}
        if not isinstance(value, dict) or not set(value) <= {"expr", "optional"}:
            raise MappingError(f"{where}: give an expression, or {{expr: …, optional: true}}")
        if not isinstance(value.get("expr"), str) or not value["expr"].strip():
            raise MappingError(f"{where}.expr: must be a Spark SQL expression")
        if not isinstance(value.get("optional", False), bool):
            raise MappingError(f"{where}.optional: must be true or false")
        out["let"].append(
            {"as": name, "expr": value["expr"], "optional": value.get("optional", False)}
        )
    if raw.get("where") is not None:
        if not isinstance(raw["where"], str) or not raw["where"].strip():
            raise MappingError("where: must be a Spark SQL condition")
        out["where"] = raw["where"]
    columns = raw.get("columns")
    if not isinstance(columns, dict) or not columns:
        raise MappingError("columns: must map canonical fields to columns")
    out["columns"] = {}
    for field, value in columns.items():
        if field not in FIELDS:
            raise _unknown("columns", field, FIELDS)
        out["columns"][field] = _entry(field, value)
    missing = [f for f in REQUIRED if f not in out["columns"]]
    if missing:
        raise MappingError(
            f"columns: {', '.join(missing)} not mapped; every row needs "
            f"{', '.join(REQUIRED)} (a constant will do for gateway: {{const: NAME}})"
        )
    return out


def load(source: str | Path) -> dict:
    """A mapping from a YAML file, or a shipped one by name (identity, litellm, otel-file)."""
    name = str(source)
    path = BUILTIN.get(name) or Path(name)
    if not path.is_file():
        raise MappingError(f"{name}: no such mapping file; the shipped ones: {', '.join(BUILTIN)}")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise MappingError(f"{path}: not YAML ({exc})") from None
    try:
        return check(raw)
    except MappingError as exc:
        raise MappingError(f"{path}: {exc}") from None
