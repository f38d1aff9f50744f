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

Every item counts against TOKENSHAPE_MAX_ITEMS_PER_REQUEST, valid or not, and is counted before
any is built (ingest/jsonscan). Each payload is decoded into just the fields the mapping reads
(msgspec skips the rest without building it), so a 16 MB `messages` or `metadata` costs its
bytes, not gigabytes. The mapping is total: whatever JSON a field holds, the payload becomes a
record or a reject naming the field. Booleans are not numbers and empty is not zero: a
prompt_tokens of "", false or [] is refused, as are a non-string api_base, a metadata that is
not an object, and times that are not finite epoch seconds or ISO 8601 text.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from urllib.parse import urlparse

import msgspec

from app.storage.batches import Reject
from app.storage.schema import MAX_TOKENS
from ingest.body import GZIP_HINT, looks_like_gzip
from ingest.formats.mapped import check
from ingest.formats.native import (
    EnvelopeError,
    Parsed,
    array_spans,
    check_containers,
    check_lines,
    loads,
    nonblank_line_items,
    strip_bom,
    too_many_items,
)

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
    "stream": "stream",
    "error_type": "error_information.error_class",
}
# Where a sample rate may sit in the payload's metadata: set by the logging hook, or passed
# with the request (`metadata={"spend_logs_metadata": {...}}` reaches the logs nested).
_NESTED_METADATA = ("spend_logs_metadata", "requester_metadata")
_ABSENT = msgspec.Raw()
# The raw text of a rejected payload kept with its reject (the table keeps less still).
RAW_CHARS = 4096


class _Nested(msgspec.Struct):
    sample_rate: msgspec.Raw = _ABSENT


class _Metadata(msgspec.Struct):
    user_api_key_alias: msgspec.Raw = _ABSENT
    sample_rate: msgspec.Raw = _ABSENT
    spend_logs_metadata: msgspec.Raw = _ABSENT
    requester_metadata: msgspec.Raw = _ABSENT


class _ErrorInformation(msgspec.Struct):
    error_class: msgspec.Raw = _ABSENT


class _Payload(msgspec.Struct):
    """The StandardLoggingPayload fields the mapping reads, each kept as its raw JSON."""

    id: msgspec.Raw = _ABSENT
    model_group: msgspec.Raw = _ABSENT
    model: msgspec.Raw = _ABSENT
    prompt_tokens: msgspec.Raw = _ABSENT
    completion_tokens: msgspec.Raw = _ABSENT
    startTime: msgspec.Raw = _ABSENT  # noqa: N815  # LiteLLM's names
    endTime: msgspec.Raw = _ABSENT  # noqa: N815
    completionStartTime: msgspec.Raw = _ABSENT  # noqa: N815
    api_base: msgspec.Raw = _ABSENT
    metadata: msgspec.Raw = _ABSENT
    stream: msgspec.Raw = _ABSENT
    status: msgspec.Raw = _ABSENT
    error_information: msgspec.Raw = _ABSENT
    error_str: msgspec.Raw = _ABSENT


_payload = msgspec.json.Decoder(_Payload)
_valid = msgspec.json.Decoder(msgspec.Raw)
# Objects the mapping looks inside, and the struct of the fields it reads there.
_INSIDE: dict[str, type[msgspec.Struct]] = {
    "metadata": _Metadata,
    "error_information": _ErrorInformation,
    "spend_logs_metadata": _Nested,
    "requester_metadata": _Nested,
}


class PayloadError(ValueError):
    """A payload that cannot become a record; names the LiteLLM field."""

    def __init__(self, field: str | None, message: str):
        super().__init__(message)
        self.field = field


class _Opaque:
    """A value the mapping does not build (a container), or cannot (a number out of range,
    text that is not UTF-8): what it is, for messages."""

    __slots__ = ("kind",)

    def __init__(self, kind: str):
        self.kind = kind


def _kind(value: object) -> str:
    """How a JSON value is named in messages."""
    if isinstance(value, _Opaque):
        return value.kind
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "an empty string" if not value else "a string"
    return "a number"


