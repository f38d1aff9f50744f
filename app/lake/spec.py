"""The spec the Spark job runs by: tokenshape's bucket constants, the exact bucket edges, the
rollup tables' columns, the canonical record's bounds and the column mapping, as JSON.

app/lake/job.py stays standalone (a cluster needs nothing of tokenshape), so everything it
must agree with tokenshape on comes from here, taken from the modules that define it."""

from __future__ import annotations

import json
import math
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from sqlalchemy import BigInteger, DateTime, Double, SmallInteger, String, Table

from app.lake.edges import bucket_edges
from app.storage import schema
from app.storage.rollups import (
    BUCKET_LIMIT,
    GAMMA,
    HALF_OCTAVE_EDGES,
    MEASURES,
    POSITION_EDGES,
    ZERO_BUCKET,
)

SPEC_VERSION = 1
# The canonical record's bounds that live in ingest/records.py, which sits above this layer
# (a test keeps these equal to it): most gaps per request, the smallest sample rate.
MAX_GAPS = 1_000_000
MIN_SAMPLE_RATE = 2.0**-56
NAME_MAX = 256  # ingest.records.Name: 1..256 characters
STATUSES = ("ok", "error", "cancelled")
# The tables the job writes, by the name its folders take.
TABLES: dict[str, Table] = {
    "shapes": schema.rollup_shapes,
    "values": schema.rollup_values,
    "gaps": schema.rollup_gaps,
    "ttft": schema.rollup_ttft,
}


def spark_type(column) -> str:
    """The Spark SQL type that holds a rollup column exactly (Parquet: the same physical type
    DuckDB reads back as the column's own)."""
    kind = column.type
    # Subclasses first: SmallInteger and BigInteger are Integers.
    for cls, name in (
        (SmallInteger, "smallint"),
        (BigInteger, "bigint"),
        (Double, "double"),
        (DateTime, "timestamp"),
        (String, "string"),
    ):
        if isinstance(kind, cls):
            return name
    raise TypeError(f"no Spark type for {column.table.name}.{column.name} ({kind})")


def tokenshape_version() -> str:
    """The installed tokenshape's version, for the manifests."""
    try:
        return version("tokenshape")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


def build(mapping: dict) -> dict:
    """The spec for `mapping` (as app.lake.mapping.check returns it)."""
    return {
        "spec_version": SPEC_VERSION,
        "tokenshape_version": tokenshape_version(),
        "constants": {
            "gamma": GAMMA,
            "ln_gamma": math.log(GAMMA),  # the divisor bucket_sql writes (repr: exact)
            "zero_bucket": ZERO_BUCKET,
            "bucket_limit": BUCKET_LIMIT,
            "half_octave_edges": list(HALF_OCTAVE_EDGES),
            "position_edges": list(POSITION_EDGES),
            "measures": list(MEASURES),
            "max_tokens": schema.MAX_TOKENS,
            "max_gaps": MAX_GAPS,
            "min_sample_rate": MIN_SAMPLE_RATE,
            "name_max": NAME_MAX,
            "statuses": list(STATUSES),
            "earliest": schema.EARLIEST.isoformat(),
            "future_slack_s": schema.FUTURE_SLACK.total_seconds(),
        },
        # Lower edge of buckets -BUCKET_LIMIT..BUCKET_LIMIT; JSON's repr of a double is exact.
        "edges": list(bucket_edges()),
        "tables": {
            name: [[c.name, spark_type(c)] for c in table.columns] for name, table in TABLES.items()
        },
        "mapping": mapping,
    }


def write(spec: dict, path: Path) -> Path:
    """Write the spec as JSON."""
    path.write_text(json.dumps(spec, separators=(",", ":")) + "\n")
    return path
