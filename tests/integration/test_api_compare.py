"""GET /api/compare on a real server over demo traffic, with benchmark runs brought in as a user
would: AIPerf exports through `tokenshape import` (a subprocess) and a load generator's records
through POST /v1/requests. Every figure is checked against the same rows read another way (the
other API routes, or SQL on the live file)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import numpy as np
import pytest

from tests.support.benchmark_run import aiperf_export
from tests.support.cli import cli
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.records import record
from tests.support.server import LiveServer, serve, server_settings

START = END - timedelta(days=7)
RUN = END + timedelta(days=1, hours=10)  # the benchmark ran the day after the window
BENCH_REQUESTS, BENCH_ERRORS = 400, 5
ENGINE_ROWS = 30  # a load generator's records naming the engine, after the default window


@pytest.fixture(scope="module")
def compare_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """Demo traffic to END, two AIPerf runs imported, and the server's clock at END."""
    tmp = tmp_path_factory.mktemp("compare")
    db = copy_database(demo_template(requests=5000, days=14), tmp / "t.duckdb")
    run = aiperf_export(
        tmp / "profile_export.jsonl",
        requests=BENCH_REQUESTS,
        start=RUN,
        isl_median=420,
        osl_median=380,
        sigma=0.5,
        ttft_ms=500.0,  # some of them above chat-8b's 800 ms TTFT target
        errors=BENCH_ERRORS,
    )
    out = cli(
        "import", str(run), "--format", "aiperf", "--gateway", "aiperf-replay", "--db", str(db)
    )
    assert f"{BENCH_REQUESTS + BENCH_ERRORS:,} stored" in out.stdout
    other = aiperf_export(
        tmp / "other.jsonl", requests=50, start=RUN, isl_median=2000, osl_median=50, model="mystery"
    )
    cli("import", str(other), "--format", "aiperf", "--gateway", "bench-other", "--db", str(db))
    gen = serve(server_settings(db), wait=False, clock=lambda: END)
    server = next(gen)
    records = [
        record(
            k,
            "gen",
            engine="chat-8b",
            isl=400,
            osl=300,
            started_at=(END + timedelta(minutes=k)).isoformat(),
        )
        for k in range(ENGINE_ROWS)
    ]
    with server.client(server.token("ingest", gateway="bench-engine")) as c:
        assert c.post("/v1/requests", json=records).json()["accepted"] == ENGINE_ROWS
    server.settle()
    yield server
    gen.close()


@pytest.fixture(scope="module")
def answer(compare_live) -> dict:
    """The comparison of chat-8b with the AIPerf run over the default window."""
    with compare_live.client() as c:
        got = c.get("/api/compare", params={"engine": "chat-8b", "benchmark": "aiperf-replay"})
    assert got.status_code == 200, got.text
    return got.json()


def _window() -> dict:
    return {"start": START.isoformat(), "end": END.isoformat()}


def test_both_sides_are_the_rows_they_claim_on_the_same_bins(compare_live, answer):
    prod, bench = answer["production"], answer["benchmark"]
    assert prod["window"] == _window()  # the 7 days before the server's clock
    assert prod["gateways"] == ["gw-public"] and prod["match"] == "engine"
    # The AIPerf rows name no engine: matched by the model the production rows name.
    assert bench["match"] == "model" and "meta-llama/Llama-3.1-8B-Instruct" in bench["match_words"]
    assert (bench["requests"], bench["rows"]) == (BENCH_REQUESTS, BENCH_REQUESTS + BENCH_ERRORS)
    assert bench["not_ok"] == BENCH_ERRORS
    assert answer["isl_edges"] == answer["osl_edges"] and answer["isl_edges"][1] == 16
    with compare_live.client() as c:
        prod_map = c.get(
            "/api/heatmap",
            params={"engine": "chat-8b", "gateway": "gw-public", "status": "ok", **_window()},
        ).json()
        bench_map = c.get(
            "/api/heatmap", params={"gateway": "aiperf-replay", "status": "ok"}
        ).json()
    assert prod["counts"] == prod_map["counts"] and prod["requests"] == prod_map["total"]
    assert bench["counts"] == bench_map["counts"]
    for side in (prod, bench):
        assert sum(map(sum, side["shares"])) == pytest.approx(1.0, abs=1e-4)


