"""Apache Spark computes exactly the rollups tokenshape builds itself (app/lake/job.py).

The same demo-like rows (nulls, zeros, sampled rows, per-token gaps, values on bucket edges,
repeated request ids, invalid rows) go two ways: through tokenshape's own ingest (the native
NDJSON import, its rules and dedupe) into a real DuckDB file and its rollups, and as Parquet on
disk through the Spark job on `local[2]`. Every hourly table must match key for key (counts
and maxima exactly, sums within 1e-12 relative), the daily tier must be DuckDB's hourly rows
regrouped by local day in a zone with a DST change, and every invalid row must be counted
under its reason. Then LiteLLM payloads as NDJSON through the shipped litellm mapping against
tokenshape's LiteLLM route, one run on `local-cluster[2,1,1024]` (executors in JVMs of their
own) through the CLI, and every bucket edge and the doubles beside it.

One SparkSession for the module (fast-start JVM, no UI, two shuffle partitions).
"""

from __future__ import annotations

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import unquote

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app.lake import job, mapping, runner
from app.lake import spec as lake_spec
from app.lake.edges import bucket_edges, duckdb_buckets
from app.storage import rollups, schema
from app.storage.batches import Batch
from app.storage.write.store import RequestStore
from ingest.formats import litellm, otlp
from ingest.importer import import_file
from tests.support.cli import clean_env, cli
from tests.support.database import copy_database, open_migrated
from tests.support.paths import ROOT
from tests.support.records import LITELLM_START, litellm_payload

pytestmark = pytest.mark.timeout(900)

RECEIVED = datetime(2026, 11, 3, 6, tzinfo=UTC)  # the imports' receive time, and the job's
# For the LiteLLM and OTLP rows (2026-11-18 to 11-21): received after them.
LATE_RECEIVED = datetime(2026, 11, 22, tzinfo=UTC)
END = datetime(2026, 11, 2, 12, tzinfo=UTC)  # the demo rows: the 48 hours before
# DST ends in New York on 2026-11-01 at 06:00 UTC: that local day has 25 hours.
TZ = "America/New_York"
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
WINDOW = ("2026-11-01T00:00:00Z", "2026-11-02T00:00:00Z")  # the New York DST day's UTC date
HOURS_IN_WINDOW = f"hour >= '{WINDOW[0]}' AND hour < '{WINDOW[1]}'"
TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.showConsoleProgress": "false",
}
TABLES = ("shapes", "values", "gaps", "ttft")
MAXIMA = {"vmax"}
SUMS = {"w", "vsum", "sx", "sy", "sxy", "sxx"}
MEASURED = {"n"} | MAXIMA | SUMS
LAKE_FIELDS = [f for f in schema.REQUESTS_SCHEMA if f.name != "received_at"]
LAKE_SCHEMA = pa.schema(LAKE_FIELDS)


# --- the rows ---------------------------------------------------------------------------------


def _invalid(base: dict, n: int) -> tuple[list[dict], Counter]:
    """Rows that each break one rule of the canonical record, and the reasons they must be
    counted under."""
    late = RECEIVED + timedelta(days=2)
    cases = [
        ({"isl": -5}, "isl: must be from 0 to 10,000,000"),
        ({"isl": 10_000_001}, "isl: must be from 0 to 10,000,000"),
        ({"cached_tokens": -1}, "cached_tokens: must be from 0 to 10,000,000"),
        ({"status": "failed"}, "status: must be ok, error or cancelled"),
        ({"sample_rate": 0.0}, "sample_rate: must be a probability from 2^-56 to 1"),
        ({"sample_rate": 1.5}, "sample_rate: must be a probability from 2^-56 to 1"),
        ({"model": None}, "model: missing"),
        ({"model": ""}, "model: must be 1 to 256 characters"),
        ({"model": "m" * 300}, "model: must be 1 to 256 characters"),
        ({"tenant": ""}, "tenant: must be 1 to 256 characters"),
        ({"request_id": ""}, "request_id: must be 1 to 256 characters"),
        ({"ttft_ms": -1.0}, "ttft_ms: must be 0 or more"),
        ({"ttft_ms": math.nan}, "ttft_ms: must be a finite number"),
        ({"e2e_ms": math.inf}, "e2e_ms: must be a finite number"),
        ({"ttft_ms": 500.0, "e2e_ms": 100.0}, "ttft_ms: exceeds e2e_ms"),
        ({"token_gaps_ms": [1.0, -2.0]}, "token_gaps_ms: must hold numbers 0 or more"),
        ({"token_gaps_ms": [1.0, None]}, "token_gaps_ms: holds a null"),
        (
            {"started_at": datetime(1999, 12, 31, 23, tzinfo=UTC)},
            "started_at: outside 2000-01-01 to one day after received_at",
        ),
        ({"started_at": late}, "started_at: outside 2000-01-01 to one day after received_at"),
    ]
    rows, reasons = [], Counter()
    for k, (change, reason) in enumerate(cases * n):
        rows.append({**base, "request_id": f"bad-{k}", "token_gaps_ms": None, **change})
        reasons[reason] += 1
    return rows, reasons


