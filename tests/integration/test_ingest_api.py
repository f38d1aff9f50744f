"""POST /v1/requests against the running app: partial success, formats, dedupe, bad input.

One server for the module: each test ships with a token of a gateway of its own (`gateway`)
and counts only that gateway's rows and rejects."""

from __future__ import annotations

import gzip
import json
import zlib

import pytest

from tests.support.records import batch, gzipped, ndjson, record
from tests.support.server import LiveServer

JSON = {"Content-Type": "application/json"}

NDJSON = {"Content-Type": "application/x-ndjson"}


@pytest.fixture(scope="module")
def live(module_live: LiveServer) -> LiveServer:
    """One server for the module."""
    return module_live


@pytest.fixture
def gateway(request: pytest.FixtureRequest) -> str:
    """A gateway of this test's own, for the `ingest` fixture's token."""
    return f"gw-{request.node.name}"


def stored(live, gateway: str) -> int:
    return live.scalar("SELECT count(*) FROM requests WHERE gateway = ?", [gateway])


def test_array_is_stored_with_every_field(live, ingest, gateway):
    recs = batch(3)
    recs[0]["token_gaps_ms"] = [10.5, 11.0, 12.25]
    recs[0]["cached_tokens"] = 64
    r = ingest.post("/v1/requests", json=recs)
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 3, "duplicates": 0, "rejected": 0, "errors": []}
    row = (
        live.db.cursor()
        .execute(
            "SELECT gateway, model, engine, tenant, isl, osl, ttft_ms, e2e_ms, token_gaps_ms, "
            "cached_tokens, status, started_at FROM requests "
            "WHERE request_id = 'r-0' AND gateway = ?",
            [gateway],
        )
        .fetchone()
    )
    assert row[:6] == (gateway, "llama-3.1-8b-instruct", "chat-8b", "team-a", 100, 20)
    assert row[6:11] == (80.0, 900.0, [10.5, 11.0, 12.25], 64, "ok")
    assert row[11].isoformat().startswith("2026-11-20T12:00:00")


def test_single_object_ndjson_and_gzip(live, ingest, gateway):
    assert ingest.post("/v1/requests", json=record(0, "one")).json()["accepted"] == 1
    r = ingest.post("/v1/requests", content=ndjson(batch(5, "nd")), headers=NDJSON)
    assert r.json()["accepted"] == 5
    body = gzipped(json.dumps(batch(4, "gz")).encode())
    r = ingest.post("/v1/requests", content=body, headers={**JSON, "Content-Encoding": "gzip"})
    assert r.json()["accepted"] == 4
    assert stored(live, gateway) == 10


def test_gateway_comes_from_the_token_not_the_payload(live):
    with live.client(live.token("ingest", gateway="edge-eu")) as c:
        c.post("/v1/requests", json=[record(0, "spoof", gateway="spoofed")])
    assert live.scalar("SELECT gateway FROM requests WHERE request_id = 'spoof-0'") == "edge-eu"


def test_resending_a_batch_stores_nothing_new(live, ingest, gateway):
    recs = batch(50, "dup")
    assert ingest.post("/v1/requests", json=recs).json()["accepted"] == 50
    again = ingest.post("/v1/requests", json=recs).json()
    assert again == {"accepted": 0, "duplicates": 50, "rejected": 0, "errors": []}
    within = ingest.post("/v1/requests", json=[record(900, "w"), record(900, "w")]).json()
    assert (within["accepted"], within["duplicates"]) == (1, 1)
    assert stored(live, gateway) == 51


def test_missing_request_id_is_a_content_hash(live, ingest, gateway):
    rec = record(1, request_id=None)
    assert ingest.post("/v1/requests", json=rec).json()["accepted"] == 1
    assert ingest.post("/v1/requests", json=rec).json()["duplicates"] == 1
    assert live.scalar("SELECT request_id FROM requests WHERE gateway = ?", [gateway]).startswith(
        "sha1:"
    )


BAD_ITEMS = [
    ("wrong type", record(0, isl="many"), "isl"),
    ("negative count", record(0, osl=-3), "osl"),
    ("fractional count", record(0, isl=10.5), "isl"),
    ("ttft over e2e", record(0, ttft_ms=5000.0, e2e_ms=100.0), "ttft_ms"),
    ("before 2000", record(0, started_at="1999-12-31T23:00:00Z"), "started_at"),
    ("far future", record(0, started_at="2099-01-01T00:00:00Z"), "started_at"),
    ("missing model", record(0, model=None), "model"),
    ("huge model name", record(0, model="m" * 10_000), "model"),
    ("bad status", record(0, status="weird"), "status"),
    ("unparseable time", record(0, started_at="yesterday"), "started_at"),
]


