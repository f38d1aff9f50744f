"""LiteLLM's `generic_api` callback: StandardLoggingPayload items into canonical records.

Each payload is mapped to a native record and then checked by exactly the native rules, so a
LiteLLM request is stored as if its gateway had shipped it natively. Field names in errors are
LiteLLM's (prompt_tokens, startTime, …), so the message points at what the proxy sent.

Mapping: id → request_id; model_group (else model) → model; the host of api_base → engine (the
deployment that served it); prompt_tokens / completion_tokens → isl / osl; startTime → started_at;
endTime − startTime → e2e_ms; completionStartTime − startTime → ttft_ms for streamed requests
(without streaming the first token arrives with the whole answer); metadata.user_api_key_alias →
tenant; metadata.sample_rate (else the same key in metadata.spend_logs_metadata or
metadata.requester_metadata, where a request's own `metadata` lands) → sample_rate, the
probability the record was kept; status "failure" → status "error" with
error_information.error_class (else error_str).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from urllib.parse import urlparse

from app.storage.batches import Reject
from ingest.formats.mapped import check
from ingest.formats.native import EnvelopeError, Parsed

# Native field → the LiteLLM field it came from, for error messages.
SOURCE_FIELD = {
    "request_id": "id",
    "model": "model_group",
    "isl": "prompt_tokens",
    "osl": "completion_tokens",
    "started_at": "startTime",
    "e2e_ms": "endTime",
    "ttft_ms": "completionStartTime",
    "tenant": "metadata.user_api_key_alias",
    "engine": "api_base",
    "sample_rate": "metadata.sample_rate",
}
# Where a sample rate may sit in the payload's metadata: set by the logging hook, or passed
# with the request (`metadata={"spend_logs_metadata": {...}}` reaches the logs nested).
_NESTED_METADATA = ("spend_logs_metadata", "requester_metadata")


class PayloadError(ValueError):
    """A payload that cannot become a record; names the LiteLLM field."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field = field


def _seconds(value: object, field: str) -> float | None:
    """Epoch seconds from LiteLLM's float seconds or an ISO 8601 string."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise PayloadError(field, f"litellm: {field} must be epoch seconds or an ISO time")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            when = datetime.fromisoformat(value)
        except ValueError:
            raise PayloadError(
                field, f"litellm: {field} {value[:40]!r} is not epoch seconds or an ISO time"
            ) from None
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    raise PayloadError(field, f"litellm: {field} must be epoch seconds or an ISO time")


def _sample_rate(metadata: dict) -> object:
    """The sample rate the metadata carries, as sent (the native rule checks it), or None."""
    if metadata.get("sample_rate") is not None:
        return metadata["sample_rate"]
    for key in _NESTED_METADATA:
        nested = metadata.get(key)
        if isinstance(nested, dict) and nested.get("sample_rate") is not None:
            return nested["sample_rate"]
    return None


def to_native(item: object) -> dict:
    """One StandardLoggingPayload as a native record dict; PayloadError names the field."""
    if isinstance(item, _BadLine):
        raise PayloadError(None, str(item))
    if not isinstance(item, dict):
        raise PayloadError(None, "litellm: each log entry must be a JSON object")
    failed = item.get("status") == "failure"
    for field in ("prompt_tokens", "completion_tokens"):
        if item.get(field) is None and not failed:
            raise PayloadError(
                field,
                f"litellm: {field} is missing; the token counts are what tokenshape measures "
                "(check the proxy logs usage for this model)",
            )
    start = _seconds(item.get("startTime"), "startTime")
    end = _seconds(item.get("endTime"), "endTime")
    first = _seconds(item.get("completionStartTime"), "completionStartTime")
    metadata: dict = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}  # type: ignore[assignment]  # a dict: checked
    rec: dict = {
        "request_id": item.get("id"),
        "model": item.get("model_group") or item.get("model"),
        "isl": item.get("prompt_tokens") or 0,
        "osl": item.get("completion_tokens") or 0,
        "tenant": metadata.get("user_api_key_alias"),
        "stream": item.get("stream") if isinstance(item.get("stream"), bool) else None,
        "sample_rate": _sample_rate(metadata),
    }
    if isinstance(item.get("api_base"), str) and item["api_base"]:
        rec["engine"] = urlparse(item["api_base"]).netloc or item["api_base"]
    if start is not None:
        rec["started_at"] = start
        if end is not None:
            rec["e2e_ms"] = (end - start) * 1000
        if first is not None and rec["stream"]:
            rec["ttft_ms"] = (first - start) * 1000
    if failed:
        info = item.get("error_information")
        info = info if isinstance(info, dict) else {}
        rec["status"] = "error"
        rec["error_type"] = str(info.get("error_class") or item.get("error_str") or "error")[:256]
    return {k: v for k, v in rec.items() if v is not None}


def _items(body: bytes, ndjson: bool) -> list:
    body = body.strip()
    if not body:
        raise EnvelopeError("litellm: the body is empty: send the callback's JSON or NDJSON")
    try:
        value = json.loads(body)  # json_array or single (LiteLLM may send ndjson as JSON too)
    except RecursionError:
        raise EnvelopeError("litellm: the body nests JSON too deep to parse") from None
    except ValueError as exc:
        if b"\n" not in body:
            raise EnvelopeError(
                f"litellm: the body is not JSON ({exc}); set the callback's log_format to "
                "json_array, ndjson or single"
            ) from None
        value = None
    if value is not None and not ndjson:
        return value if isinstance(value, list) else [value]
    items = []
    for line in body.splitlines():  # ndjson: a bad line is that item's error, not the body's
        if line.strip():
            try:
                items.append(json.loads(line))
            except RecursionError:
                items.append(_BadLine("litellm: line nests JSON too deep to parse"))
            except ValueError as exc:
                items.append(_BadLine(f"litellm: line is not JSON ({exc})"))
    return items


class _BadLine(str):
    """An NDJSON line that did not parse (its message)."""


def parse(
    body: bytes, *, ndjson: bool, gateway: str, received_at: datetime, max_items: int
) -> Parsed:
    """Parse a json_array, ndjson or single-payload body into rows and rejects."""
    items = _items(body, ndjson)
    rejects: list[Reject] = []
    mapped: list[dict] = []
    origin: list[int] = []
    for index, item in enumerate(items):
        try:
            mapped.append(to_native(item))
            origin.append(index)
        except PayloadError as exc:
            rejects.append(Reject(index, exc.field, str(exc), json.dumps(item)[:4096]))
    if not mapped and not rejects:
        raise EnvelopeError("litellm: the body holds no log entries")
    return check(
        mapped,
        origin,
        rejects,
        source_field=SOURCE_FIELD,
        prefix="litellm",
        items=len(items),
        gateway=gateway,
        received_at=received_at,
        max_items=max_items,
    )