# (gateway, model, engine, tenants, median ISL, median OSL, share of the traffic)
WORKLOADS = (
    ("gw-internal", "llama-3.1-8b-instruct", "guard-8b", ("moderation", "routing"), 600, 8, 0.5),
    (
        "gw-public",
        "llama-3.1-8b-instruct",
        "chat-8b",
        ("web-chat", "support-bot", "sales-assist"),
        1800,
        350,
        0.3,
    ),
    ("gw-public", "llama-3.1-70b-instruct", "llm-70b", ("search", "digest"), 6000, 700, 0.05),
    ("gw-internal", "qwen2.5-coder-7b-instruct", "code-7b", ("ide-plugin",), 2500, 120, 0.15),
)


def demo_rows(n: int) -> list[dict]:
    """Demo-like traffic over the 48 hours before END: log-normal shapes per workload,
    latencies that grow with them, errors and cancellations, per-token gaps for some."""
    rng = np.random.default_rng(3)
    which = rng.choice(len(WORKLOADS), size=n, p=[w[-1] for w in WORKLOADS])
    start_us = int((END - timedelta(days=2)).timestamp() * 1e6)
    started = np.sort(start_us + rng.integers(0, 48 * 3600 * 10**6, n))
    rows = []
    for i in range(n):
        gateway, model, engine, tenants, isl_m, osl_m, _ = WORKLOADS[which[i]]
        isl = int(min(max(rng.lognormal(math.log(isl_m), 0.9), 1), 120_000))
        osl = int(min(max(rng.lognormal(math.log(osl_m), 0.8), 1), 8000))
        ttft = round(20 + isl * 0.04 * rng.lognormal(0, 0.3), 3)
        itl = round(8 * rng.lognormal(0, 0.2), 3)
        roll = rng.random()
        status = "error" if roll < 0.01 else "cancelled" if roll < 0.015 else "ok"
        gaps = None
        if status == "ok" and osl > 1 and rng.random() < 0.02:
            k = np.arange(1, min(osl, 2000))
            gaps = np.round(itl * (1 + k / 4000) * rng.lognormal(0, 0.25, len(k)), 3).tolist()
        rows.append(
            {
                "gateway": gateway,
                "request_id": f"demo-{i:06d}",
                "started_at": datetime.fromtimestamp(started[i] / 1e6, UTC),
                "model": model,
                "engine": engine,
                "tenant": tenants[rng.integers(len(tenants))],
                "isl": isl,
                "osl": 0 if status == "error" else osl,
                "tokens_estimated": False,
                "ttft_ms": ttft,
                "e2e_ms": round(ttft + itl * (osl - 1), 3),
                "itl_ms": itl,
                "queue_ms": round(float(rng.exponential(5)), 3),
                "token_gaps_ms": gaps,
                "status": status,
                "error_type": "http_500" if status == "error" else None,
                "stream": bool(rng.random() < 0.8),
                "cached_tokens": int(isl * rng.random() * 0.3),
                "sample_rate": None,
            }
        )
    return rows


def build_rows() -> tuple[list[dict], Counter, int]:
    """(the rows in file order, invalid reasons and their counts, duplicates)."""
    rng = random.Random(23)
    edges = bucket_edges()
    rows = demo_rows(4800)
    rates = [None, None, None, 1.0, 0.5, 0.25, 0.01, 0.1]
    for i, r in enumerate(rows):
        r["sample_rate"] = 2.0**-56 if i % 997 == 3 else rng.choice(rates)
        if i % 11 == 0:
            r["gateway"] = "gw-eu"
        if i % 20 == 1:
            r["ttft_ms"] = None
        if i % 20 == 2:
            r["e2e_ms"] = None
        if i % 20 == 3:
            r["itl_ms"] = None
        if i % 29 == 4:
            r["engine"] = None
        if i % 31 == 5:
            r["tenant"] = None
        if i % 50 == 6:
            r["isl"] = 0
        if i % 50 == 7:
            r["osl"] = 0
        if i % 50 == 8:
            r["ttft_ms"] = 0.0
        if i % 50 == 9:
            r["itl_ms"] = 0.0
        if i % 13 == 0:  # on and beside the half-octave edges
            r["isl"] = max(0, rng.choice(rollups.HALF_OCTAVE_EDGES) + rng.choice((-1, 0, 1)))
        if i % 60 == 0:
            r["status"], r["error_type"] = "cancelled", None
        if i % 61 == 0:
            r["status"], r["error_type"] = "error", "http_500"
        if i % 37 == 0:
            r["status"] = None  # absent: "ok", as in the canonical record
        if i % 7 == 0 and i < 2800:  # a bucket edge, or the double just below or above it
            edge = edges[rng.randrange(len(edges))]
            v = rng.choice((edge, math.nextafter(edge, 0), math.nextafter(edge, math.inf)))
            r["ttft_ms"] = v
            r["e2e_ms"] = max(v, r["e2e_ms"] or 0.0)
            r["itl_ms"] = edges[rng.randrange(len(edges))]
        if i % 40 == 10:  # gaps across position bins, zeros and edges among them
            size = rng.randrange(1, 300)
            r["token_gaps_ms"] = [
                0.0 if k % 17 == 0 else edges[32000 + rng.randrange(-500, 500)] for k in range(size)
            ]
        if i in (100, 200, 300):
            r["started_at"] = None  # absent: the time it was received
    # Repeated keys: the first row of each wins, as in tokenshape's store.
    copies = [dict(rows[k]) for k in range(0, 1500, 100)]
    changed = [
        {**rows[k], "isl": rows[k]["isl"] + 7, "ttft_ms": None} for k in range(50, 1550, 100)
    ]
    anonymous = [{**rows[k], "request_id": None} for k in range(7, 4807, 480)]
    repeats = [dict(a) for a in anonymous[:5]]
    bad, reasons = _invalid(rows[1], 2)
    out = rows[:2400] + copies + anonymous + rows[2400:] + changed + bad + repeats
    return out, reasons, len(copies) + len(changed) + len(repeats)