def test_the_distance_and_its_sentence_follow_from_the_counts(answer):
    p = np.asarray(answer["production"]["counts"], dtype=float)
    q = np.asarray(answer["benchmark"]["counts"], dtype=float)
    distance = 0.5 * np.abs(p / p.sum() - q / q.sum()).sum()
    shape = answer["shape"]
    assert shape["tvd"] == pytest.approx(distance, abs=1e-4) and 0 < distance < 1
    assert shape["matches"] is bool(distance <= shape["threshold"])
    verdict = "matches production within" if shape["matches"] else "does not match production"
    assert verdict in shape["words"] and f"TVD {distance:.2f}" in shape["words"]


def _cell_sql(where: str) -> str:
    return (
        "SELECT quantile_cont(ttft_ms, 0.9), quantile_cont(itl_ms, 0.5), count(ttft_ms) "
        f"FROM requests WHERE status = 'ok' AND isl >= ? AND isl < ? AND osl >= ? AND osl < ? "
        f"AND {where}"
    )


def test_cells_carry_each_sides_quantiles_and_ratios_only_where_measured(compare_live, answer):
    edges = answer["isl_edges"]
    n = answer["min_samples"]
    cells = answer["cells"]
    assert cells[0]["production"]["requests"] == max(c["production"]["requests"] for c in cells)
    compared = [c for c in cells if c["ratio"] is not None]
    assert compared, "the run overlaps production's busiest cells"
    for c in cells:
        enough = c["production"]["ttft_n"] >= n and c["benchmark"]["ttft_n"] >= n
        ratio = (c["ratio"] or {}).get("ttft_p90")
        if enough:
            expected = c["benchmark"]["ttft_p90"] / c["production"]["ttft_p90"]
            assert ratio == pytest.approx(expected, rel=1e-3)
        else:
            assert ratio is None
    top = compared[0]
    lo_i, lo_j = edges.index(top["isl_from"]), edges.index(top["osl_from"])
    bounds = [edges[lo_i], edges[lo_i + 1], edges[lo_j], edges[lo_j + 1]]
    cur = compare_live.db.cursor()
    prod = cur.execute(
        _cell_sql("engine = ? AND gateway = 'gw-public' AND started_at >= ? AND started_at < ?"),
        [*bounds, "chat-8b", START, END],
    ).fetchone()
    bench = cur.execute(_cell_sql("gateway = 'aiperf-replay'"), bounds).fetchone()
    assert top["production"]["ttft_p90"] == pytest.approx(prod[0], rel=1e-4)
    assert top["production"]["itl_p50"] == pytest.approx(prod[1], rel=1e-4)
    assert top["production"]["ttft_n"] == prod[2]
    assert top["benchmark"]["ttft_p90"] == pytest.approx(bench[0], rel=1e-4)
    assert top["benchmark"]["ttft_n"] == bench[2]


def test_goodput_of_both_sides_against_the_engines_slo(compare_live, answer):
    s = answer["slo"]
    assert s["source"] == "engine" and s["ttft_ms"] and s["itl_ms"]
    with compare_live.client() as c:
        ledger = c.get(
            "/api/goodput",
            params={"engine": "chat-8b", "gateway": "gw-public", "status": "ok", **_window()},
        ).json()
    assert answer["production"]["goodput"]["goodput"] == pytest.approx(
        ledger["totals"]["goodput"], abs=1e-4
    )
    # The benchmark's rows name no engine: judged by chat-8b's targets all the same.
    good, judged = (
        compare_live.db.cursor()
        .execute(
            "SELECT count(*) FILTER (WHERE ttft_ms <= ? AND (osl <= 1 OR itl_ms <= ?)), count(*) "
            "FROM requests WHERE gateway = 'aiperf-replay' AND status = 'ok'",
            [s["ttft_ms"], s["itl_ms"]],
        )
        .fetchone()
    )
    g = answer["benchmark"]["goodput"]
    assert 0 < good < judged  # the run missed some, so the number says something
    assert g["goodput"] == pytest.approx(good / judged, abs=1e-4)
    assert g["met"] is bool(good / judged >= s["percentile"] / 100)


def test_the_models_prediction_is_the_engines_own(compare_live, answer):
    pred = answer["prediction"]
    assert pred["available"] and "published benchmark figures" in pred["error"]
    with compare_live.client() as c:
        own = c.get("/api/engines/chat-8b/performance", params=_window(), timeout=120).json()
    assert pred["model"]["ttft_ms"] == own["model"]["ttft_ms"]
    assert pred["calibrated"]["itl_ms"] == own["calibrated"]["itl_ms"]
    mean = compare_live.scalar(
        "SELECT avg(ttft_ms) FROM requests WHERE engine = 'chat-8b' AND gateway = 'gw-public' "
        "AND status = 'ok' AND started_at >= ? AND started_at < ?",
        [START, END],
    )
    assert answer["production"]["latency"]["ttft"]["mean"] == pytest.approx(mean, rel=1e-4)