def _value(raw: msgspec.Raw, name: str) -> object:
    """A field's JSON as a Python value: scalars decoded, the objects the mapping reads as
    dicts of their fields, any other container left unbuilt (an _Opaque naming its kind)."""
    first = memoryview(raw)[:1].tobytes()
    if first == b"{":
        inside = _INSIDE.get(name)
        if inside is None:
            return _Opaque("an object")
        try:
            struct = msgspec.json.decode(raw, type=inside)
        except (msgspec.DecodeError, msgspec.ValidationError, RecursionError):
            return _Opaque("an object")
        return _fields(struct)
    if first == b"[":
        return _Opaque("an array")
    try:
        return msgspec.json.decode(raw)
    except msgspec.ValidationError:  # 1e400: out of a float's range
        return _Opaque("a number out of range")
    except msgspec.DecodeError:  # skipped unchecked, then decoded: text that is not UTF-8
        return _Opaque("text that is not valid UTF-8")


def _fields(struct: msgspec.Struct) -> dict:
    """The present fields of a decoded struct as a dict of Python values."""
    out = {}
    for name in struct.__struct_fields__:
        raw = getattr(struct, name)
        if len(raw):
            out[name] = _value(raw, name)
    return out


def _seconds(value: object, field: str) -> float | None:
    """Epoch seconds from LiteLLM's float seconds or an ISO 8601 string."""
    if value is None:
        return None
    wanted = f"litellm: {field} must be epoch seconds or an ISO 8601 time"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise PayloadError(field, f"{wanted}, got {_kind(value)}")
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
        if not math.isfinite(seconds):
            raise PayloadError(field, f"{wanted}; it is not a finite number")
        return seconds
    try:
        when = datetime.fromisoformat(value)
        return (when if when.tzinfo else when.replace(tzinfo=UTC)).timestamp()
    except (ValueError, OverflowError, OSError):
        raise PayloadError(field, f"{wanted}, got {value[:40]!r}") from None


def _tokens(value: object, field: str, failed: bool) -> int:
    """A token count: a whole number 0..MAX_TOKENS; absent only for a failed request (0)."""
    if value is None:
        if failed:
            return 0
        raise PayloadError(
            field,
            f"litellm: {field} is missing; the token counts are what tokenshape measures "
            "(check the proxy logs usage for this model)",
        )
    if isinstance(value, bool) or not isinstance(value, int):
        raise PayloadError(
            field, f"litellm: {field} must be a whole number of tokens, got {_kind(value)}"
        )
    if not 0 <= value <= MAX_TOKENS:
        shown = f"{value}" if abs(value) < 10**30 else "a number that large"
        raise PayloadError(
            field, f"litellm: {field} must be between 0 and {MAX_TOKENS:,}, got {shown}"
        )
    return value


def _text(value: object, field: str) -> str | None:
    """A string field as sent; null and absent are None; anything else is refused."""
    if value is None or isinstance(value, str):
        return value
    raise PayloadError(field, f"litellm: {field} must be a string, got {_kind(value)}")


def _object(value: object, field: str) -> dict:
    """An object field's members; null and absent are empty; anything else is refused."""
    if value is None:
        return {}
    if isinstance(value, dict):
        return value
    raise PayloadError(field, f"litellm: {field} must be an object, got {_kind(value)}")