def _ndjson(rows: list[dict]) -> bytes:
    """The rows as native records (an absent status or started_at left out)."""
    lines = []
    for r in rows:
        rec = {k: v for k, v in r.items() if k != "gateway"}
        for key in ("status", "started_at"):
            if rec.get(key) is None:
                rec.pop(key, None)
        if rec.get("started_at") is not None:
            rec["started_at"] = rec["started_at"].isoformat().replace("+00:00", "Z")
        lines.append(json.dumps(rec))  # NaN and Infinity as Python writes them
    return ("\n".join(lines) + "\n").encode()


# --- fixtures ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spark():
    """The module's one SparkSession (local[2], bound to 127.0.0.1)."""
    session = runner.session("local[2]", TEST_CONF)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def lake(tmp_path_factory) -> dict:
    """The rows, written as Parquet (the lake) and as NDJSON per gateway (for tokenshape)."""
    root = tmp_path_factory.mktemp("lake")
    rows, reasons, duplicates = build_rows()
    logs = root / "logs" / "dt=2026-11-01"
    logs.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=LAKE_SCHEMA), logs / "part-0.parquet")
    ndjson = {}
    for gateway in sorted({r["gateway"] for r in rows}):
        path = root / f"{gateway}.ndjson"
        path.write_bytes(_ndjson([r for r in rows if r["gateway"] == gateway]))
        ndjson[gateway] = path
    return {
        "root": root,
        "logs": logs,
        "rows": rows,
        "reasons": reasons,
        "duplicates": duplicates,
        "ndjson": ndjson,
    }


@pytest.fixture(scope="module")
def reference(lake, db_template, tmp_path_factory):
    """tokenshape's own rollups of the rows: the native import (rules, dedupe), rebuilt."""
    path = copy_database(db_template, tmp_path_factory.mktemp("ref") / "ref.duckdb")
    db = open_migrated(path)
    stats = [
        import_file(db, p, "ndjson", gateway=g, now=RECEIVED) for g, p in lake["ndjson"].items()
    ]
    con = db.new_cursor()
    yield {
        "con": con,
        "accepted": sum(s.accepted for s in stats),
        "duplicates": sum(s.duplicates for s in stats),
        "rejected": sum(s.rejected for s in stats),
    }
    con.close()
    db.close()


@pytest.fixture(scope="module")
def identity_spec() -> dict:
    """The spec with the identity mapping (the lake holds tokenshape's column names)."""
    return lake_spec.build(mapping.load("identity"))


@pytest.fixture(scope="module")
def lake_run(spark, lake, identity_spec) -> dict:
    """The Spark job over the Parquet logs, both tiers, days in New York."""
    out = lake["root"] / "out"
    summary = job.run(
        spark,
        identity_spec,
        inputs=[str(lake["logs"])],
        output=str(out),
        tz=TZ,
        received_at=RECEIVED,
    )
    return {"out": out, "summary": summary, "spec": identity_spec}


@pytest.fixture(scope="module", autouse=True)
def cluster(lake, tmp_path_factory):
    """The local-cluster run through the CLI, started first and left to work in the
    background: its three JVMs start and warm up while this process builds the reference
    and runs the other tests (the machine's cores are otherwise half idle). The
    local-cluster test waits for it."""
    root = tmp_path_factory.mktemp("cluster")
    out, log = root / "out", root / "log"
    log.mkdir()
    conf = {
        **TEST_CONF,
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.executor.memory": "512m",
    }
    args = [
        *("lake", "rollup", "--master", "local-cluster[2,1,1024]", "--tiers", "hourly"),
        *("--input", str(lake["logs"]), "--output", str(out)),
        *("--from", WINDOW[0], "--to", WINDOW[1], "--received-at", RECEIVED.isoformat()),
        *[a for k, v in conf.items() for a in ("--conf", f"{k}={v}")],
    ]
    with open(log / "stdout", "w") as stdout, open(log / "stderr", "w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "app.cli", *args],
            cwd=ROOT,
            env=clean_env({"SPARK_LOCAL_IP": "127.0.0.1"}),
            stdout=stdout,
            stderr=stderr,
            start_new_session=True,  # its own process group: spark-submit's JVMs with it
        )
    yield proc, out, log
    if proc.poll() is None:  # a failed module: stop the run and the JVMs it started
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)