def test_a_run_naming_the_engine_is_matched_by_it_and_left_out_of_production(compare_live):
    window = {"start": START.isoformat(), "end": (END + timedelta(hours=1)).isoformat()}
    with compare_live.client() as c:
        by_engine = c.get(
            "/api/compare", params={"engine": "chat-8b", "benchmark": "bench-engine", **window}
        ).json()
        beside = c.get(
            "/api/compare", params={"engine": "chat-8b", "benchmark": "aiperf-replay", **window}
        ).json()
        alone = c.get("/api/compare", params={"engine": "chat-8b", "benchmark": "bench-other"})
    assert by_engine["benchmark"]["match"] == "engine"
    assert by_engine["benchmark"]["requests"] == ENGINE_ROWS
    assert by_engine["production"]["gateways"] == ["gw-public"]  # every gateway but its own
    assert beside["production"]["gateways"] == ["bench-engine", "gw-public"]
    assert beside["production"]["requests"] == by_engine["production"]["requests"] + ENGINE_ROWS
    assert alone.status_code == 200
    other = alone.json()["benchmark"]
    assert other["match"] == "gateway" and "matched by the gateway alone" in other["match_words"]


@pytest.mark.parametrize(
    ("params", "words"),
    [
        ({"benchmark": "aiperf-replay"}, "engine: Field required"),
        ({"engine": "chat-8b"}, "benchmark: Field required"),
        (
            {"engine": "chat-8b", "benchmark": "nope"},
            "benchmark: no rows for gateway 'nope': import the benchmark with `tokenshape "
            "import profile_export.jsonl --format aiperf --gateway nope`",
        ),
        (
            {"engine": "chat-9b", "benchmark": "aiperf-replay"},
            "engine: no request names engine 'chat-9b'",
        ),
        (
            {
                "engine": "chat-8b",
                "benchmark": "aiperf-replay",
                "start": "2026-12-10T00:00:00Z",
                "end": "2026-12-11T00:00:00Z",
            },
            "engine: engine 'chat-8b' has no production requests from 2026-12-10 00:00 UTC to "
            "2026-12-11 00:00 UTC; its requests run from",
        ),
        (
            {"engine": "chat-8b", "benchmark": "aiperf-replay", "bench_start": "2026-11-25T00:00Z"},
            "bench_start: gateway 'aiperf-replay' has no rows since 2026-11-25 00:00 UTC; "
            "its 405 rows run from 2026-11-24 10:00 UTC",
        ),
        (
            {
                "engine": "chat-8b",
                "benchmark": "aiperf-replay",
                "start": END.isoformat(),
                "end": START.isoformat(),
            },
            "start: must be before end",
        ),
        (
            {
                "engine": "chat-8b",
                "benchmark": "aiperf-replay",
                "bench_start": END.isoformat(),
                "bench_end": START.isoformat(),
            },
            "bench_start: must be before bench_end",
        ),
        ({"engine": "chat-8b", "benchmark": "aiperf-replay", "bins": "linear"}, "bins"),
        ({"engine": "chat-8b", "benchmark": "aiperf-replay", "min_samples": 0}, "min_samples"),
    ],
)
def test_what_cannot_be_compared_is_a_422_naming_the_parameter(compare_live, params, words):
    with compare_live.client() as c:
        got = c.get("/api/compare", params=params)
    assert got.status_code == 422
    assert got.json()["detail"].startswith("invalid parameters: ")
    assert words in got.json()["detail"]


def test_the_comparison_needs_a_read_token_or_a_login(secured):
    params = {"engine": "chat-8b", "benchmark": "aiperf-replay"}
    with secured.client() as anon:
        assert anon.get("/api/compare", params=params).status_code == 401
    with secured.client(secured.token("ingest")) as ingest_only:
        assert ingest_only.get("/api/compare", params=params).status_code == 403
    with secured.client(secured.token("read")) as reader:
        got = reader.get("/api/compare", params=params)  # let in: an empty database answers
    assert got.status_code == 422 and "no rows for gateway 'aiperf-replay'" in got.json()["detail"]
