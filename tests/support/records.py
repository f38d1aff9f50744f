"""Record builders: native records, batches of them, their wire forms, and direct stores."""

from __future__ import annotations

import gzip
import json
from datetime import UTC, datetime, timedelta
from typing import Any

BASE_TIME = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
LITELLM_START = 1_795_000_000.25  # epoch seconds, as LiteLLM sends startTime


def record(i: int = 0, prefix: str = "r", **overrides: Any) -> dict[str, Any]:
    """One valid native record; `overrides` replace or add fields (None removes one)."""
    rec: dict[str, Any] = {
        "request_id": f"{prefix}-{i}",
        "started_at": (BASE_TIME + timedelta(seconds=i)).isoformat().replace("+00:00", "Z"),
        "model": "llama-3.1-8b-instruct",
        "engine": "chat-8b",
        "tenant": "team-a",
        "isl": 100 + i,
        "osl": 20 + i % 50,
        "ttft_ms": 80.0,
        "e2e_ms": 900.0,
        "itl_ms": 12.5,
        "status": "ok",
        "stream": True,
    }
    for key, value in overrides.items():
        if value is None:
            rec.pop(key, None)
        else:
            rec[key] = value
    return rec


def batch(n: int, prefix: str = "r", start: int = 0) -> list[dict[str, Any]]:
    """n valid records with ids prefix-start .. prefix-(start+n-1)."""
    return [record(i, prefix) for i in range(start, start + n)]


def ndjson(records: list[dict[str, Any]]) -> bytes:
    """Records as NDJSON bytes."""
    return b"".join(json.dumps(r).encode() + b"\n" for r in records)


def gzipped(data: bytes) -> bytes:
    """gzip-compressed bytes."""
    return gzip.compress(data)


def store(db, records: list[dict[str, Any]], gateway: str = "gw-test") -> int:
    """Validate records with the ingest rules and store them directly; returns rows stored."""
    import msgspec

    from app.storage.batches import Batch
    from app.storage.write.store import RequestStore
    from ingest.records import RecordIn, to_rows

    recs = [msgspec.convert(r, RecordIn) for r in records]
    rows, rejects = to_rows(
        recs, list(range(len(recs))), gateway=gateway, received_at=datetime.now(UTC)
    )
    assert not rejects, rejects
    con = db.new_cursor()
    try:
        (result,) = RequestStore(con).write([Batch(gateway, "test", datetime.now(UTC), rows)])
    finally:
        con.close()
    return result.accepted


def request_rows(ids: list[str], gateway: str = "g"):
    """Arrow rows of minimal valid records with these request ids, as the writer stores them."""
    from ingest.records import RecordIn, to_rows

    recs = [RecordIn(model="m", isl=1, osl=1, request_id=i) for i in ids]
    out, rejects = to_rows(
        recs, list(range(len(ids))), gateway=gateway, received_at=datetime.now(UTC)
    )
    assert not rejects
    return out


def litellm_payload(i: int, **overrides) -> dict:
    """A StandardLoggingPayload as LiteLLM's docs describe it (the fields tokenshape reads, and
    some it ignores)."""
    start = LITELLM_START
    p = {
        "id": f"chatcmpl-{i}",
        "call_type": "acompletion",
        "stream": True,
        "response_cost": 0.00012,
        "status": "success",
        "total_tokens": 1300 + i,
        "prompt_tokens": 1200 + i,
        "completion_tokens": 100,
        "startTime": start + i,
        "endTime": start + i + 2.5,
        "completionStartTime": start + i + 0.4,
        "model": "hosted_vllm/meta-llama/Llama-3.1-8B-Instruct",
        "model_id": "deploy-1",
        "model_group": "llama-3.1-8b",
        "api_base": "http://vllm-chat-8b:8000/v1",
        "metadata": {"user_api_key_alias": "team-search", "user_api_key_team_id": "t1"},
        "cache_hit": False,
        "messages": [{"role": "user", "content": "hi"}],
        "response": {"choices": []},
        "error_str": None,
        "error_information": {"error_code": "", "error_class": "", "llm_provider": ""},
    }
    p.update(overrides)
    return p