# --- comparing tables -------------------------------------------------------------------------


def _keyed(con: duckdb.DuckDBPyConnection, relation: str) -> dict[tuple, dict]:
    """Rows of a rollup relation by their key (every column but the measured ones; the hour
    as epoch microseconds)."""
    cur = con.execute(f"SELECT epoch_us(hour) AS hour_us, * EXCLUDE (hour) FROM {relation}")
    names = [d[0] for d in cur.description]
    out = {}
    for row in cur.fetchall():
        rec = dict(zip(names, row, strict=True))
        key = tuple(v for k, v in rec.items() if k not in MEASURED)
        assert key not in out, f"{relation}: key {key} twice"
        out[key] = {k: v for k, v in rec.items() if k in MEASURED}
    return out


def assert_same_rows(
    expected: dict[tuple, dict], got: dict[tuple, dict], what: str, *, empty: bool = False
) -> None:
    """Key for key: counts and maxima exactly, sums within 1e-12 relative."""
    assert expected or empty, f"{what}: no reference rows"
    missing, extra = expected.keys() - got.keys(), got.keys() - expected.keys()
    assert not missing and not extra, (
        f"{what}: {len(missing)} keys missing, {len(extra)} extra; e.g. "
        f"{sorted(missing, key=str)[:3]} / {sorted(extra, key=str)[:3]}"
    )
    for key, want in expected.items():
        have = got[key]
        for col, value in want.items():
            if col in SUMS:
                assert have[col] == pytest.approx(value, rel=1e-12, abs=0), (what, key, col)
            else:
                assert have[col] == value, (what, key, col, have[col], value)


def _parquet(folder: Path) -> str:
    return f"read_parquet('{folder}/day=*/*.parquet', hive_partitioning = false)"


def spark_tables(out: Path, tier: str) -> dict[str, dict[tuple, dict]]:
    """Each table of a tier the job wrote, keyed, read back through DuckDB."""
    con = duckdb.connect()
    try:
        return {
            t: _keyed(con, _parquet(out / tier / t)) if any((out / tier / t).glob("*/*")) else {}
            for t in TABLES
        }
    finally:
        con.close()


SUM_TYPE = {"n": "BIGINT"}  # DuckDB sums BIGINT into HUGEINT
DAY_KEY = "(date_trunc('day', hour AT TIME ZONE '{tz}') AT TIME ZONE '{tz}')"


def daily_reference(con: duckdb.DuckDBPyConnection, table: str, tz: str) -> dict:
    """DuckDB's own hourly rows regrouped by local day in `tz`, without tenant."""
    columns = [c.name for c in lake_spec.TABLES[table].columns]
    keys = [c for c in columns if c not in MEASURED and c not in ("hour", "tenant")]
    aggs = [
        f"max({c}) AS {c}"
        if c in MAXIMA
        else f"sum({c})::{'BIGINT' if c == 'n' else 'DOUBLE'} AS {c}"
        for c in columns
        if c in MEASURED
    ]
    day = DAY_KEY.format(tz=tz)
    sql = (
        f"(SELECT {day} AS hour, {', '.join(keys)}, {', '.join(aggs)} "
        f"FROM rollup_{table} GROUP BY ALL)"
    )
    return _keyed(con, sql)


# --- the tests --------------------------------------------------------------------------------


def test_every_hourly_table_equals_tokenshapes_own_rollups(lake_run, reference):
    got = spark_tables(lake_run["out"], "hourly")
    for table in TABLES:
        expected = _keyed(reference["con"], f"rollup_{table}")
        assert_same_rows(expected, got[table], f"hourly {table}")
    # The rows did carry what the traps are about.
    con = reference["con"]
    (zeros,) = con.execute(
        f"SELECT count(*) FROM rollup_values WHERE b = {rollups.ZERO_BUCKET}"
    ).fetchone()
    (sampled,) = con.execute("SELECT count(*) FROM rollup_shapes WHERE w <> n").fetchone()
    (positions,) = con.execute("SELECT count(DISTINCT pb) FROM rollup_gaps").fetchone()
    (hours,) = con.execute("SELECT count(DISTINCT hour) FROM rollup_shapes").fetchone()
    assert zeros and sampled and positions >= 8 and hours >= 48