@pytest.mark.parametrize(("case", "bad", "field"), BAD_ITEMS, ids=[c[0] for c in BAD_ITEMS])
def test_bad_item_is_rejected_by_name_and_the_rest_stored(live, ingest, gateway, case, bad, field):
    good = batch(2, "ok")
    r = ingest.post("/v1/requests", json=[good[0], bad, good[1]])
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["accepted"], body["rejected"]) == (2, 1)
    (err,) = body["errors"]
    assert err["index"] == 1 and err["field"] == field
    assert field in err["message"]
    assert stored(live, gateway) == 2
    reject = (
        live.db.cursor()
        .execute("SELECT field, reason, raw, item_index FROM rejects WHERE gateway = ?", [gateway])
        .fetchone()
    )
    assert reject[0] == field and field in reject[1] and reject[3] == 1
    assert reject[2] and len(reject[2]) <= 4096


def test_nan_and_infinity_are_named(live, ingest, gateway):
    body = (
        "[" + json.dumps(record(0)) + ',{"model":"m","isl":1,"osl":1,"ttft_ms":NaN},'
        '{"model":"m","isl":1,"osl":1,"e2e_ms":Infinity}]'
    )
    r = ingest.post("/v1/requests", content=body, headers=JSON)
    assert r.status_code == 200
    errors = r.json()["errors"]
    assert [(e["index"], e["field"]) for e in errors] == [(1, "ttft_ms"), (2, "e2e_ms")]
    assert "finite" in errors[0]["message"]
    assert stored(live, gateway) == 1


def test_ndjson_with_a_broken_line(live, ingest):
    body = ndjson([record(0, "a")]) + b"{not json\n" + ndjson([record(1, "a")])
    r = ingest.post("/v1/requests", content=body, headers=NDJSON).json()
    assert (r["accepted"], r["rejected"], r["errors"][0]["index"]) == (2, 1, 1)
    assert "JSON" in r["errors"][0]["message"]


@pytest.mark.parametrize(
    ("case", "body", "headers", "status", "words"),
    [
        ("not json", b"hello there", JSON, 400, "not a JSON"),
        ("json scalar", b"42", JSON, 400, "JSON object"),
        ("empty body", b"", JSON, 400, "empty"),
        ("broken array", b'[{"model": "m", "isl": 1', JSON, 400, "not valid JSON"),
        ("wrong content type", b"model=m", {"Content-Type": "text/csv"}, 415, "text/csv"),
        ("no content type", b"{}", {}, 415, "application/json"),
        ("unknown encoding", b"{}", {**JSON, "Content-Encoding": "br"}, 415, "br"),
    ],
)
def test_unusable_body_gets_a_clear_status(live, ingest, case, body, headers, status, words):
    r = ingest.post("/v1/requests", content=body, headers=headers)
    assert r.status_code == status, r.text
    assert words in r.json()["detail"]
    assert ingest.get("/api/health").status_code == 200


def test_refused_payloads_are_kept_in_rejects(live, ingest, gateway):
    ingest.post("/v1/requests", content=b"hello there", headers=JSON)
    reason, raw = (
        live.db.cursor()
        .execute("SELECT reason, raw FROM rejects WHERE gateway = ?", [gateway])
        .fetchone()
    )
    assert "not a JSON" in reason and raw == "hello there"


