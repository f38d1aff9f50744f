"""The lake job's spec and column mappings (app/lake): checked before any JVM starts, and
kept equal to what tokenshape itself defines (the job is standalone and cannot import it)."""

from __future__ import annotations

import ast
import sys
import typing
from pathlib import Path

import pytest

from app.lake import job, mapping, runner
from app.lake import spec as lake_spec
from app.storage import rollups, schema
from ingest import records

IDENTITY = {"gateway": "gateway", "model": "model", "isl": "isl", "osl": "osl"}


def _check(columns: dict | None = None, **top) -> dict:
    return mapping.check(
        {"version": 1, "columns": {**IDENTITY, "started_at": "t", **(columns or {})}, **top}
    )


def test_the_job_reads_the_fields_the_mapping_checks():
    assert mapping.FIELDS == tuple(job.FIELDS)
    assert set(mapping.REQUIRED) - {"started_at"} == {
        f for f, (_, req) in job.FIELDS.items() if req
    }
    assert mapping.UNITS == tuple(job.UNITS) and mapping.TIME_FORMATS == job.TIME_FORMATS


def test_the_spec_holds_tokenshapes_own_constants_and_tables():
    built = lake_spec.build(mapping.load("identity"))
    c = built["constants"]
    assert c["gamma"] == rollups.GAMMA and c["zero_bucket"] == rollups.ZERO_BUCKET
    assert c["bucket_limit"] == rollups.BUCKET_LIMIT
    assert c["half_octave_edges"] == list(rollups.HALF_OCTAVE_EDGES)
    assert c["position_edges"] == list(rollups.POSITION_EDGES)
    assert c["measures"] == list(rollups.MEASURES)
    assert str(c["ln_gamma"]) in rollups.bucket_sql("v")  # the very divisor DuckDB uses
    # The canonical record's bounds that live in ingest/records.py.
    assert c["max_gaps"] == records.MAX_GAPS and c["min_sample_rate"] == records.MIN_SAMPLE_RATE
    assert c["max_tokens"] == schema.MAX_TOKENS
    (name_meta,) = typing.get_args(records.Name)[1:]
    assert c["name_max"] == name_meta.max_length and name_meta.min_length == 1
    status = typing.get_type_hints(records.RecordIn)["status"]
    assert tuple(c["statuses"]) == typing.get_args(status)
    for name, table in lake_spec.TABLES.items():
        assert [n for n, _ in built["tables"][name]] == [col.name for col in table.columns]
    assert built["tables"]["values"][6] == ["measure", "smallint"]
    assert built["tables"]["shapes"][0] == ["hour", "timestamp"]
    edges = built["edges"]
    assert len(edges) == 2 * rollups.BUCKET_LIMIT + 1
    assert all(a < b for a, b in zip(edges, edges[1:], strict=False))
    assert job.load_spec(lake_spec.json.dumps(built))["edges"] == edges


def test_job_py_imports_only_pyspark_and_the_standard_library():
    tree = ast.parse(Path(job.__file__).read_text())
    optional = set()  # imported inside `try: … except ImportError`
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
            isinstance(h.type, ast.Name) and h.type.id == "ImportError" for h in node.handlers
        ):
            for inner in ast.walk(node):
                if isinstance(inner, ast.Import | ast.ImportFrom):
                    optional.add(id(inner))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        for name in names:
            top = name.split(".")[0]
            if top == "pyarrow":  # pyspark's SQL extra: a faster path when it is there
                assert id(node) in optional, name
                continue
            assert top == "pyspark" or top in sys.stdlib_module_names or top == "__future__", name


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"version": 2, "columns": IDENTITY}, "version: must be 1"),
        ({"version": 1, "colums": IDENTITY}, "unknown key 'colums' (did you mean 'columns'?)"),
        ({"version": 1, "columns": {"model": "m"}}, "gateway, isl, osl, started_at not mapped"),
    ],
)
def test_a_wrong_mapping_is_named(raw, message):
    with pytest.raises(
        mapping.MappingError,
        match=message.replace("(", r"\(").replace(")", r"\)").replace("?", r"\?"),
    ):
        mapping.check(raw)