def test_the_daily_tier_is_the_hourly_rows_regrouped_by_local_day(lake_run, reference):
    got = spark_tables(lake_run["out"], "daily")
    for table in TABLES:
        expected = daily_reference(reference["con"], table, TZ)
        assert_same_rows(expected, got[table], f"daily {table}")
    # Local midnight in New York: 04:00 UTC in summer time, 05:00 UTC after the change.
    con = duckdb.connect()
    starts = {
        r[0]
        for r in con.execute(
            f"SELECT DISTINCT strftime(hour AT TIME ZONE 'UTC', '%H') FROM "
            f"{_parquet(lake_run['out'] / 'daily' / 'shapes')}"
        ).fetchall()
    }
    con.close()
    assert starts == {"04", "05"}


def test_parquet_layout_columns_and_types(lake_run):
    out = lake_run["out"]
    arrow_of = {
        "timestamp": pa.timestamp("us", tz="UTC"),
        "string": pa.string(),
        "smallint": pa.int16(),
        "bigint": pa.int64(),
        "double": pa.float64(),
    }
    for tier in ("hourly", "daily"):
        for table in TABLES:
            folder = out / tier / table
            days = sorted(p.name for p in folder.iterdir() if p.is_dir())
            assert days and all(d.startswith("day=") for d in days), days
            files = sorted(folder.glob("day=*/*.parquet"))
            assert files and all(f.parent.parent == folder for f in files)
            columns = [
                (c.name, arrow_of[lake_spec.spark_type(c)])
                for c in lake_spec.TABLES[table].columns
                if tier == "hourly" or c.name != "tenant"
            ]
            for f in files:
                assert [(x.name, x.type) for x in pq.read_schema(f)] == columns, f
            meta = pq.ParquetFile(files[0]).schema
            hour = meta.column(0)
            assert hour.name == "hour" and hour.physical_type == "INT64"  # never INT96
            assert "isAdjustedToUTC=true" in str(hour.logical_type)
            assert "microseconds" in str(hour.logical_type)
            assert all(meta.column(i).physical_type != "INT96" for i in range(len(meta)))


def test_manifests_count_rows_reasons_and_hours(lake, lake_run, reference):
    out, summary = lake_run["out"], lake_run["summary"]
    rows = summary["rows"]
    # Every invalid row counted under its reason; tokenshape rejected the same rows.
    assert rows["invalid"] == dict(lake["reasons"])
    assert rows["invalid_total"] == reference["rejected"] == sum(lake["reasons"].values())
    assert rows["duplicates"] == reference["duplicates"] == lake["duplicates"]
    assert rows["used"] == reference["accepted"]
    assert rows["read"] == len(lake["rows"])
    assert rows["valid"] == rows["read"] - rows["invalid_total"]
    assert rows["outside_window"] == 0 and rows["skipped_by_where"] == 0
    (listed,) = summary["input"]["files"]  # Spark's inputFiles(): URIs, quoted
    assert unquote(listed) == f"file://{lake['logs'] / 'part-0.parquet'}"
    root = json.loads((out / "_manifest.json").read_text())
    assert root["run_id"] == summary["run_id"] and root["rows"] == rows
    con = duckdb.connect()
    for tier in ("hourly", "daily"):
        manifest = json.loads((out / tier / "_manifest.json").read_text())
        assert manifest["schema_version"] == 1 and manifest["tier"] == tier
        assert manifest["constants"] == {
            "gamma": rollups.GAMMA,
            "zero_bucket": rollups.ZERO_BUCKET,
            "bucket_limit": rollups.BUCKET_LIMIT,
            "half_octave_edges": list(rollups.HALF_OCTAVE_EDGES),
            "position_edges": list(rollups.POSITION_EDGES),
            "measures": list(rollups.MEASURES),
        }
        assert manifest["tz"] == ("UTC" if tier == "hourly" else TZ)
        assert manifest["runs"][0]["input"]["files"] == summary["input"]["files"]
        assert manifest["runs"][0]["rows"] == rows
        assert manifest["tokenshape_version"] == lake_spec.tokenshape_version()
        for table in TABLES:
            counted = dict(
                con.execute(
                    f"SELECT day, count(*) FROM read_parquet('{out / tier / table}/day=*/"
                    "*.parquet', hive_partitioning = true) GROUP BY day"
                ).fetchall()
            )
            listed = {d: p["rows"][table] for d, p in manifest["partitions"].items()}
            assert {d: n for d, n in listed.items() if n} == {str(d): n for d, n in counted.items()}
            assert manifest["rows"][table] == sum(counted.values())
    con.close()
    # Hours covered: from the first row's hour to the last's (the absent started_at rows
    # took the receive time).
    hourly = json.loads((out / "hourly" / "_manifest.json").read_text())
    assert hourly["covered"]["from"] == "2026-10-31T12:00:00Z"
    assert hourly["covered"]["to"] == "2026-11-03T07:00:00Z"
    assert hourly["partitions"]["2026-11-01"]["complete"] is True
    assert hourly["partitions"]["2026-10-31"]["hours"] == 12
    days = json.loads((out / "daily" / "_manifest.json").read_text())["partitions"]
    assert days["2026-11-01"]["hours_in_day"] == 25 and days["2026-11-01"]["complete"] is True
    assert days["2026-10-31"]["hours_in_day"] == 24 and days["2026-10-31"]["complete"] is False