def test_body_over_the_limit_is_413(live, ingest):
    limit = live.app.state.runtime.settings.max_body_bytes
    big = json.dumps([record(i, model="x" * 200) for i in range(limit // 300 + 10)]).encode()
    assert len(big) > limit
    r = ingest.post("/v1/requests", content=big, headers=JSON)
    assert r.status_code == 413 and "larger than" in r.json()["detail"]
    assert ingest.post("/v1/requests", json=record(0)).status_code == 200


def test_gzip_bomb_is_413_without_inflating_it(live, ingest):
    bomb = gzip.compress(b" " * (200 * 1024 * 1024), compresslevel=9)
    assert len(bomb) < 300_000
    r = ingest.post("/v1/requests", content=bomb, headers={**JSON, "Content-Encoding": "gzip"})
    assert r.status_code == 413
    assert ingest.post("/v1/requests", json=record(1)).status_code == 200


def test_truncated_and_corrupt_gzip_are_400(live, ingest, gateway):
    whole = gzipped(json.dumps(batch(20)).encode())
    gz = {**JSON, "Content-Encoding": "gzip"}
    r = ingest.post("/v1/requests", content=whole[: len(whole) // 2], headers=gz)
    assert r.status_code == 400 and "truncated" in r.json()["detail"]
    r = ingest.post("/v1/requests", content=b"\x1f\x8b\x08\x00garbage" * 4, headers=gz)
    assert r.status_code == 400 and "gzip" in r.json()["detail"]
    assert stored(live, gateway) == 0


def test_auth_unknown_missing_and_wrong_scope(live, gateway):
    with live.client() as anon:
        r = anon.post("/v1/requests", json=record(0))
        assert r.status_code == 401 and "Bearer" in r.json()["detail"]
        assert r.headers["www-authenticate"].startswith("Bearer")
    with live.client("tks_" + "x" * 38) as bad:
        r = bad.post("/v1/requests", json=record(0))
        assert r.status_code == 401 and "not known" in r.json()["detail"]
    with live.client(live.token("read", gateway=gateway)) as reader:
        r = reader.post("/v1/requests", json=record(0))
        assert r.status_code == 403 and "ingest" in r.json()["detail"]
    assert stored(live, gateway) == 0


def test_more_than_100_errors_are_counted_but_listed_up_to_100(live, ingest, gateway):
    recs = [record(i, isl=-1) for i in range(150)] + [record(999)]
    r = ingest.post("/v1/requests", json=recs).json()
    assert (r["accepted"], r["rejected"], len(r["errors"])) == (1, 150, 100)
    assert live.scalar("SELECT count(*) FROM rejects WHERE gateway = ?", [gateway]) == 150


def test_compressed_deflate_stream_is_not_mistaken_for_gzip(live, ingest):
    body = zlib.compress(json.dumps([record(0)]).encode())
    r = ingest.post("/v1/requests", content=body, headers={**JSON, "Content-Encoding": "gzip"})
    assert r.status_code == 400 and "gzip" in r.json()["detail"]


def test_no_answer_leaves_a_request_counted_as_arriving(live, ingest):
    """The mover takes "no ingest request arriving" for the end of traffic: every way out of
    the route, refusals and errors included, must count the request out again."""
    writer = live.app.state.runtime.writer
    assert ingest.post("/v1/requests", json=batch(3, "in")).status_code == 200
    assert ingest.post("/v1/requests", content=b"nope", headers=JSON).status_code == 400
    assert (
        ingest.post("/v1/requests", content=b"{}", headers={"Content-Type": "text/csv"}).status_code
        == 415
    )
    assert (
        ingest.post(
            "/v1/requests", content=b"\x1f\x8b", headers={**JSON, "Content-Encoding": "gzip"}
        ).status_code
        == 400
    )
    assert (
        ingest.post(
            "/v1/traces", content=b"\x00", headers={"Content-Type": "application/x-protobuf"}
        ).status_code
        == 400
    )
    assert ingest.post("/v1/litellm", json=[{"nothing": 1}]).status_code == 200
    assert writer.state()["incoming_requests"] == 0


def test_ndjson_error_index_is_the_line_number(live, ingest):
    body = ndjson([record(0, "b")]) + b"\n\n" + b'{"model": "m", "isl": -2, "osl": 1}\n'
    r = ingest.post("/v1/requests", content=body, headers=NDJSON).json()
    assert (r["accepted"], r["errors"][0]["index"]) == (1, 3)


def test_an_unpaired_surrogate_escape_is_rejected_by_field_and_the_rest_stored(
    live, ingest, gateway
):
    """JSON can escape half a UTF-16 pair alone; such text cannot be stored (it is not valid
    Unicode), so that record is rejected by name, and a complete pair is an emoji like any."""
    good = record(0, "sur-ok")
    broken = json.dumps(record(1, "sur-bad")).replace('"llama-3.1-8b-instruct"', '"x\\ud800"')
    pair = json.dumps(record(2, "sur-pair")).replace('"team-a"', '"team \\ud83d\\ude00"')
    body = "\n".join([json.dumps(good), broken, pair]).encode()
    for headers in (NDJSON, JSON):
        sent = body if headers is NDJSON else b"[" + body.replace(b"\n", b",") + b"]"
        r = ingest.post("/v1/requests", content=sent, headers=headers)
        assert r.status_code == 200, r.text
        answer = r.json()
        assert answer["rejected"] == 1
        assert answer["accepted"] + answer["duplicates"] == 2
        (error,) = answer["errors"]
        assert (error["index"], error["field"]) == (1, "model")
        assert "unpaired UTF-16 surrogate" in error["message"]
    assert stored(live, gateway) == 2
    assert live.scalar("SELECT tenant FROM requests WHERE request_id = 'sur-pair-2'") == (
        "team \U0001f600"
    )
    raw = live.scalar(
        "SELECT raw FROM rejects WHERE field = 'model' AND gateway = ? LIMIT 1", [gateway]
    )
    assert "\\ud800" in raw and "sur-bad-1" in raw


def test_millions_of_tiny_items_are_refused_by_count_before_parsing(live, ingest, gateway):
    """16 MB of `{}` (5.5 million items, a few KB gzipped) is refused by its count, as an
    array and as NDJSON, before any item is built; one refusal kept for each."""
    gz = {"Content-Encoding": "gzip"}
    empties = b",".join([b"{}"] * 5_500_000)
    for body, headers in ((b"[" + empties + b"]", JSON), (empties.replace(b",", b"\n"), NDJSON)):
        r = ingest.post("/v1/requests", content=gzip.compress(body), headers={**headers, **gz})
        assert r.status_code == 400, r.text
        assert "more than the limit of 100000; split the batch" in r.json()["detail"]
    assert live.scalar("SELECT count(*) FROM rejects WHERE gateway = ?", [gateway]) == 2


def test_a_deep_item_inside_an_array_is_rejected_alone(live, ingest, gateway):
    """A 10,000-deep item in a JSON array is that item's reject, as in NDJSON; the rest stored."""
    deep = '{"model":"m","isl":1,"osl":1,"x":' + "[" * 10_000 + "]" * 10_000 + "}"
    body = (
        "[" + json.dumps(record(0, "deep")) + "," + deep + "," + json.dumps(record(1, "deep")) + "]"
    )
    r = ingest.post("/v1/requests", content=body, headers=JSON)
    assert r.status_code == 200, r.text
    answer = r.json()
    assert (answer["accepted"], answer["rejected"]) == (2, 1)
    assert answer["errors"][0]["index"] == 1 and "deep" in answer["errors"][0]["message"]
    assert stored(live, gateway) == 2


@pytest.mark.parametrize(
    "field", ["isl", "osl", "ttft_ms", "e2e_ms", "sample_rate", "cached_tokens"]
)
def test_a_boolean_is_not_a_number(live, ingest, gateway, field):
    """`true` in a numeric field is refused by name, never read as 1."""
    r = ingest.post("/v1/requests", json=[record(0, "bool"), {**record(1, "bool"), field: True}])
    answer = r.json()
    assert (answer["accepted"], answer["rejected"]) == (1, 1)
    assert answer["errors"][0]["field"] == field


def test_a_reason_echoing_a_huge_value_is_capped(live, ingest, gateway):
    """A 100 KB `status` value: its reason (which quotes it) is cut to 1,000 characters, in
    the answer and in `rejects`, and the raw item to TOKENSHAPE_REJECT_RAW_CHARS."""
    r = ingest.post("/v1/requests", json=[record(0, "cap"), record(1, "cap", status="x" * 100_000)])
    (error,) = r.json()["errors"]
    assert error["field"] == "status" and len(error["message"]) <= 1000
    assert error["message"].endswith("…(truncated)")
    reason, raw = (
        live.db.cursor()
        .execute("SELECT reason, raw FROM rejects WHERE gateway = ?", [gateway])
        .fetchone()
    )
    assert len(reason) <= 1000 and len(raw) <= live.app.state.runtime.settings.reject_raw_chars


def test_gzip_without_content_encoding_says_so(live, ingest):
    """A gzip body sent as plain JSON or NDJSON: the answer names the missing header."""
    for headers in (JSON, NDJSON):
        r = ingest.post("/v1/requests", content=gzipped(ndjson(batch(3))), headers=headers)
        assert r.status_code == 400
        assert (
            "looks like gzip (starts with 1f 8b): set Content-Encoding: gzip" in r.json()["detail"]
        )