def _rate(value: object, field: str) -> float | int | None:
    """A sample rate as sent (the native rule checks its range), if it is a number."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PayloadError(
            field, f"litellm: {field} must be a number with 0 < p <= 1, got {_kind(value)}"
        )
    if isinstance(value, int) and not 0 <= value <= 1:
        raise PayloadError(field, f"litellm: {field} must be a number with 0 < p <= 1")
    return value


def _sample_rate(metadata: dict) -> tuple[float | int | None, str]:
    """The sample rate the metadata carries (the native rule checks it) and where it sat."""
    if metadata.get("sample_rate") is not None:
        return _rate(metadata["sample_rate"], "metadata.sample_rate"), "metadata.sample_rate"
    for key in _NESTED_METADATA:
        nested = _object(metadata.get(key), f"metadata.{key}")
        if nested.get("sample_rate") is not None:
            where = f"metadata.{key}.sample_rate"
            return _rate(nested["sample_rate"], where), where
    return None, "metadata.sample_rate"


def _engine(value: object) -> str | None:
    """The deployment that served the request: the host of api_base (else api_base)."""
    base = _text(value, "api_base")
    if not base:
        return None
    try:
        # Without a scheme ("vllm-chat:8000/v1") urlparse finds no host: read it as a
        # network path, so the engine is the host and never holds the path's "/".
        return urlparse(base).netloc or urlparse("//" + base.lstrip("/")).netloc or base
    except ValueError as exc:  # "http://[::1": an unclosed IPv6 bracket
        raise PayloadError(
            "api_base", f"litellm: api_base {base[:80]!r} is not a URL ({exc})"
        ) from None


def _finite_ms(seconds: float, field: str) -> float:
    """A duration in milliseconds, refused when the times it came from overflow it."""
    ms = seconds * 1000
    if not math.isfinite(ms):
        raise PayloadError(field, f"litellm: {field} is too far from startTime")
    return ms


def to_native(item: object) -> dict:
    """One StandardLoggingPayload as a native record dict; PayloadError names the field.
    Total: whatever JSON the payload holds, it returns or raises PayloadError, nothing else."""
    if isinstance(item, _BadLine):
        raise PayloadError(None, str(item))
    if not isinstance(item, dict):
        raise PayloadError(None, "litellm: each log entry must be a JSON object")
    status = _text(item.get("status"), "status")
    if status not in (None, "success", "failure"):
        raise PayloadError(
            "status", f"litellm: status must be success or failure, got {status[:40]!r}"
        )
    failed = status == "failure"
    isl = _tokens(item.get("prompt_tokens"), "prompt_tokens", failed)
    osl = _tokens(item.get("completion_tokens"), "completion_tokens", failed)
    start = _seconds(item.get("startTime"), "startTime")
    end = _seconds(item.get("endTime"), "endTime")
    first = _seconds(item.get("completionStartTime"), "completionStartTime")
    metadata = _object(item.get("metadata"), "metadata")
    stream = item.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise PayloadError("stream", f"litellm: stream must be true or false, got {_kind(stream)}")
    sample_rate, _ = _sample_rate(metadata)
    rec: dict = {
        "request_id": _text(item.get("id"), "id"),
        "model": _text(item.get("model_group"), "model_group") or _text(item.get("model"), "model"),
        "isl": isl,
        "osl": osl,
        "tenant": _text(metadata.get("user_api_key_alias"), "metadata.user_api_key_alias"),
        "stream": stream,
        "sample_rate": sample_rate,
        "engine": _engine(item.get("api_base")),
    }
    if start is not None:
        rec["started_at"] = start
        if end is not None:
            rec["e2e_ms"] = _finite_ms(end - start, "endTime")
        if first is not None and stream:
            rec["ttft_ms"] = _finite_ms(first - start, "completionStartTime")
    if failed:
        info = _object(item.get("error_information"), "error_information")
        kind = _text(info.get("error_class"), "error_information.error_class")
        rec["status"] = "error"
        rec["error_type"] = (kind or _text(item.get("error_str"), "error_str") or "error")[:256]
    return {k: v for k, v in rec.items() if v is not None}


class _BadLine(str):
    """An entry that did not parse (its message)."""


def decode_item(raw: bytes, noun: str = "entry") -> object:
    """One payload's JSON as what `to_native` maps: a dict of the fields it reads (others
    skipped unbuilt), another JSON value, or a _BadLine saying why it is not JSON."""
    try:
        return _fields(_payload.decode(raw))
    except RecursionError:
        return _BadLine(f"litellm: {noun} nests JSON too deep to parse")
    except msgspec.ValidationError:  # valid JSON, not an object
        return _BadLine("litellm: each log entry must be a JSON object")
    except msgspec.DecodeError as exc:
        error: Exception = exc
    try:  # NaN / Infinity, which Python's json writes: the field gets the error
        return loads(raw)
    except RecursionError:
        return _BadLine(f"litellm: {noun} nests JSON too deep to parse")
    except ValueError:
        pass
    return _BadLine(f"litellm: {noun} is not JSON ({str(error)[:200]})")


def _raw_items(body: bytes, ndjson: bool, max_items: int) -> tuple[list[bytes], str]:
    """Each item's raw JSON, counted before any is kept; and what an item is called."""
    body = strip_bom(body)
    if not body:
        raise EnvelopeError("litellm: the body is empty: send the callback's JSON or NDJSON")
    if looks_like_gzip(body):  # JSON or NDJSON: never these two bytes first
        raise EnvelopeError(f"litellm: {GZIP_HINT}")
    # Items counted first (the limit a sender can act on), then containers, before any
    # entry is parsed leniently (json.loads builds every container).
    if not ndjson and body[:1] == b"[":  # json_array
        _, spans = array_spans(body, max_items)
        check_containers(body, max_items)
        if spans is not None:
            return [body[start:end].strip() for start, end in spans], "entry"
        if b"\n" not in body:
            raise EnvelopeError(_not_json(body))
    elif not ndjson:  # single (LiteLLM may send ndjson as JSON too)
        check_containers(body, max_items)
        try:
            _valid.decode(body)  # checked, not built
            if not body.isascii():  # skipping does not check UTF-8: one transient str does
                body.decode()
            return [body], "entry"
        except UnicodeDecodeError as exc:
            raise EnvelopeError(
                f"litellm: the body is not valid UTF-8 ({exc.reason} at byte {exc.start}); "
                "send UTF-8 JSON"
            ) from None
        except RecursionError:
            raise EnvelopeError("litellm: the body nests JSON too deep to parse") from None
        except msgspec.DecodeError:
            pass
        if not isinstance(decode_item(body), _BadLine):  # NaN / Infinity in one payload
            return [body], "entry"
        if b"\n" not in body:
            raise EnvelopeError(_not_json(body))
    check_lines(body, max_items)  # ndjson: a bad line is that item's error, not the body's
    check_containers(body, max_items)
    return [line for _, line in nonblank_line_items(body)], "line"