def _in_window(con: duckdb.DuckDBPyConnection) -> int:
    (inside,) = con.execute(
        "SELECT count(*) FROM requests WHERE started_at >= ? AND started_at < ?", list(WINDOW)
    ).fetchone()
    return inside


def test_a_window_rerun_replaces_its_days_and_keeps_the_others(
    spark, lake, lake_run, reference, tmp_path
):
    """A run into a folder that holds an earlier one replaces the days its window covers;
    the manifest keeps the other days with the run that wrote them, and the folder again
    holds exactly tokenshape's rows."""
    out = tmp_path / "out"
    shutil.copytree(lake_run["out"], out)
    before = json.loads((out / "hourly" / "_manifest.json").read_text())
    summary = job.run(
        spark,
        lake_run["spec"],
        inputs=[str(lake["logs"])],
        output=str(out),
        start=WINDOW[0],
        end=WINDOW[1],
        tiers=("hourly",),
        received_at=RECEIVED,
    )
    assert summary["rows"]["used"] == _in_window(reference["con"])
    after = json.loads((out / "hourly" / "_manifest.json").read_text())
    assert after["partitions"].keys() == before["partitions"].keys()
    assert after["partitions"]["2026-11-01"]["run_id"] == summary["run_id"]
    assert after["partitions"]["2026-10-31"] == before["partitions"]["2026-10-31"]
    assert {r["run_id"] for r in after["runs"]} == {summary["run_id"], before["runs"][0]["run_id"]}
    got = spark_tables(out, "hourly")
    for table in TABLES:
        expected = _keyed(reference["con"], f"rollup_{table}")
        assert_same_rows(expected, got[table], f"hourly {table} after the rerun")


def _litellm_payloads() -> tuple[list[dict], int]:
    """LiteLLM payloads over 30 hours: streamed or not, failures without usage, sampled,
    hosts with and without a scheme, a missing model group, repeats; and how many are bad."""
    rng = random.Random(5)
    out = []
    for i in range(600):
        start = LITELLM_START + i * 180 + rng.random()
        p = litellm_payload(
            i,
            prompt_tokens=rng.randrange(0, 9000),
            completion_tokens=rng.randrange(1, 900),
            startTime=start,
            endTime=start + rng.uniform(0.2, 30),
            completionStartTime=start + rng.uniform(0.01, 0.2),
            stream=i % 4 != 0,
            api_base=["http://vllm-a:8000/v1", "vllm-b:8000/v1", "https://c.example/v1"][i % 3],
        )
        if i % 9 == 0:
            p["metadata"] = {"user_api_key_alias": "team-x", "sample_rate": 0.25}
        if i % 10 == 0:
            p["metadata"] = {"spend_logs_metadata": {"sample_rate": 0.5}}
        if i % 15 == 0:
            p.update(status="failure", error_str="boom")
            p.pop("prompt_tokens")
            p.pop("completion_tokens")
        if i % 17 == 0:
            p["model_group"] = None
        out.append(p)
    out += [dict(out[k]) for k in (3, 30, 300)]  # repeats of an id: the first counts
    out.append({**litellm_payload(900), "startTime": LITELLM_START, "prompt_tokens": -3})
    return out, 1


def test_litellm_payloads_through_the_shipped_mapping(spark, tmp_path, db_template):
    payloads, bad = _litellm_payloads()
    body = ("\n".join(json.dumps(p) for p in payloads) + "\n").encode()
    logs = tmp_path / "litellm.ndjson"
    logs.write_bytes(body)
    db = open_migrated(copy_database(db_template, tmp_path / "litellm.duckdb"))
    try:
        parsed = litellm.parse(
            body, ndjson=True, gateway="litellm", received_at=LATE_RECEIVED, max_items=10_000
        )
        con = db.new_cursor()
        (stored,) = RequestStore(con).write(
            [
                Batch(
                    "litellm",
                    "litellm",
                    LATE_RECEIVED,
                    parsed.rows,
                    parsed.rejects,
                    parsed.hashes,
                )
            ]
        )
        rollups.rebuild_all(con)
        assert stored.rejected == bad and stored.duplicates == 3
        built = lake_spec.build(mapping.load("litellm"))
        summary = job.run(
            spark,
            built,
            inputs=[str(logs)],
            output=str(tmp_path / "out"),
            fmt="json",
            tiers=("hourly",),
            received_at=LATE_RECEIVED,
        )
        assert summary["rows"]["invalid"] == {"isl: must be from 0 to 10,000,000": bad}
        assert summary["rows"]["duplicates"] == 3 and summary["rows"]["used"] == stored.accepted
        got = spark_tables(tmp_path / "out", "hourly")
        for table in TABLES:
            expected = _keyed(con, f"rollup_{table}")
            # LiteLLM logs no per-token gaps: that table is empty both ways.
            assert_same_rows(expected, got[table], f"litellm {table}", empty=table == "gaps")
        (sampled,) = con.execute("SELECT count(*) FROM rollup_shapes WHERE w <> n").fetchone()
        assert sampled  # both sample_rate places were read
        con.close()
    finally:
        db.close()