@pytest.mark.parametrize(
    ("columns", "top", "message"),
    [
        ({"tenat": "t"}, {}, "columns: unknown key 'tenat' (did you mean 'tenant'?)"),
        ({"isl": {"column": "a", "expr": "b"}}, {}, "columns.isl: give exactly one of"),
        ({"isl": {"colum": "a"}}, {}, "columns.isl: unknown key 'colum'"),
        ({"model": {"column": "a", "unit": "s"}}, {}, "columns.model.unit: only ttft_ms"),
        ({"ttft_ms": {"column": "a", "unit": "min"}}, {}, "columns.ttft_ms.unit: must be one of"),
        ({"isl": {"column": "a", "time": "iso"}}, {}, "columns.isl.time: only started_at"),
        ({"started_at": {"column": "a", "time": "unix"}}, {}, "columns.started_at.time: must be"),
        ({"model": {"column": "a", "optional": True}}, {}, "model is required"),
        ({"tenant": {"coalesce": "a"}}, {}, "columns.tenant.coalesce: must be a list"),
        ({"tenant": {"const": [1]}}, {}, "columns.tenant.const: must be text"),
        ({"tenant": ""}, {}, "columns.tenant: an empty column name"),
        ({}, {"explode": [{"as": "a b", "from": "x"}]}, "explode[0].as: must be a plain name"),
        ({}, {"explode": {"as": "a"}}, "explode: must be a list"),
        ({}, {"let": {"9x": "1"}}, "let.9x: a name must be plain"),
        ({}, {"where": ""}, "where: must be a Spark SQL condition"),
        ({}, {"format": "csv"}, "format: must be one of parquet, json"),
    ],
)
def test_a_wrong_entry_is_named_by_its_key(columns, top, message):
    with pytest.raises(mapping.MappingError) as err:
        _check(columns, **top)
    assert message in str(err.value)


def test_the_shipped_mappings_load_and_a_file_names_itself(tmp_path):
    assert set(mapping.BUILTIN) == {"identity", "litellm", "otel-file"}
    for name in mapping.BUILTIN:
        assert mapping.load(name)["columns"]["gateway"]
    bad = tmp_path / "m.yaml"
    bad.write_text("version: 1\ncolumns: [model]\n")
    with pytest.raises(mapping.MappingError, match=f"{bad}: columns: must map"):
        mapping.load(bad)
    with pytest.raises(mapping.MappingError, match="no such mapping file; the shipped ones"):
        mapping.load(tmp_path / "missing.yaml")
    entry = _check({"tenant": "metadata.team", "ttft_ms": {"column": "t", "unit": "s"}})
    assert entry["columns"]["tenant"] == {"column": "metadata.team"}
    assert entry["columns"]["ttft_ms"] == {"column": "t", "unit": "s"}


def test_spark_submit_lines(tmp_path):
    options = {
        "inputs": ["s3a://logs/a/", "s3a://logs/b/"],
        "output": "s3a://lake/out",
        "fmt": "json",
        "start": "2026-11-01",
        "end": None,
        "tiers": ("hourly", "daily"),
        "tz": "Europe/Paris",
        "received_at": None,
    }
    spec = tmp_path / "spec.json"
    yarn = runner.submit_command(spec, "yarn", {"spark.executor.memory": "8g"}, **options)
    assert yarn[0].endswith("bin/spark-submit") and yarn[1:3] == ["--master", "yarn"]
    assert "spark.executor.memory=8g" in yarn and runner.FAST_JVM not in " ".join(yarn)
    job_at = yarn.index(str(runner.JOB))
    assert yarn[job_at + 1 :] == [
        *("--spec", str(spec), "--output", "s3a://lake/out", "--format", "json"),
        *("--input", "s3a://logs/a/", "--input", "s3a://logs/b/"),
        *("--tiers", "hourly,daily", "--tz", "Europe/Paris", "--from", "2026-11-01"),
    ]
    # The job parses what the runner writes.
    args = job.build_parser().parse_args(yarn[job_at + 1 :])
    assert args.input == ["s3a://logs/a/", "s3a://logs/b/"] and args.start == "2026-11-01"
    local = runner.submit_command(spec, "local-cluster[2,1,1024]", {}, **options)
    assert f"spark.executor.extraJavaOptions={runner.FAST_JVM}" in local
    assert runner.is_local("local[4]") and runner.is_local("local[*]") and runner.is_local("local")
    assert not runner.is_local("local-cluster[2,1,1024]") and not runner.is_local("yarn")


def test_java_is_looked_for_where_it_is_said_to_be(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    assert runner.java_version() is None
    with pytest.raises(runner.LakeUnavailable, match=r"install tokenshape\[lake\].*Java 17\+"):
        runner.check_runtime()
