"""Drift over real traffic: the week queries (app/analytics/drift) and GET /api/drift over
HTTP. The drifted traffic is shipped once into a server the module shares."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from app.analytics.drift import beyond, engine_weeks
from app.storage.engines import put_profile
from tests.support.records import record

WEEK_S = 7 * 24 * 3600
END = datetime(2026, 11, 20, tzinfo=UTC)
PROFILE = {"model": "llama-3.1-8b", "gpu": "L40S", "max_input_len": 4096, "max_seq_len": 8192}


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


def spread(start: datetime, n: int) -> list[str]:
    """n start times spread evenly over the week from start."""
    return [iso(start + timedelta(seconds=k * WEEK_S / n)) for k in range(n)]


def ship(ingest, recs: list[dict]) -> None:
    for k in range(0, len(recs), 1000):
        chunk = recs[k : k + 1000]
        assert ingest.post("/v1/requests", json=chunk).json()["accepted"] == len(chunk)


@pytest.fixture(scope="module")
def drifted(module_live):
    """chat-8b: 2% of last week's prompts are too long and TTFT got slower; rag-8b: built for
    4,096-token prompts, sent ~1,300 at p99.9; idle-8b: a profile and no traffic."""
    rng = np.random.default_rng(7)
    last, previous = END - timedelta(days=7), END - timedelta(days=14)
    data: dict = {}

    isl_prev = rng.integers(100, 2000, 1000)
    isl_last = rng.integers(100, 2000, 1000)
    isl_last[rng.choice(1000, 20, replace=False)] = 5000  # beyond max_input_len 4,096
    osl = rng.integers(10, 300, 2000)
    ttft_prev, ttft_last = rng.uniform(50, 150, 1000), rng.uniform(70, 200, 1000)
    recs = []
    for k, (t, isl, ttft) in enumerate(
        zip(
            spread(previous, 1000) + spread(last, 1000),
            np.concatenate([isl_prev, isl_last]),
            np.concatenate([ttft_prev, ttft_last]),
            strict=True,
        )
    ):
        recs.append(
            record(k, "c", started_at=t, isl=int(isl), osl=int(osl[k]), ttft_ms=float(ttft))
        )
    # exactly at the end: outside the last week, however long
    recs.append(record(9999, "c", started_at=iso(END), isl=9000, osl=10))
    data["chat"] = {
        "isl": (isl_prev, isl_last),
        "osl": (osl[:1000], osl[1000:]),
        "ttft": (ttft_prev, ttft_last),
    }

    rag_isl = np.clip(rng.normal(600, 250, 2000), 1, None).astype(int)
    rag_isl[:2] = 1300  # the top of the distribution, so p99.9 sits near 1,300
    rag_isl = np.minimum(rag_isl, 1300)
    rag_osl = rng.integers(50, 400, 2000)
    for k, t in enumerate(spread(last, 2000)):
        recs.append(
            record(k, "r", engine="rag-8b", started_at=t, isl=int(rag_isl[k]), osl=int(rag_osl[k]))
        )
    data["rag"] = {"isl": rag_isl, "osl": rag_osl}
    live = module_live
    with live.client(live.token("ingest")) as ingest:
        ship(ingest, recs)

    with live.client(live.token("admin")) as c:
        for name in ("chat-8b", "rag-8b", "idle-8b"):
            assert c.put(f"/api/engines/{name}", json=PROFILE).status_code == 200
    # a profile saved before a validation rule changed: only storage can still hold it
    put_profile(live.db.cursor(), "broken-8b", PROFILE | {"gpu": "H1000"}, END)
    live.settle()
    return data


def test_week_queries_match_numpy(module_live, drifted):
    cur = module_live.db.cursor()
    weeks = engine_weeks(cur, "chat-8b", END)
    for name, k in (("previous", 0), ("last", 1)):
        isl, osl, ttft = (drifted["chat"][m][k] for m in ("isl", "osl", "ttft"))
        w = weeks[name]
        assert w["requests"] == 1000
        assert w["isl_p99"] == pytest.approx(np.quantile(isl, 0.99))
        assert w["osl_p99"] == pytest.approx(np.quantile(osl, 0.99))
        assert w["isl_p999"] == pytest.approx(np.quantile(isl, 0.999))
        assert w["seq_p999"] == pytest.approx(np.quantile(isl + osl, 0.999))
        assert w["ttft_p95"] == pytest.approx(np.quantile(ttft, 0.95))
        assert w["arrival_rate"] == pytest.approx(1000 / WEEK_S)
    # the request at exactly END lies outside [END - 7d, END)
    assert beyond(cur, "chat-8b", END - timedelta(days=7), END, 4096, 8192) == (20, 0, 1000)
    isl, osl = drifted["chat"]["isl"][1], drifted["chat"]["osl"][1]
    assert beyond(cur, "chat-8b", END - timedelta(days=7), END, 1000, 1500) == (
        int((isl > 1000).sum()),
        int((isl + osl > 1500).sum()),
        1000,
    )
    assert beyond(cur, "chat-8b", END - timedelta(days=7), END, None, None) == (None, None, 1000)
    empty = engine_weeks(cur, "idle-8b", END)
    assert empty["last"]["requests"] == 0 and empty["last"]["isl_p99"] is None


def get_drift(live, **params) -> dict:
    with live.client() as c:
        r = c.get("/api/drift", params=params)
    # Unwired, the path is a 404 or falls through to Dash's catch-all page route (HTML).
    if r.status_code == 404 or "json" not in r.headers.get("content-type", ""):
        pytest.skip("router not wired yet")
    assert r.status_code == 200, r.text
    return r.json()


def test_drift_route(module_live, drifted):
    body = get_drift(module_live, end=iso(END))
    assert datetime.fromisoformat(body["end"]) == END
    by_engine = {e["engine"]: e["findings"] for e in body["engines"]}
    assert list(by_engine) == ["broken-8b", "chat-8b", "idle-8b", "rag-8b"]
    for fs in by_engine.values():
        assert all(set(f) == {"kind", "severity", "message", "value"} for f in fs)
        order = ["critical", "warning", "info"]
        assert [order.index(f["severity"]) for f in fs] == sorted(
            order.index(f["severity"]) for f in fs
        )

    # 2% of last week's requests exceed max_input_len 4,096
    chat = {f["kind"]: f for f in by_engine["chat-8b"]}
    isl_prev, isl_last = drifted["chat"]["isl"]
    share = (isl_last > 4096).mean()
    assert share == 0.02
    assert chat["beyond_input"]["severity"] == "critical"
    assert chat["beyond_input"]["value"] == pytest.approx(share)
    assert chat["beyond_input"]["message"].startswith("2.0% of last week's requests (20 of 1,000)")
    assert "beyond_seq" not in chat  # 5,000 + at most 300 fits 8,192
    # p99 ISL jumped to the long prompts: a warning; TTFT p95 got slower
    p99_change = np.quantile(isl_last, 0.99) / np.quantile(isl_prev, 0.99) - 1
    assert p99_change > 0.5
    assert chat["change_isl_p99"]["severity"] == "warning"
    assert chat["change_isl_p99"]["value"] == pytest.approx(p99_change)
    ttft_prev, ttft_last = drifted["chat"]["ttft"]
    ttft_change = np.quantile(ttft_last, 0.95) / np.quantile(ttft_prev, 0.95) - 1
    assert 0.2 <= ttft_change < 0.5
    assert chat["change_ttft_p95"]["severity"] == "info"
    assert chat["change_ttft_p95"]["value"] == pytest.approx(ttft_change)
    assert "change_arrival_rate" not in chat  # 1,000 requests both weeks

    # built for 4,096-token prompts, p99.9 ISL about 1,300
    rag = {f["kind"]: f for f in by_engine["rag-8b"]}
    isl, osl = drifted["rag"]["isl"], drifted["rag"]["osl"]
    p999 = np.quantile(isl, 0.999)
    assert p999 == pytest.approx(1300, abs=10)
    over = rag["over_provisioned_input"]
    assert over["severity"] == "warning" and "over-provisioned" in over["message"]
    assert over["value"] == pytest.approx(4096 / p999) == pytest.approx(3.2, abs=0.1)
    seq_ratio = 8192 / np.quantile(isl + osl, 0.999)
    assert rag["over_provisioned_seq"]["value"] == pytest.approx(seq_ratio)
    assert rag["over_provisioned_seq"]["severity"] == ("critical" if seq_ratio >= 4 else "warning")
    assert not any(k.startswith("change_") for k in rag)  # no previous week to compare

    assert by_engine["idle-8b"] == [
        {
            "kind": "no_data",
            "severity": "info",
            "message": "no requests in the last 7 days",
            "value": 0.0,
        }
    ]
    (broken,) = by_engine["broken-8b"]
    assert broken["kind"] == "profile" and broken["severity"] == "warning"
    assert "unknown gpu 'H1000'" in broken["message"]


def test_drift_route_defaults_and_errors(live):
    body = get_drift(live)  # no engines: an empty list, ending now
    assert body["engines"] == []
    assert abs(datetime.fromisoformat(body["end"]) - datetime.now(UTC)) < timedelta(minutes=5)
    with live.client() as c:
        bad = c.get("/api/drift", params={"end": "last tuesday"})
        ancient = c.get("/api/drift", params={"end": "0001-01-01T00:00:00"})
    assert bad.status_code == 422 and "end" in bad.json()["detail"]
    assert ancient.status_code == 422 and "outside the supported range" in ancient.json()["detail"]