def _not_json(body: bytes) -> str:
    """The refusal of a body that is not JSON at all."""
    try:
        _valid.decode(body)
        detail = "it is not one JSON value"
    except RecursionError:
        return "litellm: the body nests JSON too deep to parse"
    except msgspec.DecodeError as exc:
        detail = str(exc)[:200]
    return (
        f"litellm: the body is not JSON ({detail}); set the callback's log_format to "
        "json_array, ndjson or single"
    )


def parse(
    body: bytes, *, ndjson: bool, gateway: str, received_at: datetime, max_items: int
) -> Parsed:
    """Parse a json_array, ndjson or single-payload body into rows and rejects."""
    raws, noun = _raw_items(body, ndjson, max_items)
    if len(raws) > max_items:  # every entry counts, valid or not
        raise too_many_items(len(raws), max_items)
    rejects: list[Reject] = []
    mapped: list[dict] = []
    origin: list[int] = []
    for index, raw in enumerate(raws):
        try:
            mapped.append(to_native(decode_item(raw, noun)))
            origin.append(index)
        except PayloadError as exc:
            text = raw[:RAW_CHARS].decode(errors="replace")
            rejects.append(Reject(index, exc.field, str(exc), text))
    if not mapped and not rejects:
        raise EnvelopeError("litellm: the body holds no log entries")
    return check(
        mapped,
        origin,
        rejects,
        source_field=SOURCE_FIELD,
        prefix="litellm",
        items=len(raws),
        gateway=gateway,
        received_at=received_at,
        max_items=max_items,
    )
