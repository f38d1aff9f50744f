"""Native records: one JSON object, a JSON array of objects, or NDJSON, into canonical rows."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime

import msgspec
import numpy as np
import pyarrow as pa

from app.storage.batches import Reject
from ingest.records import RecordIn, build_rows, describe_error

_one = msgspec.json.Decoder(RecordIn)
_many = msgspec.json.Decoder(list[RecordIn])
_raw_list = msgspec.json.Decoder(list[msgspec.Raw])
_any = msgspec.json.Decoder()
# The decoders give up past about a thousand levels with RecursionError: a recursion bomb.
TOO_DEEP = "the body nests JSON too deep to parse; records are flat JSON objects"


class EnvelopeError(ValueError):
    """Nothing in the body could be parsed: answered with 400 and kept in `rejects`."""


@dataclass
class Parsed:
    """The outcome of parsing one body: rows to store and items to quarantine."""

    rows: pa.Table
    rejects: list[Reject] = field(default_factory=list)
    items: int = 0
    hashes: np.ndarray | None = None  # the rows' dedupe key hashes, when already known


def _lenient_item(raw: bytes) -> RecordIn:
    """Parse one item accepting NaN/Infinity, so the answer can name the field instead."""
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"each record must be a JSON object, got {type(obj).__name__}")
    for key, value in obj.items():
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            raise FieldError(key, f"{key}: must be a finite number, got {value}")
    return msgspec.convert(obj, RecordIn)


class FieldError(ValueError):
    """A named field is invalid (raised by the lenient parser)."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


def _item(raw: bytes, index: int, out: list, idx: list, rejects: list) -> None:
    try:
        out.append(_one.decode(raw))
        idx.append(index)
        return
    except RecursionError:
        rejects.append(
            Reject(
                index, None, "the record nests JSON too deep to parse", raw.decode(errors="replace")
            )
        )
        return
    except msgspec.ValidationError as exc:
        fld, msg = describe_error(exc)
        if "Expected `object`" in str(exc) and " - at " not in str(exc):
            fld, msg = None, "each record must be a JSON object"
        rejects.append(Reject(index, fld, msg, raw.decode(errors="replace")))
        return
    except msgspec.DecodeError:
        pass
    try:
        rec = _lenient_item(raw)
    except msgspec.ValidationError as exc:
        fld, msg = describe_error(exc)
        rejects.append(Reject(index, fld, msg, raw.decode(errors="replace")))
    except ValueError as exc:
        fld = exc.field if isinstance(exc, FieldError) else None
        rejects.append(Reject(index, fld, str(exc), raw.decode(errors="replace")))
    else:
        out.append(rec)
        idx.append(index)


def _lines(body: bytes) -> list[tuple[int, bytes]]:
    out = []
    for n, line in enumerate(body.split(b"\n")):
        line = line.strip()
        if line:
            out.append((n, line))
    return out


def parse(
    body: bytes, *, ndjson: bool, gateway: str, received_at: datetime, max_items: int
) -> Parsed:
    """Parse a whole body; raises EnvelopeError when nothing in it is usable."""
    body = body.strip()
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:].strip()
    if not body:
        raise EnvelopeError("the body is empty: send a JSON object, a JSON array or NDJSON")
    records: list[RecordIn] = []
    indexes: list[int] = []
    rejects: list[Reject] = []
    items: list[tuple[int, bytes]]
    if not ndjson and body[:1] == b"[":
        try:  # fast path: the whole array is valid
            records = _many.decode(body)
            indexes = list(range(len(records)))
            items = []
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            items = _split_array(body)
    elif not ndjson and body[:1] not in (b"{", b"["):
        raise EnvelopeError(_not_json(body))
    elif not ndjson and (single := _single(body)) is not None:
        items = single
    else:
        # Fast path for clean NDJSON: one C-level decode of every line, no copy of the body.
        # It takes values apart at any whitespace, so it is kept only when each line held
        # one object (the answer's indexes are line numbers); else the line-by-line path.
        try:
            records = _one.decode_lines(body)
            if not _one_object_per_line(body, len(records)):
                raise ValueError("a line held more or less than one object")
            indexes = list(range(len(records)))
            items = []
        except (msgspec.ValidationError, msgspec.DecodeError, ValueError, RecursionError):
            records, items = [], _lines(body)
        if items and (len(items) > 1 or ndjson):  # blank lines or CRs: try the kept lines
            joined = b"[" + b",".join(line for _, line in items) + b"]"
            try:
                fast = _many.decode(joined)
                if len(fast) == len(items):  # a line holding two objects must not shift indexes
                    records, indexes, items = fast, [n for n, _ in items], []
            except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
                pass
    if len(records) + len(items) > max_items:
        raise EnvelopeError(
            f"{len(records) + len(items)} records in one request is more than the limit of "
            f"{max_items}; split the batch"
        )
    for index, raw in items:
        _item(raw, index, records, indexes, rejects)
    total = len(records) + len(rejects)
    if total == 0:
        raise EnvelopeError("the body holds no records")
    built = build_rows(records, indexes, gateway=gateway, received_at=received_at)
    rejects.extend(built.rejects)
    rejects.sort(key=lambda r: -1 if r.index is None else r.index)
    return Parsed(built.table, rejects, total, built.hashes)


