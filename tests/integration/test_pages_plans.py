"""The Rightsizing and Seasonal pages' replicas and money over HTTP, as Dash asks for them: the
layouts (the router's callback) and the callbacks that fill the fleet's and an engine's money,
on one server over two weeks of demo traffic whose profiles carry SLOs and costs."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from app.dashboard import ids
from app.services.demo import DEMO_PROFILES
from app.storage.engines import get_profile, put_profile
from tests.support.dash import dash_post, page_layout, save_payload, store_callback
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings


@pytest.fixture(scope="module")
def demo_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over 5,000 demo requests in the 14 days before 2026-11-23."""
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("plans-live") / "t.duckdb")
    yield from serve(server_settings(db), wait=False)


def test_fleet_lists_engines_at_once_and_fills_replicas_and_money_after(demo_live):
    with demo_live.client() as c:
        page = page_layout(c, "/rightsizing", "?window=30d")
        for engine in DEMO_PROFILES:
            assert engine in page
        assert "computing replicas and money" in page
        assert ids.RIGHTSIZING_FLEET_QUERY in page
        filled = store_callback(
            c, ids.RIGHTSIZING_FLEET, ids.RIGHTSIZING_FLEET_QUERY, {"window": "30d"}
        )
    assert "replicas: today" in filled and "cost / month: now" in filled
    assert ids.RIGHTSIZING_FLEET_TOTAL in filled and "a month now" in filled
    # chat-8b runs 2 replicas today: its replicas cell starts there.
    assert '"2 \\u2192 ' in filled or '"2 → ' in filled
    assert "$" in filled and "computing" not in filled


def test_engine_page_shows_replicas_slo_and_money(demo_live):
    with demo_live.client() as c:
        page = page_layout(c, "/rightsizing", "?engine=llm-70b&window=30d")
        money = store_callback(
            c, ids.RIGHTSIZING_MONEY, ids.RIGHTSIZING_MONEY_QUERY, {"engine": "llm-70b"}
        )
    assert ids.RIGHTSIZING_REPLICAS in page
    assert "running today" in page and "needed after the rebuild" in page
    assert "TTFT p95 \\u2264 3,000 ms" in page or "TTFT p95 ≤ 3,000 ms" in page
    # The editor has the plan's fields, with the stored values.
    for name in ("replicas", "slo_ttft_ms", "slo_itl_ms", "slo_percentile", "cost_per_gpu_hour"):
        assert f'"name": "{name}"' in page
    assert "GPU-hours / month" in money and "replicas at peak" in money
    assert "Cost per million tokens" in money and "$" in money


def test_editor_saves_the_slo_and_money_fields(demo_live):
    payload = save_payload("slo-engine")
    values = {"replicas": 3, "slo_ttft_ms": 450, "slo_itl_ms": 30, "cost_per_gpu_hour": 2.5}
    for state in payload["state"]:
        name = state["id"].get("name") if isinstance(state["id"], dict) else None
        if name in values:
            state["value"] = values[name]
    with demo_live.client() as c:
        answer = dash_post(c, payload)
    assert answer.status_code == 200, answer.text
    assert "saved" in answer.text
    stored = get_profile(demo_live.db.cursor(), "slo-engine")
    assert stored is not None
    assert stored["replicas"] == 3 and stored["slo_ttft_ms"] == 450
    assert stored["slo_itl_ms"] == 30 and stored["cost_per_gpu_hour"] == 2.5


def test_seasonal_page_has_plans_in_money_latency_and_deploy_documents(demo_live):
    with demo_live.client() as c:
        page = page_layout(c, "/seasonal", "?engine=llm-70b&weeks=4")
        other = page_layout(c, "/seasonal", "?engine=llm-70b&weeks=4&namespace=inference")
        bad = page_layout(c, "/seasonal", "?engine=llm-70b&weeks=4&namespace=Not_A_Label")
    for part in (
        ids.SEASONAL_PLANS,
        ids.SEASONAL_MONEY,
        ids.SEASONAL_REPLICAS,
        ids.SEASONAL_DEPLOY,
    ):
        assert part in page
    assert "GPU-hours / month" in page and "cost / month" in page
    assert ids.SEASONAL_LATENCY in page  # the demo's llm-70b has an SLO
    assert "kind: ScaledObject" in page and "kind: HorizontalPodAutoscaler" in page
    assert "namespace: llm" in page
    # llm-70b is a TensorRT-LLM engine: Triton's parameters come with the schedule.
    assert "max_tokens_in_paged_kv_cache" in page
    assert page.count('"type": "Clipboard"') >= 3
    assert "namespace: inference" in other and "namespace: llm\\n" not in other
    assert "is not a DNS-1123 label" in bad and "kind: ScaledObject" not in bad


def test_without_an_slo_both_pages_say_how_to_set_one(demo_live):
    # Last in the module: it changes guard-8b's profile.
    profile = {k: v for k, v in DEMO_PROFILES["guard-8b"].items() if not k.startswith("slo_")}
    put_profile(demo_live.db.cursor(), "guard-8b", profile, datetime.now(UTC))
    with demo_live.client() as c:
        rightsizing = page_layout(c, "/rightsizing", "?engine=guard-8b&window=30d")
        seasonal = page_layout(c, "/seasonal", "?engine=guard-8b&weeks=4")
    assert "No SLO set" in rightsizing and "TOKENSHAPE_SLO_TTFT_MS" in rightsizing
    assert "No SLO for this engine" in seasonal and ids.SEASONAL_LATENCY_NOTE in seasonal
    assert "kind: ScaledObject" in seasonal  # the plan still applies, sized by memory
