"""POST /v1/litellm: LiteLLM's generic_api callback in its three log formats, over HTTP. One
server for the module: each test sends as a gateway of its own and reads only its rows."""

from __future__ import annotations

import json

import pytest

from tests.support.records import LITELLM_START as START
from tests.support.records import litellm_payload as payload
from tests.support.server import LiveServer


@pytest.fixture(scope="module")
def live(module_live: LiveServer) -> LiveServer:
    """One server for the module."""
    return module_live


@pytest.fixture
def gateway(request: pytest.FixtureRequest) -> str:
    """The LiteLLM proxy's gateway, one of this test's own."""
    return f"litellm-proxy-{request.node.name}"


@pytest.fixture
def post(live, gateway):
    token = live.token("ingest", gateway=gateway)

    def send(body, content_type="application/json"):
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        with live.client(token) as c:
            return c.post("/v1/litellm", content=data, headers={"Content-Type": content_type})

    return send


def test_json_array_single_and_ndjson_formats(live, post, gateway):
    first = post([payload(0), payload(1)])  # log_format: json_array
    assert first.status_code == 200 and first.json()["accepted"] == 2
    assert post(payload(2)).json()["accepted"] == 1  # log_format: single
    lines = b"\n".join(json.dumps(payload(i)).encode() for i in (3, 4))
    assert post(lines, "application/x-ndjson").json()["accepted"] == 2  # log_format: ndjson
    assert post([payload(0)]).json()["duplicates"] == 1  # the id dedupes a re-sent payload
    row = (
        live.db.cursor()
        .execute(
            "SELECT request_id, model, engine, tenant, isl, osl, ttft_ms, e2e_ms, stream, gateway, "
            "epoch(started_at) FROM requests WHERE request_id = 'chatcmpl-1' AND gateway = ?",
            [gateway],
        )
        .fetchall()[0]
    )
    assert row[:6] == ("chatcmpl-1", "llama-3.1-8b", "vllm-chat-8b:8000", "team-search", 1201, 100)
    assert row[6] == pytest.approx(400.0) and row[7] == pytest.approx(2500.0)  # ms, by hand
    assert row[8] is True and row[9] == gateway
    assert row[10] == pytest.approx(START + 1)
    fmt = live.scalar(
        "SELECT count(*) FROM rejects WHERE format = 'litellm' AND gateway = ?", [gateway]
    )
    assert fmt == 0


def test_iso_times_non_streaming_and_failures(live, post, gateway):
    iso = payload(
        10,
        startTime="2026-11-20T10:00:00+00:00",
        endTime="2026-11-20T10:00:03+00:00",
        completionStartTime="2026-11-20T10:00:03+00:00",
        stream=False,
    )
    failure = payload(
        11,
        status="failure",
        prompt_tokens=None,
        completion_tokens=None,
        error_str="Rate limit reached",
        error_information={"error_class": "RateLimitError", "error_code": "429"},
    )
    answer = post([iso, failure]).json()
    assert answer["accepted"] == 2 and answer["rejected"] == 0
    cur = live.db.cursor()
    rows = dict(
        (r[0], r[1:])
        for r in cur.execute(
            "SELECT request_id, ttft_ms, e2e_ms, status, error_type, isl FROM requests "
            "WHERE gateway = ?",
            [gateway],
        ).fetchall()
    )
    assert rows["chatcmpl-10"][:3] == (None, 3000.0, "ok")  # no TTFT without streaming
    assert rows["chatcmpl-11"][2:] == ("error", "RateLimitError", 0)


def test_bad_payloads_name_the_litellm_field_and_keep_the_rest(live, post, gateway):
    no_tokens = payload(20)
    del no_tokens["prompt_tokens"]
    backwards = payload(21, endTime=START)  # ends 21 s before it started
    answer = post([payload(22), no_tokens, backwards, "not an object"]).json()
    assert answer["accepted"] == 1 and answer["rejected"] == 3
    errors = {e["index"]: e for e in answer["errors"]}
    assert (
        errors[1]["field"] == "prompt_tokens"
        and "litellm: prompt_tokens is missing" in (errors[1]["message"])
    )
    assert (
        errors[2]["field"] == "endTime" and "litellm: endTime (as e2e_ms)" in (errors[2]["message"])
    )
    assert "must be a JSON object" in errors[3]["message"]
    kept = live.scalar(
        "SELECT count(*) FROM rejects WHERE format = 'litellm' AND gateway = ?", [gateway]
    )
    assert kept == 3
    broken = post(b"{not json", "application/json")
    assert broken.status_code == 400 and "litellm" in broken.json()["detail"]
