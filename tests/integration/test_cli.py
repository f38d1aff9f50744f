"""The tokenshape command as a user runs it: tokens, imports, the demo, recommend, seasonal,
and a database file another process holds."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import duckdb
import pytest

from tests.support.cli import cli
from tests.support.database import copy_database
from tests.support.paths import ROOT
from tests.support.records import batch

AZURE = ROOT.parent / "shared" / "data" / "azure-llm-inference-2023" / "conv.csv"

if not AZURE.exists():  # CI lays shared/ beside the clone
    AZURE = ROOT / ".." / "shared" / "data" / "azure-llm-inference-2023" / "conv.csv"


def test_token_create_list_revoke(tmp_path):
    db = str(tmp_path / "t.duckdb")
    out = cli("token", "create", "--gateway", "edge", "--scope", "ingest", "--db", db).stdout
    token = out.strip().splitlines()[-1]
    assert token.startswith("tks_") and len(token) == 42
    listing = cli("token", "list", "--db", db).stdout
    assert "edge" in listing and token not in listing and token[4:20] not in listing
    stored = duckdb.connect(db).execute("SELECT token_hash FROM tokens").fetchone()[0]
    assert token not in stored and len(stored) == 64
    token_id = listing.split()[0]
    assert "revoked" in cli("token", "revoke", token_id, "--db", db).stdout
    assert "revoked" in cli("token", "list", "--db", db).stdout
    bad = cli("token", "create", "--gateway", "x", "--scope", "root", "--db", db, check=False)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr


def test_import_azure_trace_then_again(tmp_path):
    if not AZURE.exists():
        pytest.skip("shared Azure trace not present")
    db = str(tmp_path / "a.duckdb")
    first = cli("import", str(AZURE), "--format", "azure", "--db", db).stdout
    assert "19,366 stored" in first and "azure-llm-inference-2023" in first
    again = cli("import", str(AZURE), "--db", db).stdout  # auto-detected, all duplicates
    assert "0 stored, 19,366 duplicates" in again
    con = duckdb.connect(db)
    isl_max, first_time = con.execute("SELECT max(isl), min(started_at) FROM requests").fetchone()
    assert isl_max > 1000
    assert first_time.isoformat().startswith("2023-11-16T18:15:46.680590")


def test_import_ndjson_with_bad_lines(tmp_path):
    path = tmp_path / "r.ndjson"
    good = batch(3)
    lines = [__import__("json").dumps(r) for r in good] + ['{"model": "m", "isl": -5, "osl": 1}']
    path.write_text("\n".join(lines) + "\n")
    out = cli("import", str(path), "--db", str(tmp_path / "n.duckdb")).stdout
    assert "3 stored" in out and "1 rejected" in out and "isl" in out


def test_demo_is_deterministic_and_idempotent(tmp_path):
    a, b = str(tmp_path / "a.duckdb"), str(tmp_path / "b.duckdb")

    def demo(db: str) -> str:
        return cli("demo", "--db", db, "--requests", "3000", "--days", "14", "--seed", "7").stdout

    with ThreadPoolExecutor(2) as pool:  # two processes, two files: they may run side by side
        outs = list(pool.map(demo, (a, b)))
    for out in outs:
        assert "3,000 requests stored" in out
    q = (
        "SELECT request_id, model, engine, isl, osl, round(ttft_ms, 3) FROM requests "
        "ORDER BY request_id"
    )
    assert duckdb.connect(a).execute(q).fetchall() == duckdb.connect(b).execute(q).fetchall()
    again = cli("demo", "--db", a, "--requests", "3000", "--seed", "7").stdout
    assert "0 requests stored (3,000 already there)" in again


def test_demo_has_what_later_pages_need(tmp_path):
    db = str(tmp_path / "d.duckdb")
    cli("demo", "--db", db, "--requests", "40000", "--days", "14")
    con = duckdb.connect(db)
    engines = dict(con.execute("SELECT engine, count(*) FROM requests GROUP BY 1").fetchall())
    assert set(engines) == {"chat-8b", "llm-70b", "code-7b", "guard-8b"}
    days = con.execute(
        "SELECT date_diff('day', min(started_at), max(started_at)) FROM requests"
    ).fetchone()[0]
    assert days >= 13
    err = con.execute("SELECT avg((status = 'error')::int) FROM requests").fetchone()[0]
    assert 0.002 < err < 0.01
    # Night batch on llm-70b is longer than its daytime RAG traffic: a split to find.
    night, day = con.execute(
        "SELECT median(isl) FILTER (WHERE hour(started_at) IN (23, 0, 1, 2, 3, 4)), "
        "median(isl) FILTER (WHERE hour(started_at) BETWEEN 10 AND 16) "
        "FROM requests WHERE engine = 'llm-70b'"
    ).fetchone()
    assert night > 1.8 * day
    # Latency physics: TTFT grows with ISL, E2E ~ TTFT + ITL x (OSL - 1).
    corr = con.execute(
        "SELECT corr(ttft_ms, isl) FROM requests WHERE engine = 'llm-70b'"
    ).fetchone()[0]
    assert corr > 0.5
    off = con.execute(
        "SELECT max(abs(e2e_ms - (ttft_ms + itl_ms * (osl - 1))) / e2e_ms) FROM requests "
        "WHERE status = 'ok' AND osl > 1"
    ).fetchone()[0]
    assert off < 0.001  # only the 3-decimal rounding of the stored values
    gaps = con.execute(
        "SELECT count(*) FILTER (WHERE len(token_gaps_ms) = osl - 1), "
        "count(token_gaps_ms) FROM requests"
    ).fetchone()
    assert gaps[1] > 0 and gaps[0] == gaps[1]


def test_recommend_prints_the_verdict_commands_and_json(tmp_path, demo_template):
    # What `tokenshape demo --requests 20000` stores (14 days to this hour, seed 1), seeded
    # once for the session: the command under test here is recommend.
    template = demo_template(requests=20000, days=14, end=None)
    db = str(copy_database(template, tmp_path / "r.duckdb"))
    out = cli("recommend", "--engine", "chat-8b", "--db", db).stdout
    assert out.startswith("chat-8b: ") and "Built for 3,072-token prompts" in out
    assert "max_seq_len" in out and "vllm serve meta-llama/Llama-3.1-8B-Instruct" in out
    as_json = json.loads(cli("recommend", "--engine", "chat-8b", "--db", db, "--json").stdout)
    assert as_json["status"] in {"rebuild-suggested", "fits", "misses-slo"}
    assert as_json["current"]["max_input_len"] == 3072
    assert as_json["recommended"]["max_input_len"] < 3072
    missing = cli("recommend", "--engine", "nope", "--db", db, check=False)
    assert missing.returncode == 1 and "has no profile" in missing.stderr
    bad = cli("recommend", "--engine", "chat-8b", "--since", "2x", "--db", db, check=False)
    assert bad.returncode == 2 and "--since '2x'" in bad.stderr
    assert "Traceback" not in missing.stderr + bad.stderr


def test_seasonal_prints_plans_and_json(tmp_path, demo_template):
    # What `tokenshape demo --requests 20000 --days 28` stores, seeded once for the session.
    template = demo_template(requests=20000, days=28, end=None)
    db = str(copy_database(template, tmp_path / "s.duckdb"))
    out = cli("seasonal", "--engine", "llm-70b", "--db", db).stdout
    assert out.startswith("llm-70b: Run one engine")
    assert "static" in out and "hourly" in out and "seasonal" in out
    body = json.loads(cli("seasonal", "--engine", "llm-70b", "--db", db, "--json").stdout)
    assert body["plans"]["seasonal"]["windows"][0]["max_seq_len"] > 0
    missing = cli("seasonal", "--engine", "nope", "--db", db, check=False)
    assert missing.returncode == 1 and "has no profile" in missing.stderr
    huge = cli("seasonal", "--engine", "llm-70b", "--weeks", "100000000", "--db", db, check=False)
    assert huge.returncode == 2 and "--weeks" in huge.stderr and "Traceback" not in huge.stderr


def test_locked_database_gets_one_clear_line(live):
    # The server (in this test process) holds the file, as a running `tokenshape serve` does.
    proc = cli("token", "list", "--db", str(live.database.path), check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 2 and "in use by process" in lines[0]
    assert "POST /v1/requests" in lines[0]
    assert "Admin page (/admin)" in lines[1] and "/api/tokens" in lines[1]


def test_a_bad_report_schedule_stops_serve_before_it_touches_the_file(tmp_path):
    db = tmp_path / "never.duckdb"
    env = {"TOKENSHAPE_REPORT_CRON": "0 25 * * 1"}
    out = cli("serve", "--db", str(db), "--port", "1", check=False, env=env)
    assert out.returncode == 2
    assert out.stderr.strip() == (
        "error: invalid setting: report_cron: report schedule: hour '25' is outside 0-23"
    )
    assert not db.exists() and "serving" not in out.stdout
    # A command that does not send email is not held up by the email's schedule.
    assert cli("migrate", "--db", str(db), env=env).returncode == 0


def test_engine_set_refuses_bad_names_and_numbers_as_the_api_does(db_path):
    db = ["--db", str(db_path)]
    fields = ["model=llama-3.1-8b", "gpu=H100"]
    for name, words in (
        ("..", "'..' is not a name"),
        ("x" * 257, "257 characters; at most 256"),
    ):
        out = cli("engine", "set", *db, name, *fields, check=False)
        assert out.returncode == 2 and f"error: engine name: {words}" in out.stderr, out.stderr
    out = cli("engine", "set", *db, "a/b", *fields, check=False)
    assert out.returncode == 2, out.stderr
    assert "error: engine name 'a/b' holds '/': a profile cannot be saved for it" in out.stderr
    huge = cli("engine", "set", *db, "x", *fields, "gpu_memory_gib=1e308", check=False)
    assert huge.returncode == 2
    assert "gpu_memory_gib: Input should be less than or equal to 4096" in huge.stderr
    ok = cli("engine", "set", *db, "api.example.com", *fields)  # a hostname: dots are fine
    assert json.loads(ok.stdout)["gpu"] == "H100"
    assert "Traceback" not in huge.stderr
