"""Money over HTTP and on the command line: a hand-computed fleet of one engine."""

from __future__ import annotations

import json

import pytest

from tests.support.cli import cli
from tests.support.records import record

HOURS_A_MONTH = 24 * 365.25 / 12
PROFILE = {
    "model": "llama-3.1-8b",
    "gpu": "H100",
    "max_input_len": 4096,
    "max_seq_len": 8192,
    "replicas": 3,
    "cost_per_gpu_hour": 4.0,
    # Targets a lone H100 meets at this trickle: one replica holds the SLO.
    "slo_ttft_ms": 5000,
    "slo_itl_ms": 200,
}


@pytest.fixture
def engine(live, ingest):
    """Four weeks of a request every two hours, and the profile above for chat-8b."""
    recs = [
        record(i, "m", started_at=f"2026-11-{1 + i // 12:02d}T{(i % 12) * 2:02d}:10:00Z")
        for i in range(21 * 12)
    ]
    assert ingest.post("/v1/requests", json=recs).json()["accepted"] == len(recs)
    with live.client(live.token("admin")) as c:
        assert c.put("/api/engines/chat-8b", json=PROFILE).status_code == 200
    return live


def test_money_counts_the_spare_replicas_by_hand(engine):
    with engine.client(engine.token("admin")) as c:
        money = c.get("/api/money").json()
        season = c.get("/api/engines/chat-8b/seasonal", params={"namespace": "serving"}).json()
        window = {"start": "2026-11-08T00:00:00Z", "end": "2026-11-22T00:00:00Z"}
        rec = c.get("/api/engines/chat-8b/recommendation", params=window).json()
        bad = c.get("/api/engines/chat-8b/seasonal", params={"namespace": "Not A Name"})
    (e,) = money["engines"]
    with engine.client(engine.token("admin")) as c:
        # A seasonal view with its own headroom and coverage does not change what every page
        # reads as the engine's money.
        odd = c.get("/api/engines/chat-8b/seasonal", params={"headroom": 2, "coverage": 0.6})
        assert odd.status_code == 200
        assert c.get("/api/money").json() == money
        # Two windows inside the same hour are two answers.
        short = {"start": "2026-11-21T20:00:00Z", "end": "2026-11-21T20:05:00Z"}
        longer = {"start": "2026-11-21T20:00:00Z", "end": "2026-11-21T20:59:00Z"}
        a = c.get("/api/engines/chat-8b/recommendation", params=short).json()
        b = c.get("/api/engines/chat-8b/recommendation", params=longer).json()
        assert a["requests"] == 0 and b["requests"] == 1
        # An API price beyond reason is refused, naming the field.
        huge = PROFILE | {"api_price_input_per_mtok": 1e308}
        bad_price = c.put("/api/engines/chat-8b", json=huge)
        assert bad_price.status_code == 422 and "api_price_input_per_mtok" in bad_price.text
    # Today: 3 replicas × 1 GPU all month at $4; the plans need 1 replica at every hour.
    assert e["baseline"]["name"] == "now" and e["baseline"]["peak_replicas"] == 3
    assert e["baseline"]["cost_month"] == pytest.approx(3 * HOURS_A_MONTH * 4.0, abs=0.01)
    assert e["best"]["peak_replicas"] == 1
    assert e["saves_month"] == pytest.approx(2 * HOURS_A_MONTH * 4.0, abs=0.01)
    assert money["saves_month"] == e["saves_month"]
    assert money["headline"] == f"saves ${2 * HOURS_A_MONTH * 4.0:,.0f}/month"
    assert e["slo"] == "TTFT p95 ≤ 5,000 ms, ITL p95 ≤ 200 ms"
    # The seasonal route carries the same money and the documents that apply the plan.
    assert season["money"]["saves_month"] == e["saves_month"]
    assert season["slo"]["source"] == "engine" and season["slo"]["percentile"] == 95
    need = [h["slo_need"] for h in season["hours"] if h["slo_need"]]
    assert need and all(n["replicas"] == 1 and n["feasible"] for n in need)
    assert "kind: ScaledObject" in season["deploy"]["keda_yaml"]
    assert "namespace: serving" in season["deploy"]["kubernetes_yaml"]
    assert bad.status_code == 422 and "namespace" in bad.json()["detail"]
    # The recommendation says the same in replicas.
    reps = rec["replicas"]
    assert reps["running"] == 3 and reps["needed_with_recommended_bounds"] == 1
    assert "2 of the 3 running today are spare" in rec["verdict"]


def test_the_engine_command_edits_the_profile_and_money_prints_it(report_db):
    db = ["--db", str(report_db)]
    out = cli("engine", "set", *db, "chat-8b", "slo_itl_ms=150", "replicas=2")
    assert json.loads(out.stdout)["slo_itl_ms"] == 150 and json.loads(out.stdout)["replicas"] == 2
    bad = cli("engine", "set", *db, "chat-8b", "slo_itl_ms=-5", check=False)
    assert bad.returncode == 2 and "slo_itl_ms" in bad.stderr and "greater than 0" in bad.stderr
    shown = json.loads(cli("engine", "show", *db, "chat-8b").stdout)
    assert shown["slo_itl_ms"] == 150 and shown["replicas"] == 2
    cli("engine", "unset", *db, "chat-8b", "replicas")
    assert "replicas" not in json.loads(cli("engine", "show", *db, "chat-8b").stdout)
    listed = cli("engine", "list", *db).stdout
    assert "chat-8b" in listed and "itl_ms=150" in listed
    money = cli("money", *db).stdout
    assert (
        "chat-8b" in money
        and "GPU-hours/month" in money
        and money.rstrip().splitlines()[-1].startswith("fleet: ")
    )
    unknown = cli("engine", "set", *db, "chat-8b", "slo_ttft=5", check=False)
    assert unknown.returncode == 2 and "slo_ttft is not a profile field" in unknown.stderr
    new = cli("engine", "set", *db, "new-engine", "slo_ttft_ms=500", check=False)
    assert new.returncode == 2 and "a new engine needs at least model" in new.stderr
    missing = cli("engine", "show", *db, "no-such-engine", check=False)
    assert missing.returncode == 1 and "no-such-engine" in missing.stderr