def _span(i: int, attrs: dict, **extra) -> dict:
    """One OTLP/JSON span with these attributes (ints as text, as OTLP/JSON writes them)."""
    start = int(datetime(2026, 11, 20, 8, tzinfo=UTC).timestamp() * 10**9) + i * 37 * 10**9 + i
    values = []
    for key, value in attrs.items():
        if isinstance(value, bool):
            values.append({"key": key, "value": {"boolValue": value}})
        elif isinstance(value, int):
            values.append({"key": key, "value": {"intValue": str(value)}})
        elif isinstance(value, float):
            values.append({"key": key, "value": {"doubleValue": value}})
        else:
            values.append({"key": key, "value": {"stringValue": value}})
    return {
        "traceId": f"{i:032x}",
        "spanId": f"{i + 0xA0:016X}",
        "name": "chat",
        "kind": 3,
        "startTimeUnixNano": str(start),
        "endTimeUnixNano": str(start + 1_234_567_891 + i * 1000),
        "attributes": values,
        **extra,
    }


def _otlp_export() -> dict:
    """An OTLP/JSON trace export as the Collector's file exporter writes it: GenAI spans in
    their variants, a span that is no GenAI operation, and a few that are invalid."""
    spans = []
    for i in range(60):
        attrs: dict = {
            "gen_ai.request.model": ["llama", "qwen"][i % 2],
            "gen_ai.usage.input_tokens": 100 + 7 * i,
            "gen_ai.usage.output_tokens": 20 + i,
            "server.address": ["vllm-a", "vllm-b", ""][i % 3],
            "gen_ai.system": "vllm",
        }
        if i % 4 == 0:
            attrs["gen_ai.response.time_to_first_chunk"] = 0.05 + i / 1000
        if i % 5 == 0:
            attrs["gen_ai.response.id"] = f"resp-{i}"
        if i % 6 == 0:
            attrs["sampling.probability"] = 0.25
        if i % 7 == 0:
            attrs["SampleRate"] = 10
        if i % 8 == 0:
            del attrs["gen_ai.usage.input_tokens"]
            attrs["gen_ai.usage.prompt_tokens"] = 55.0  # a JavaScript SDK's double
        extra = {}
        if i % 9 == 0:  # failed, without usage: counted with 0 tokens
            extra = {"status": {"code": 2, "message": "boom"}}
            attrs.pop("gen_ai.usage.output_tokens", None)
        spans.append(_span(i, attrs, **extra))
    spans.append(_span(100, {"http.route": "/health"}))  # no GenAI operation: skipped
    spans.append(_span(101, {"gen_ai.request.model": "m"}))  # no usage, not failed: invalid
    spans.append(
        _span(
            102,
            {
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 1.5,
                "gen_ai.usage.output_tokens": 1,
            },
        )
    )  # fractional tokens: invalid
    spans.append(
        _span(
            103,
            {
                "gen_ai.request.model": "m",
                "gen_ai.usage.input_tokens": 1,
                "gen_ai.usage.output_tokens": 1,
                "SampleRate": -2,
            },
        )
    )  # invalid
    half = len(spans) // 2
    return {
        "resourceSpans": [
            {"resource": {"attributes": []}, "scopeSpans": [{"spans": spans[:half]}]},
            {"scopeSpans": [{"scope": {"name": "x"}, "spans": spans[half:]}]},
        ]
    }


def test_an_otel_collector_file_reads_as_tokenshapes_otlp_route(spark, tmp_path):
    """The shipped otel-file mapping gives the records tokenshape's OTLP route makes of the
    same export: field for field, the same spans skipped and refused."""
    body = json.dumps(_otlp_export()).encode()
    parsed, ignored = otlp.parse(
        body, json_body=True, gateway="otel", received_at=LATE_RECEIVED, max_items=10_000
    )
    path = tmp_path / "traces.json"
    path.write_bytes(body + b"\n")
    built = lake_spec.build(mapping.load("otel-file"))
    received_us = int(LATE_RECEIVED.timestamp()) * 10**6
    checked, _ = job.map_rows(job.read_input(spark, [str(path)], "json"), built, received_us)
    tally = Counter(
        (r["__ts_skip"], r["__ts_reason"])
        for r in checked.select("__ts_skip", "__ts_reason").collect()
    )
    assert sum(n for (skip, _), n in tally.items() if skip) == ignored == 1
    invalid = sum(n for (skip, reason), n in tally.items() if not skip and reason)
    assert invalid == len(parsed.rejects) == 3, tally
    fields = ["request_id", "model", "engine", "isl", "osl", "ttft_ms", "e2e_ms", "status"]
    fields += ["sample_rate"]
    got = {
        r["request_id"]: r
        for r in checked.filter("NOT __ts_skip AND __ts_reason IS NULL")
        .select(*fields, "started_us")
        .collect()
    }
    want = parsed.rows.to_pylist()
    assert len(want) == len(got) == 60
    for rec in want:
        row = got[rec["request_id"]]
        for field in fields:
            assert row[field] == rec[field], (rec["request_id"], field, row[field], rec[field])
        started = (rec["started_at"] - EPOCH) // timedelta(microseconds=1)
        assert row["started_us"] == started, rec["request_id"]


