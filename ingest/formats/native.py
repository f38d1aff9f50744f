"""Native records: one JSON object, a JSON array of objects, or NDJSON, into canonical rows."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime

import msgspec
import numpy as np
import pyarrow as pa

from app.storage.batches import Reject
from ingest.body import GZIP_HINT, looks_like_gzip
from ingest.jsonscan import (
    JsonShape,
    count_bytes,
    count_openers,
    json_shape,
    nonblank_lines,
    split_array,
)
from ingest.records import RecordIn, build_rows, describe_error

_one = msgspec.json.Decoder(RecordIn)
_many = msgspec.json.Decoder(list[RecordIn])
# Checks a value is JSON without building it (msgspec skips it in C, allocating nothing).
_valid = msgspec.json.Decoder(msgspec.Raw)
# The decoders give up past about a thousand levels with RecursionError: a recursion bomb.
TOO_DEEP = "the body nests JSON too deep to parse; records are flat JSON objects"
# Containers (objects and arrays) one body may hold, whatever its items. A native record is
# one object, two with token_gaps_ms; a LiteLLM payload holds tens (messages, metadata). 16 MB
# of real traffic holds well under 400,000 (one per 40+ bytes), 16 MB of `[{},{},…]` 5.6
# million. The bound matters where a body or an item is built as Python objects (the lenient
# parse of NaN/Infinity): a million containers cost ~100 MB, so four such bodies at once stay
# under a GiB. It grows with TOKENSHAPE_MAX_ITEMS_PER_REQUEST (ten per item allowed).
MIN_CONTAINERS = 1_000_000
CONTAINERS_PER_ITEM = 10


def container_limit(max_items: int) -> int:
    """The most JSON objects and arrays one body may hold, given the item limit."""
    return max(MIN_CONTAINERS, CONTAINERS_PER_ITEM * max_items)


def too_many_items(count: int, max_items: int, *, at_least: bool = False) -> EnvelopeError:
    """The refusal of a body holding more items than the limit (counted, not parsed)."""
    shown = f"at least {count}" if at_least else f"{count}"
    return EnvelopeError(
        f"{shown} records in one request is more than the limit of {max_items}; split the batch"
    )


def check_containers(body: bytes, max_items: int) -> None:
    """EnvelopeError when the body holds more JSON containers than `container_limit`; the
    bytes `{` and `[` counted first (in C), the exact scan only when that count is over."""
    limit = container_limit(max_items)
    if count_openers(body) <= limit:
        return
    shape = json_shape(body, max_containers=limit)
    if shape.containers > limit:
        raise EnvelopeError(
            f"the body holds more than {limit:,} JSON objects and arrays (ten per item "
            "allowed, at least a million): send fewer nested values or split the batch"
        )


def _checked(body: bytes, max_items: int) -> bool:
    """check_containers, as a condition (True when within the bound)."""
    check_containers(body, max_items)
    return True


def check_lines(body: bytes, max_items: int, newlines: int | None = None) -> None:
    """EnvelopeError when NDJSON holds more non-blank lines than `max_items`: newlines
    counted first (`newlines`, when the caller has them), blank lines told apart only when
    that count is over."""
    if newlines is None:
        (newlines,) = count_bytes(body, 0x0A)
    if newlines < max_items:
        return
    lines = nonblank_lines(body, stop_after=max_items)
    if lines > max_items:
        raise too_many_items(lines, max_items, at_least=True)


def array_spans(body: bytes, max_items: int) -> tuple[JsonShape, list[tuple[int, int]] | None]:
    """The byte spans of a JSON array's items, counted before any is built: EnvelopeError
    past `max_items`; spans None when the body is not one closed array."""
    shape, spans = split_array(body, max_top_items=max_items)
    items = shape.top_items or 0
    if items > max_items:
        raise too_many_items(items, max_items, at_least=shape.truncated)
    return shape, spans


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
        raise ValueError(f"not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"each record must be a JSON object, got {type(obj).__name__}")
    for key, value in obj.items():
        if key not in _FIELD_NAMES:  # unknown fields are ignored, NaN or not
            continue
        values = value if isinstance(value, list) else [value]
        bad = next((v for v in values if isinstance(v, float) and not math.isfinite(v)), None)
        if bad is not None:
            raise FieldError(key, f"{key}: must be a finite number, got {bad}")
    return msgspec.convert(obj, RecordIn)


_FIELD_NAMES = frozenset(RecordIn.__struct_fields__)


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


def item_errors(raw: bytes, index: int) -> Reject | RecordIn:
    """One item's record, or its reject naming the field: never raises."""
    out: list = []
    rejects: list = []
    _item(raw, index, out, [], rejects)
    return out[0] if out else rejects[0]


