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
from app.storage.schema import MAX_TOKENS
from ingest.body import GZIP_HINT, looks_like_gzip
from ingest.jsonscan import (
    MAX_JSON_VALUES,
    JsonShape,
    count_bytes,
    count_openers,
    json_shape,
    nonblank_lines,
    scaled,
    split_array,
    values_bound,
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
# under a GiB. It grows with TOKENSHAPE_MAX_ITEMS_PER_REQUEST (ten per item allowed) and
# with the body: a million per 16 MiB of it (a raised TOKENSHAPE_MAX_BODY_BYTES lets bigger
# bodies in, and they may hold more), like MAX_JSON_VALUES.
MIN_CONTAINERS = 1_000_000
CONTAINERS_PER_ITEM = 10
# Python refuses to read an integer of more digits than this (sys.get_int_max_str_digits).
INT_DIGITS = 4300


def container_limit(max_items: int, body_bytes: int = 0) -> int:
    """The most JSON objects and arrays one body of `body_bytes` may hold, given the item
    limit: a million per 16 MiB of body, at least ten per item."""
    return max(scaled(MIN_CONTAINERS, body_bytes), CONTAINERS_PER_ITEM * max_items)


class HugeInt:
    """An integer of more digits than Python reads (json.loads' parse_int gives it instead
    of raising for the whole body): whatever field holds it is refused, alone."""

    def __repr__(self) -> str:
        return f"a number of more than {INT_DIGITS:,} digits"

    __str__ = __repr__


def parse_int(text: str) -> int | HugeInt:
    """json.loads' parse_int: an int, or a HugeInt past INT_DIGITS digits."""
    if len(text) - text.startswith("-") > INT_DIGITS:
        return HugeInt()
    return int(text)


def loads(data: bytes | str) -> object:
    """json.loads, an integer too long to read a HugeInt (not a ValueError for the body)."""
    return json.loads(data, parse_int=parse_int)


def too_many_items(count: int, max_items: int, *, at_least: bool = False) -> EnvelopeError:
    """The refusal of a body holding more items than the limit (counted, not parsed)."""
    shown = f"at least {count}" if at_least else f"{count}"
    return EnvelopeError(
        f"{shown} records in one request is more than the limit of {max_items}; split the batch"
    )


def check_containers(body: bytes, max_items: int, prefix: str = "") -> None:
    """EnvelopeError when the body holds more JSON containers than `container_limit` or
    more values than MAX_JSON_VALUES (both per 16 MiB of body): what json.loads would build.
    The bytes `{`, `[` and `,` counted first (in C), the exact scan only when over."""
    limit = container_limit(max_items, len(body))
    values = scaled(MAX_JSON_VALUES, len(body))
    openers = count_openers(body)
    if openers <= limit and values_bound(body) <= values:
        return
    shape = json_shape(body, max_containers=limit, max_values=values)
    if shape.containers > limit:
        raise EnvelopeError(
            f"{prefix}the body holds more than {limit:,} JSON objects and arrays (ten per "
            "item allowed, at least a million per 16 MiB of body): send fewer nested values "
            "or split the batch"
        )
    if shape.values > values:
        raise EnvelopeError(too_many_values(values, prefix))


def too_many_values(limit: int, prefix: str = "") -> str:
    """The refusal of a body holding more JSON values than it may."""
    return (
        f"{prefix}the body holds more than {limit:,} JSON values (numbers, strings, objects "
        "and arrays), the most one request may carry: send fewer values or split the batch"
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
        obj = loads(raw)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not valid JSON: {str(exc)[:200]}") from None
    if not isinstance(obj, dict):
        raise ValueError(f"each record must be a JSON object, got {type(obj).__name__}")
    for key, value in obj.items():
        if key not in _FIELD_NAMES:  # unknown fields are ignored, NaN or not
            continue
        values = value if isinstance(value, list) else [value]
        if any(isinstance(v, HugeInt) for v in values):
            raise FieldError(key, f"{key}: a number has more than {INT_DIGITS:,} digits")
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
        fld, msg = _out_of_range(*describe_error(exc))
        if "Expected `object`" in str(exc) and " - at " not in str(exc):
            fld, msg = None, "each record must be a JSON object"
        rejects.append(Reject(index, fld, msg, raw.decode(errors="replace")))
        return
    except msgspec.DecodeError:
        pass
    try:
        rec = _lenient_item(raw)
    except msgspec.ValidationError as exc:
        fld, msg = _out_of_range(*describe_error(exc))
        rejects.append(Reject(index, fld, msg, raw.decode(errors="replace")))
    except ValueError as exc:
        fld = exc.field if isinstance(exc, FieldError) else None
        rejects.append(Reject(index, fld, str(exc), raw.decode(errors="replace")))
    else:
        out.append(rec)
        idx.append(index)


_TOKEN_FIELDS = frozenset({"isl", "osl", "cached_tokens"})


def _out_of_range(fld: str | None, msg: str) -> tuple[str | None, str]:
    """msgspec's "Number out of range" (a number past 64 bits or a double) with the range
    the field takes, as the other mappers say it."""
    if fld is None or not msg.endswith(("Number out of range", "Integer value out of range")):
        return fld, msg
    if fld in _TOKEN_FIELDS:
        return fld, f"{fld}: must be a whole number from 0 to {MAX_TOKENS:,}, got one out of range"
    return fld, f"{fld}: must be a finite number, got one out of range"


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
    body = strip_bom(body)
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


def strip_bom(body: bytes) -> bytes:
    """The body without surrounding whitespace and a leading UTF-8 byte order mark."""
    body = body.strip()
    if body.startswith(b"\xef\xbb\xbf"):
        body = body[3:].strip()
    return body


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
        loads(body)
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