def _one_object_per_line(body: bytes, objects: int) -> bool:
    """Whether `objects` JSON objects decoded from a stripped body were one per line.

    Every newline must sit between a `}` (or `}\r`) and a `{`: in JSON that pair is never
    inside one value, so each newline divides objects and no line is blank; then as many
    objects as lines leaves one per line. (Indented lines go the slow way, correctly.)"""
    data = np.frombuffer(body, np.uint8)
    ends = np.flatnonzero(data == 10)  # numpy: bytes.count alone takes 4x as long
    if objects != len(ends) + 1:
        return False
    if not len(ends):
        return True
    before = data[ends - 1]
    before = np.where(before == 13, data[np.maximum(ends - 2, 0)], before)
    return bool((before == 125).all() and (data[ends + 1] == 123).all())


def _not_json(body: bytes) -> str:
    """What is wrong with a body that does not start like JSON."""
    if body[:2] in (b"\xff\xfe", b"\xfe\xff") or b"\x00" in body[:4]:
        return "the body is not UTF-8 (it looks like UTF-16 or UTF-32); send UTF-8 JSON"
    return (
        f"the body is not a JSON object, array or NDJSON (starts with {body[:20]!r}); "
        "send records as JSON objects"
    )


def _single(body: bytes) -> list[tuple[int, bytes]] | None:
    """A JSON body starting with `{`: one object (however it is laid out) is one item; None
    when it is NDJSON sent as JSON; EnvelopeError when it is neither (truncated, not UTF-8)."""
    try:
        _any.decode(body)
        return [(0, body)]
    except RecursionError:
        raise EnvelopeError(TOO_DEEP) from None
    except msgspec.DecodeError as exc:
        error = exc
    try:  # NaN / Infinity literals: the item gets an error naming its field
        json.loads(body)
        return [(0, body)]
    except RecursionError:
        raise EnvelopeError(TOO_DEEP) from None
    except ValueError:
        pass
    if b"\n" in body:
        return None
    raise EnvelopeError(
        f"the body is not valid JSON ({error}); send one JSON object, a JSON array of objects "
        "or NDJSON"
    )


def _split_array(body: bytes) -> list[tuple[int, bytes]]:
    """Items of a JSON array as raw bytes, so each can fail on its own."""
    try:
        raws = _raw_list.decode(body)
        return [(i, bytes(r)) for i, r in enumerate(raws)]
    except msgspec.ValidationError as exc:
        raise EnvelopeError(f"the body is not a JSON array of records: {exc}") from None
    except RecursionError:
        raise EnvelopeError(TOO_DEEP) from None
    except msgspec.DecodeError:
        pass
    try:  # NaN / Infinity literals: Python's parser takes them, and items get named errors
        objs = json.loads(body)
    except RecursionError:
        raise EnvelopeError(TOO_DEEP) from None
    except ValueError as exc:
        raise EnvelopeError(
            f"the body is not valid JSON ({exc}); send a JSON array of objects or NDJSON"
        ) from None
    if not isinstance(objs, list):
        raise EnvelopeError("the body is not a JSON array")
    return [(i, json.dumps(o, allow_nan=True).encode()) for i, o in enumerate(objs)]
