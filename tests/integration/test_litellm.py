"""POST /v1/litellm: LiteLLM's generic_api callback in its three log formats, over HTTP. One
server for the module: each test sends as a gateway of its own and reads only its rows."""

from __future__ import annotations

import gzip
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


def test_every_entry_counts_against_the_item_limit(live, post, gateway):
    """Entries that map to nothing count too: 100,001 `{}` (over the default 100,000) are
    refused before any is mapped, as json_array and as ndjson; nothing kept but the refusals."""
    empties = b",".join([b"{}"] * 100_001)
    for body, kind in (
        (b"[" + empties + b"]", "application/json"),
        (empties.replace(b",", b"\n"), "application/x-ndjson"),
    ):
        r = post(body, kind)
        assert r.status_code == 400, r.text
        assert "more than the limit of 100000; split the batch" in r.json()["detail"]
    kept = live.scalar("SELECT count(*) FROM rejects WHERE gateway = ?", [gateway])
    assert kept == 2


BAD_LITELLM = [
    ("unclosed ipv6", {"api_base": "http://[::1"}, "api_base"),
    ("number api_base", {"api_base": 8000}, "api_base"),
    ("list metadata", {"metadata": ["team-a"]}, "metadata"),
    ("string metadata", {"metadata": "team-a"}, "metadata"),
    ("empty prompt_tokens", {"prompt_tokens": ""}, "prompt_tokens"),
    ("false prompt_tokens", {"prompt_tokens": False}, "prompt_tokens"),
    ("list prompt_tokens", {"prompt_tokens": []}, "prompt_tokens"),
    ("true completion_tokens", {"completion_tokens": True}, "completion_tokens"),
    ("float prompt_tokens", {"prompt_tokens": 12.5}, "prompt_tokens"),
    ("bool startTime", {"startTime": True}, "startTime"),
    ("empty startTime", {"startTime": ""}, "startTime"),
    ("number alias", {"metadata": {"user_api_key_alias": 7}}, "metadata.user_api_key_alias"),
    ("string stream", {"stream": "yes"}, "stream"),
    ("bool sample rate", {"metadata": {"sample_rate": True}}, "metadata.sample_rate"),
    ("unknown status", {"status": "pending"}, "status"),
]


@pytest.mark.parametrize(("case", "bad", "field"), BAD_LITELLM, ids=[c[0] for c in BAD_LITELLM])
def test_wrong_types_are_refused_by_name_never_stored_as_zero(
    live, post, gateway, case, bad, field
):
    """Booleans are not numbers, empty is not zero, and a field of the wrong kind is never
    dropped in silence: the entry is refused by its LiteLLM field, the rest stored."""
    r = post([payload(30), payload(31, **bad), payload(32)])
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["accepted"], answer["rejected"]) == (2, 1), answer
    (error,) = answer["errors"]
    assert error["index"] == 1 and error["field"] == field, error
    assert field.split(".")[-1] in error["message"]


def test_overflowing_numbers_are_one_entrys_reject_not_a_500(live, post, gateway):
    """An integer startTime of 1 and 400 zeros (a float overflow) and 1e400 are that entry's
    rejects by name; the batch around them is stored."""
    good = json.dumps(payload(40))
    huge = json.dumps(payload(41)).replace(
        f'"startTime": {START + 41}', '"startTime": 1' + "0" * 400
    )
    far = json.dumps(payload(42)).replace(f'"endTime": {START + 42 + 2.5}', '"endTime": 1e400')
    assert huge != json.dumps(payload(41)) and far != json.dumps(payload(42))
    r = post(f"[{good},{huge},{far}]".encode())
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer["accepted"] == 1
    assert [(e["index"], e["field"]) for e in answer["errors"]] == [
        (1, "startTime"),
        (2, "endTime"),
    ]


def test_a_huge_skipped_field_costs_nothing_and_gzip_is_named(live, post, gateway):
    """`messages` holding 500,000 objects is skipped unbuilt (the entry is stored); a gzip
    body without Content-Encoding is told to set it."""
    body = (
        json.dumps(payload(50)).encode()[:-1]
        + b', "extra": ['
        + b",".join([b"{}"] * 500_000)
        + b"]}"
    )
    r = post(body)
    assert r.status_code == 200 and r.json()["accepted"] == 1, r.text
    r = post(gzip.compress(json.dumps([payload(51)]).encode()))
    assert r.status_code == 400 and "set Content-Encoding: gzip" in r.json()["detail"]
