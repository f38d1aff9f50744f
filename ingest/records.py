"""The canonical record (DESIGN §4): its wire form, validation rules, and Arrow conversion."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from itertools import repeat
from typing import Annotated, Literal, NamedTuple

import msgspec
import numpy as np
import pyarrow as pa
from msgspec.structs import astuple

from app.storage.batches import Reject
from app.storage.schema import EARLIEST, FUTURE_SLACK, MAX_TOKENS, REQUESTS_SCHEMA
from app.storage.write.keys import key_hashes_of

MAX_GAPS = 1_000_000

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_TOKENS)]
Millis = Annotated[float, msgspec.Meta(ge=0)]
# The probability the gateway kept the record: the row stands for 1/p requests. The floor is
# 2^-56, the smallest probability an OpenTelemetry sampling threshold can express; it keeps
# every weight and every sum of them finite.
MIN_SAMPLE_RATE = 2.0**-56
Probability = Annotated[float, msgspec.Meta(ge=MIN_SAMPLE_RATE, le=1)]


class RecordIn(msgspec.Struct, gc=False):
    """One request as a gateway sends it; unknown fields are ignored."""

    model: Name
    isl: Count
    osl: Count
    request_id: Name | None = None
    started_at: str | float | None = None
    engine: Name | None = None
    tenant: Name | None = None
    tokens_estimated: bool = False
    ttft_ms: Millis | None = None
    e2e_ms: Millis | None = None
    itl_ms: Millis | None = None
    queue_ms: Millis | None = None
    token_gaps_ms: Annotated[list[Millis], msgspec.Meta(max_length=MAX_GAPS)] | None = None
    status: Literal["ok", "error", "cancelled"] = "ok"
    error_type: Name | None = None
    stream: bool | None = None
    cached_tokens: Count | None = None
    sample_rate: Probability | None = None


FIELDS: tuple[str, ...] = RecordIn.__struct_fields__
_TS = pa.timestamp("us", tz="UTC")
_TEXT_FIELDS = ("request_id", "model", "engine", "tenant", "error_type", "started_at")
# The wire fields as Arrow types, and those stored as they come, in the table's order.
_FIELDS_STRUCT = pa.struct(
    [
        (name, REQUESTS_SCHEMA.field(name).type if name != "started_at" else pa.string())
        for name in FIELDS
    ]
)
_STORED_FIELDS = REQUESTS_SCHEMA.names[4:]

_PATH = re.compile(r" - at `\$(?:\[\d+\])?\.?([^`]*)`$")
_MISSING = re.compile(r"missing required field `([^`]+)`")
_encoder = msgspec.json.Encoder()
# What to send instead, added to msgspec's words for fields whose rule is not self-evident.
_HINTS = {
    "sample_rate": (
        "send the probability the record was kept, a number with 0 < p <= 1 (0.01 for a 1% "
        "sample; at least 2^-56), or leave it out for a record that was not sampled"
    ),
}


def describe_error(exc: Exception) -> tuple[str | None, str]:
    """(field, message) from a msgspec error, the message naming the field."""
    text = str(exc)
    match = _PATH.search(text)
    if match:
        field = match.group(1).split("[")[0].split(".")[0] or None
        text = text[: match.start()]
    else:
        missing = _MISSING.search(text)
        field = missing.group(1) if missing else None
    text = text.replace("`", "")
    if field and not text.startswith(field):
        text = f"{field}: {text}"
    if field in _HINTS:
        text = f"{text}; {_HINTS[field]}"
    return field, text


def _epoch_us(values: np.ndarray) -> np.ndarray:
    """Epoch numbers to microseconds, guessing the unit by magnitude (s, ms, us or ns)."""
    scale = np.where(
        values >= 1e17, 1e-3, np.where(values >= 1e14, 1.0, np.where(values >= 1e11, 1e3, 1e6))
    )
    # Clipped: a number like 1e300 must fail the range check, not overflow the int64 cast.
    return np.round(np.clip(values * scale, -9e18, 9e18)).astype(np.int64)


def _parse_time(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def microseconds(when: datetime) -> int:
    """A time as epoch microseconds."""
    return int((when - datetime(1970, 1, 1, tzinfo=UTC)) / timedelta(microseconds=1))


def _time_bounds(received_us: int) -> tuple[int, int]:
    """The accepted started_at range in epoch microseconds: EARLIEST to FUTURE_SLACK ahead."""
    return microseconds(EARLIEST), received_us + int(FUTURE_SLACK / timedelta(microseconds=1))


def _started_us(
    texts: pa.Array | None, records: list[RecordIn], received_us: int
) -> tuple[np.ndarray, dict[int, str]]:
    """started_at as epoch microseconds; absent means the receive time. Returns bad positions.

    texts: the field as an Arrow string column, None when some value is not text."""
    if texts is not None:
        try:  # fast path, all C: every value is an ISO 8601 string with a zone, or absent
            # view, not cast: the same 64-bit values without a compute call (~30 us each).
            arr = texts.cast(_TS).view(pa.int64())
            out = arr.fill_null(received_us) if arr.null_count else arr
            return out.to_numpy().astype(np.int64, copy=False), {}
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            pass
    values = [rec.started_at for rec in records]
    out = np.full(len(values), received_us, dtype=np.int64)
    bad: dict[int, str] = {}
    numbers = [(i, v) for i, v in enumerate(values) if isinstance(v, float | int)]
    if numbers:
        idx, nums = zip(*numbers, strict=True)
        out[list(idx)] = _epoch_us(np.asarray(nums, dtype=np.float64))
    for i, text in enumerate(values):
        if not isinstance(text, str):
            continue
        parsed = _parse_time(text)
        if parsed is None:
            bad[i] = (
                f"started_at: {text[:64]!r} is not an ISO 8601 time "
                "(e.g. 2026-11-20T10:00:00Z) or epoch seconds"
            )
        else:
            out[i] = (parsed - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)
    return out, bad


def content_id(rec: RecordIn) -> str:
    """A stable id for a record without request_id: a hash of its content."""
    return "sha1:" + hashlib.sha1(_encoder.encode(rec), usedforsecurity=False).hexdigest()


def raw_of(rec: RecordIn) -> str:
    """The record as JSON text, for the rejects table."""
    return _encoder.encode(rec).decode()


class Rows(NamedTuple):
    """The valid records as Arrow rows, their dedupe key hashes, and the invalid ones."""

    table: pa.Table
    hashes: np.ndarray
    rejects: list[Reject]


def to_rows(
    records: list[RecordIn],
    indexes: list[int],
    *,
    gateway: str,
    received_at: datetime,
) -> tuple[pa.Table, list[Reject]]:
    """Check the cross-field rules and build the Arrow rows of the valid records."""
    built = build_rows(records, indexes, gateway=gateway, received_at=received_at)
    return built.table, built.rejects


def build_rows(
    records: list[RecordIn],
    indexes: list[int],
    *,
    gateway: str,
    received_at: datetime,
) -> Rows:
    """`to_rows`, plus each kept row's key hash (`key_hashes`), taken from the request ids
    while they are still Python strings: reading them back from Arrow costs twice as much,
    and the writer would do it on the event loop in the middle of a flush."""
    try:
        return _build_rows(records, indexes, gateway, received_at)
    except UnicodeEncodeError:
        pass
    # JSON may escape half of a UTF-16 pair alone ("\ud800"); msgspec decodes that into a
    # string UTF-8 cannot hold, so those records are rejected here, by field, and the rest
    # built again. Checked only after a failure: the scan costs more than the whole build.
    kept: list[RecordIn] = []
    kept_indexes: list[int] = []
    rejects: list[Reject] = []
    for rec, index in zip(records, indexes, strict=True):
        field = _unencodable_field(rec)
        if field is None:
            kept.append(rec)
            kept_indexes.append(index)
            continue
        message = (
            f"{field}: holds an unpaired UTF-16 surrogate (an escape such as \\ud800 without "
            "its partner), which is not valid text; send UTF-8 or a complete surrogate pair"
        )
        raw = json.dumps(msgspec.structs.asdict(rec))  # ASCII, the surrogate kept as an escape
        rejects.append(Reject(index, field, message, raw))
    built = _build_rows(kept, kept_indexes, gateway, received_at)
    return Rows(built.table, built.hashes, rejects + built.rejects)


def _unencodable_field(rec: RecordIn) -> str | None:
    """The first text field of the record that is not valid Unicode, if any."""
    for name in _TEXT_FIELDS:
        value = getattr(rec, name)
        if isinstance(value, str):
            try:
                value.encode()
            except UnicodeEncodeError:
                return name
    return None


def _arrow_columns(records: list[RecordIn]) -> dict[str, pa.Array | None]:
    """Each field of the records as an Arrow column (started_at: None unless all text)."""
    return _struct_columns(records) or _field_columns(records)


def _struct_columns(records: list[RecordIn]) -> dict[str, pa.Array | None] | None:
    """One conversion of the records' tuples into a struct column, split into its fields:
    ~25% less than a conversion per field (no transposing, one call's fixed cost). None when
    a value does not fit its field's type (started_at as epoch seconds)."""
    try:
        whole = pa.array(list(map(astuple, records)), _FIELDS_STRUCT)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return None
    return dict(zip(FIELDS, whole.flatten(), strict=True))


def _field_columns(records: list[RecordIn]) -> dict[str, pa.Array | None]:
    """A conversion per field; started_at None when some value is not text."""
    columns = zip(*map(astuple, records), strict=True) if records else [()] * len(FIELDS)
    out: dict[str, pa.Array | None] = {}
    for name, values in zip(FIELDS, columns, strict=True):
        try:
            out[name] = pa.array(values, _FIELDS_STRUCT.field(name).type)
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            if name != "started_at":
                raise
            out[name] = None
    return out


def _build_rows(
    records: list[RecordIn], indexes: list[int], gateway: str, received_at: datetime
) -> Rows:
    rejects: list[Reject] = []
    n = len(records)
    received_us = microseconds(received_at)
    cols = _arrow_columns(records)
    started, bad_time = _started_us(cols["started_at"], records, received_us)
    ttft, e2e = cols["ttft_ms"], cols["e2e_ms"]
    assert ttft is not None and e2e is not None

    bad = dict(bad_time)
    lo, hi = _time_bounds(received_us)
    for i in np.flatnonzero((started < lo) | (started > hi)):
        if int(i) not in bad:
            try:
                when = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=int(started[i]))
                shown = when.isoformat()
            except OverflowError:  # beyond year 9999: show what was sent
                shown = repr(records[i].started_at)[:64]
            bad[int(i)] = (
                f"started_at: {shown} is outside the accepted range "
                "(2000-01-01 to one day after now); send UTC times or epoch seconds"
            )
    t_np = ttft.to_numpy(zero_copy_only=False)
    e_np = e2e.to_numpy(zero_copy_only=False)
    with np.errstate(invalid="ignore"):
        for i in np.flatnonzero(t_np > e_np):  # NaN (null) compares False
            bad.setdefault(
                int(i),
                f"ttft_ms: time to first token ({t_np[i]:g} ms) exceeds the total time "
                f"e2e_ms ({e_np[i]:g} ms)",
            )
    for at, message in sorted(bad.items()):
        rejects.append(Reject(indexes[at], message.split(":", 1)[0], message, raw_of(records[at])))

    rid = [rec.request_id for rec in records]
    request_ids = cols["request_id"]
    if request_ids is None or request_ids.null_count:
        for at, value in enumerate(rid):
            if value is None:
                rid[at] = content_id(records[at])
        request_ids = pa.array(rid, pa.string())
    hashes = key_hashes_of(zip(repeat(gateway), rid), n)  # type: ignore[arg-type]  # no None left in rid
    table = pa.table(
        [
            pa.repeat(pa.scalar(gateway, pa.string()), n),
            request_ids,
            pa.array(started, _TS),
            pa.array(np.full(n, received_us, dtype=np.int64), _TS),
            *(cols[name] for name in _STORED_FIELDS),
        ],
        schema=REQUESTS_SCHEMA,
    )
    if bad:
        keep = np.ones(n, dtype=bool)
        keep[list(bad)] = False
        table = table.filter(pa.array(keep))
        hashes = hashes[keep]
    return Rows(table, hashes, rejects)