def test_a_mapping_that_does_not_fit_names_the_field(spark, lake):
    bad = mapping.check(
        {
            "version": 1,
            "columns": {
                "gateway": {"const": "g"},
                "model": "model",
                "isl": "usage.prompt_tokens",
                "osl": "osl",
                "started_at": "started_at",
            },
        }
    )
    with pytest.raises(job.MappingError, match=r"columns\.isl: column 'usage\.prompt_tokens'"):
        job.run(
            spark,
            lake_spec.build(bad),
            inputs=[str(lake["logs"])],
            output=str(lake["root"] / "never"),
        )
    assert not (lake["root"] / "never").exists()


def test_every_bucket_edge_and_its_neighbours_bucket_alike(spark, tmp_path, identity_spec):
    edges = np.array(bucket_edges())
    values = np.concatenate(
        [edges, np.nextafter(edges, 0), np.nextafter(edges, np.inf), [0.0, 1.0, 1e300]]
    )
    con = duckdb.connect()
    want = duckdb_buckets(con, values)
    con.close()
    # The table is what DuckDB says: edge b is in bucket b, the double below it in b - 1.
    first = -rollups.BUCKET_LIMIT
    n = len(edges)
    assert (want[:n] == np.arange(first, first + n)).all()
    assert (want[n + 1 : 2 * n] == np.arange(first, first + n - 1)).all()
    path = tmp_path / "values.parquet"
    pq.write_table(pa.table({"i": np.arange(len(values)), "v": values}), path)
    c = identity_spec["constants"]
    frame = job.bucketed(
        spark.read.parquet(str(path)), "v", "b", job.edges_frame(spark, identity_spec), c
    )
    got = frame.select("i", "b").toArrow().sort_by("i")
    assert got.column("b").to_pylist() == want.tolist()
    # The table's row made without pyarrow on the driver holds the same doubles.
    (row,) = job.edges_row(spark, identity_spec, arrow=False).collect()
    assert row[0] == list(bucket_edges())


def test_without_java_the_cli_says_what_to_install(tmp_path):
    proc = cli(
        "lake",
        "rollup",
        "--input",
        str(tmp_path),
        "--output",
        str(tmp_path / "out"),
        check=False,
        env={"JAVA_HOME": str(tmp_path / "no-java")},
    )
    assert proc.returncode == 2
    assert "install tokenshape[lake]" in proc.stderr and "Java 17+" in proc.stderr


def test_a_wrong_mapping_key_is_named_before_spark_starts(tmp_path):
    path = tmp_path / "m.yaml"
    path.write_text("version: 1\ncolumns:\n  model: model\n  tenat: team\n")
    proc = cli(
        "lake", "spec", "--columns", str(path), "--out", str(tmp_path / "s.json"), check=False
    )
    assert proc.returncode == 2
    assert "columns: unknown key 'tenat' (did you mean 'tenant'?)" in proc.stderr
    assert not (tmp_path / "s.json").exists()


def test_a_window_on_a_local_cluster_through_the_cli(cluster, reference):
    """`tokenshape lake rollup --master local-cluster[2,1,1024] --from … --to …`: spark-submit
    runs job.py with a driver and two executors in JVMs of their own; only rows started in
    the window count, and its hours are exactly tokenshape's rows of those hours."""
    proc, out, log = cluster
    try:
        code = proc.wait(timeout=600)
    except subprocess.TimeoutExpired:
        pytest.fail("the local-cluster run did not finish in 10 minutes")
    stdout = (log / "stdout").read_text()
    assert code == 0 and "lake rollup: " in stdout, stdout + (log / "stderr").read_text()
    summary = json.loads((out / "_manifest.json").read_text())
    assert summary["spark"]["master"] == "local-cluster[2,1,1024]"
    assert summary["spark"]["executors"] == 2, summary["spark"]
    con = reference["con"]
    inside = _in_window(con)
    assert summary["rows"]["used"] == inside
    assert summary["rows"]["outside_window"] == reference["accepted"] - inside
    manifest = json.loads((out / "hourly" / "_manifest.json").read_text())
    assert list(manifest["partitions"]) == ["2026-11-01"]
    assert manifest["partitions"]["2026-11-01"]["complete"] is True
    got = spark_tables(out, "hourly")
    for table in TABLES:
        expected = _keyed(con, f"(SELECT * FROM rollup_{table} WHERE {HOURS_IN_WINDOW})")
        assert_same_rows(expected, got[table], f"hourly {table} of the window")