# A line holding something other than whitespace (found in C: blank lines are skipped by the
# regex engine, never built, so millions of them cost nothing).
_NONBLANK_LINE = re.compile(rb"[^\n]*?[^ \t\r\n][^\n]*")


def nonblank_line_items(body: bytes) -> list[tuple[int, bytes]]:
    """(line number, stripped text) of each non-blank line; count them (check_lines) first."""
    out = []
    line, at = 0, 0
    for match in _NONBLANK_LINE.finditer(body):
        line += body.count(b"\n", at, match.start())
        at = match.start()
        out.append((line, match.group().strip()))
    return out


def _lines(body: bytes) -> list[tuple[int, bytes]]:
    return nonblank_line_items(body)


def parse(
    body: bytes, *, ndjson: bool, gateway: str, received_at: datetime, max_items: int
) -> Parsed:
    """Parse a whole body; raises EnvelopeError when nothing in it is usable."""
    body = body.strip()
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:].strip()
    if not body:
        raise EnvelopeError("the body is empty: send a JSON object, a JSON array or NDJSON")
    if looks_like_gzip(body):  # JSON or NDJSON: never these two bytes first
        raise EnvelopeError(GZIP_HINT)
    records: list[RecordIn] = []
    indexes: list[int] = []
    rejects: list[Reject] = []
    items: list[tuple[int, bytes]]
    # Items are counted first (the answer names the limit a sender can act on), containers
    # before anything is parsed leniently (json.loads builds every one of them). Byte counts
    # (one compare a byte) bound both; the exact scans run only when a count is over.
    if not ndjson and body[:1] == b"[":
        records, items = _array(body, max_items, count_bytes(body, 0x7B)[0])
        indexes = list(range(len(records)))
        if items:
            check_containers(body, max_items)
    elif not ndjson and body[:1] != b"{":
        raise EnvelopeError(_not_json(body))
    elif not ndjson and _checked(body, max_items) and _single(body):
        items = [(0, body)]
    else:
        check_lines(body, max_items)
        check_containers(body, max_items)
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
    # Counted first (in chunks): positions cost 8 bytes a newline, and a body of blank lines
    # would otherwise hold 5 million of them to learn they are too many.
    if objects != count_bytes(body, 0x0A)[0] + 1:
        return False
    data = np.frombuffer(body, np.uint8)
    ends = np.flatnonzero(data == 10)  # numpy: bytes.count alone takes 4x as long
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


def _single(body: bytes) -> bool:
    """Whether a JSON body starting with `{` is one object (however it is laid out): False
    when it is NDJSON sent as JSON; EnvelopeError when it is neither (truncated, not UTF-8)."""
    try:
        _valid.decode(body)  # checked, not built: a 16 MB unknown field costs nothing
        if not body.isascii():  # skipping does not check UTF-8: one transient str does
            body.decode()
        return True
    except UnicodeDecodeError as exc:
        raise EnvelopeError(
            f"the body is not valid UTF-8 ({exc.reason} at byte {exc.start}); send UTF-8 JSON"
        ) from None
    except RecursionError:
        raise EnvelopeError(TOO_DEEP) from None
    except msgspec.DecodeError as exc:
        error = exc
    try:  # NaN / Infinity literals: the item gets an error naming its field
        json.loads(body)
        return True
    except RecursionError:
        raise EnvelopeError(TOO_DEEP) from None
    except ValueError:
        pass
    if b"\n" in body:
        return False
    raise EnvelopeError(
        f"the body is not valid JSON ({error}); send one JSON object, a JSON array of objects "
        "or NDJSON"
    )


def _array(
    body: bytes, max_items: int, braces: int
) -> tuple[list[RecordIn], list[tuple[int, bytes]]]:
    """A JSON array as records (all valid) or as raw items, each to fail on its own; counted
    before anything is built, so 8 million `{}` cost no more than their 16 MB."""
    # Every item of a valid batch is an object, so it holds at most `braces` (the count of
    # `{` bytes) items: within the limit, the one C-level decode of the whole array (the
    # fast path) cannot build more records than the limit allows.
    if braces <= max_items:
        try:
            records = _many.decode(body)
            if len(records) <= max_items:
                return records, []
        except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
            pass
    _, spans = array_spans(body, max_items)
    if spans is None:
        raise EnvelopeError(_not_array(body))
    return [], [(i, body[start:end].strip()) for i, (start, end) in enumerate(spans)]


def _not_array(body: bytes) -> str:
    """What is wrong with a body that starts with `[` but is not one closed JSON array."""
    try:
        _valid.decode(body)
    except RecursionError:
        return TOO_DEEP
    except msgspec.DecodeError as exc:
        return f"the body is not valid JSON ({exc}); send a JSON array of objects or NDJSON"
    return "the body is not one JSON array; send a JSON array of objects or NDJSON"
