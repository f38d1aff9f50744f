"""The shape of a JSON body (items, containers, values) counted without parsing it.

A body of 16 MB can hold 8 million `{}`: parsing it first and counting after costs gigabytes
of Python objects. This scan counts in bounded memory, in vectorised numpy over fixed-size
chunks, and stops as soon as a bound is passed, so a route can refuse the body before any
per-item object exists. It tracks what JSON needs to tell structure from text: string state
(a quote is a string edge unless an odd run of backslashes precedes it, and a run may cross a
chunk edge), nesting depth, and the commas at depth 1 of a top-level array. It never raises on
invalid JSON: the counts are then only estimates (a parser will say what is wrong).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

# 128 KiB a chunk: the largest temporaries are int64 positions (8 bytes per structural byte)
# and the int64 running depth, so a chunk costs at most ~5 MiB whatever the body; numpy's
# per-call overhead is ~30 us a chunk, ~4 ms for a 16 MB body.
CHUNK = 128 * 1024
COUNT_CHUNK = 1024 * 1024
_QUOTE, _BACKSLASH, _COMMA = 0x22, 0x5C, 0x2C
# `[` | 0x20 == `{` and `]` | 0x20 == `}`, and no other byte maps to either: one compare each.
_OPEN, _CLOSE = 0x7B, 0x7D
_LEAD = re.compile(rb"(?:\xef\xbb\xbf)?[ \t\r\n]*")
_WS = re.compile(rb"[ \t\r\n]*")
# The body size the fixed bounds (values, containers, messages) are set for: a body limit
# (TOKENSHAPE_MAX_BODY_BYTES) raised past it raises them in proportion (see `scaled`).
BOUND_BODY_BYTES = 16 * 1024 * 1024
# JSON values one body may hold before anything builds it as Python objects (json.loads:
# ~60 bytes a one-character string, ~20x its 3 bytes on the wire). 16 MiB of real traffic
# holds under 0.9 million (an SDK trace export 876k, native records 903k, LiteLLM 757k);
# 2 million keeps four worst-case bodies at once well under a GiB. Per 16 MiB of body.
MAX_JSON_VALUES = 2_000_000


def scaled(bound: int, body_bytes: int) -> int:
    """A bound set per BOUND_BODY_BYTES of body, for a body of `body_bytes`: the bound itself
    up to 16 MiB, a multiple of it beyond (only a raised body limit lets such a body in), so
    raising TOKENSHAPE_MAX_BODY_BYTES never refuses a valid body."""
    return bound * max(1, -(-body_bytes // BOUND_BODY_BYTES))


@dataclass(frozen=True)
class JsonShape:
    """What a body holds, counted outside strings."""

    top_items: int | None  # elements of the top-level array; None when it is not an array
    containers: int  # JSON objects + arrays outside strings (counting stops early)
    values: int  # an upper bound on JSON values (commas + containers + 1), likewise
    truncated: bool  # True when counting stopped early because a bound was passed


def json_shape(
    body: bytes,
    *,
    max_top_items: int | None = None,
    max_containers: int | None = None,
    max_values: int | None = None,
) -> JsonShape:
    """Count a JSON body's top-level array items, containers and values, in bounded memory;
    stops (truncated=True) at the end of the chunk where a bound was passed."""
    return _scan(body, max_top_items, max_containers, None, max_values)


def values_bound(body: bytes) -> int:
    """An upper bound on the JSON values of a body, counted in C: commas and `{`/`[` bytes
    (inside strings too) + 1. Cheap; when it is over a bound, json_shape says exactly."""
    (commas,) = count_bytes(body, _COMMA)
    return commas + count_openers(body) + 1


def split_array(
    body: bytes, *, max_top_items: int | None = None, max_containers: int | None = None
) -> tuple[JsonShape, list[tuple[int, int]] | None]:
    """json_shape, and the (start, end) byte offsets of each element when the body is one
    closed top-level JSON array (whitespace around an element included); None otherwise or
    when a bound was passed. Memory: a few ints per element, counted before they are kept."""
    edges: list[np.ndarray] = []
    shape = _scan(body, max_top_items, max_containers, edges)
    if shape.top_items is None or shape.truncated:
        return shape, None
    cuts = np.concatenate(edges) if edges else np.empty(0, np.int64)
    # The last edge must be the array's own `]` and nothing but whitespace may follow it.
    last = int(cuts[-1]) if cuts.size else -1
    if last < 0 or body[last : last + 1] != b"]":
        return shape, None
    tail = _WS.match(body, last + 1)
    if tail is None or tail.end() != len(body):
        return shape, None
    if shape.top_items == 0:
        return shape, []
    opened = _LEAD.match(body)
    first = (opened.end() if opened else 0) + 1
    starts = np.concatenate(([first], cuts[:-1] + 1)).tolist()
    return shape, list(zip(starts, cuts.tolist(), strict=True))


def count_bytes(body: bytes, *values: int) -> tuple[int, ...]:
    """How often each byte value occurs in the body (occurrences inside strings included):
    an upper bound that is often enough. Chunked numpy, ~10x faster than bytes.count."""
    view = memoryview(body)
    counts = [0] * len(values)
    for begin in range(0, len(body), COUNT_CHUNK):  # one bool temporary: 1 MiB
        d = np.frombuffer(view[begin : begin + COUNT_CHUNK], np.uint8)
        for i, value in enumerate(values):
            counts[i] += int(np.count_nonzero(d == value))
    return tuple(counts)


def count_openers(body: bytes) -> int:
    """How many `{` and `[` bytes the body holds (inside strings too): an upper bound on its
    containers, in one compare a byte (`[` | 0x20 is `{`)."""
    view = memoryview(body)
    count = 0
    for begin in range(0, len(body), COUNT_CHUNK):
        d = np.frombuffer(view[begin : begin + COUNT_CHUNK], np.uint8)
        count += int(np.count_nonzero((d | 0x20) == _OPEN))
    return count


def nonblank_lines(body: bytes, *, stop_after: int | None = None) -> int:
    """How many lines of the body hold something other than whitespace, counted in bounded
    memory; stops once past `stop_after`."""
    view = memoryview(body)
    count = 0
    after_newline = True  # the body's start begins a line
    for begin in range(0, len(body), CHUNK):
        d = np.frombuffer(view[begin : begin + CHUNK], np.uint8)
        kept = d[(d != 0x20) & (d != 0x09) & (d != 0x0D)]  # newlines and content
        if not kept.size:
            continue
        newline = kept == 0x0A
        # Content right after a newline (or the start) opens a non-blank line.
        before = np.empty_like(newline)
        before[0] = after_newline
        before[1:] = newline[:-1]
        count += int(np.count_nonzero(before & ~newline))
        after_newline = bool(newline[-1])
        if stop_after is not None and count > stop_after:
            break
    return count


def _scan(
    body: bytes,
    max_top_items: int | None,
    max_containers: int | None,
    edges: list[np.ndarray] | None,
    max_values: int | None = None,
) -> JsonShape:
    """The scan behind json_shape; with `edges`, also collects the offsets of the top-level
    array's commas and of its closing bracket (the scan then stops there)."""
    view = memoryview(body)
    lead = _LEAD.match(body)
    start = lead.end() if lead else 0
    is_array = body[start : start + 1] == b"["
    # An array holds commas + 1 items unless nothing but whitespace follows its `[`.
    nonempty = False
    if is_array:
        after = _WS.match(body, start + 1)
        at = after.end() if after else start + 1
        nonempty = at < len(body) and body[at : at + 1] != b"]"

    in_string = 0  # 1 while inside a string at the chunk edge
    backslashes = 0  # length of the backslash run ending at the chunk edge
    depth = 0
    top_commas = containers = commas = 0
    truncated = False
    for begin in range(start, len(body), CHUNK):
        d = np.frombuffer(view[begin : begin + CHUNK], np.uint8)
        quotes = d == _QUOTE
        backslashes = _unescape(d, quotes, backslashes)
        # Positions, not a running sum over every byte: a cumsum costs ~5 ns a byte, a
        # binary search per structural byte far less. A structural byte is inside a string
        # when an odd number of real quotes precede it (counting the string open at the edge).
        quoted = np.flatnonzero(quotes)
        low = d | 0x20
        where = np.flatnonzero((low == _OPEN) | (low == _CLOSE) | (d == _COMMA))
        if quoted.size or in_string:
            inside = np.searchsorted(quoted, where)
            inside += in_string
            where = where[(inside & 1) == 0]
            in_string ^= quoted.size & 1
        kinds = low[where]
        opens = kinds == _OPEN
        n_opens = int(np.count_nonzero(opens))
        containers += n_opens
        n_commas = int(np.count_nonzero(kinds == _COMMA))
        commas += n_commas
        if is_array and where.size:
            step = opens.view(np.int8) - (kinds == _CLOSE).view(np.int8)
            level = np.cumsum(step, dtype=np.int64)
            level += depth  # the depth after each structural byte
            depth = int(level[-1])
            # A comma leaves the depth as it found it: depth 1 is the top array's.
            at_top = (step == 0) & (level == 1)
            top_commas += int(np.count_nonzero(at_top))
            if edges is not None:
                closed = np.flatnonzero(level == 0)
                if closed.size:  # the top array's `]`: its edges end there
                    stop = int(closed[0])
                    edges.append(where[:stop][at_top[:stop]] + begin)
                    edges.append(where[stop : stop + 1] + begin)
                    break
                edges.append(where[at_top] + begin)
        if (
            max_top_items is not None
            and is_array
            and top_commas + nonempty > max_top_items
            or max_containers is not None
            and containers > max_containers
            or max_values is not None
            and commas + containers + 1 > max_values
        ):
            truncated = True
            break
    return JsonShape(
        top_items=top_commas + nonempty if is_array else None,
        containers=containers,
        values=commas + containers + 1,
        truncated=truncated,
    )


def deep_regions(body: bytes, depth: int) -> list[tuple[int, int]]:
    """The (start, end) byte offsets of each outermost container that opens deeper than
    `depth` (end exclusive; a container never closed ends with the body): what to cut out of
    a body for a recursive parser to build the rest. Memory: 8 bytes per structural byte of
    a chunk, and two ints per region."""
    view = memoryview(body)
    in_string = backslashes = level_at = 0
    regions: list[tuple[int, int]] = []
    open_at = -1  # where the region being cut began
    for begin in range(0, len(body), CHUNK):
        d = np.frombuffer(view[begin : begin + CHUNK], np.uint8)
        quotes = d == _QUOTE
        backslashes = _unescape(d, quotes, backslashes)
        quoted = np.flatnonzero(quotes)
        low = d | 0x20
        where = np.flatnonzero((low == _OPEN) | (low == _CLOSE))
        if quoted.size or in_string:
            inside = np.searchsorted(quoted, where)
            inside += in_string
            where = where[(inside & 1) == 0]
            in_string ^= quoted.size & 1
        if not where.size:
            continue
        step = (low[where] == _OPEN).view(np.int8) * 2 - 1
        level = np.cumsum(step, dtype=np.int64)
        level += level_at
        level_at = int(level[-1])
        # A region opens where the level first passes `depth`, and closes where it falls back.
        deep = level > depth
        edges = np.flatnonzero(np.diff(deep.view(np.int8), prepend=np.int8(open_at >= 0)))
        for at in edges.tolist():
            if deep[at]:
                open_at = int(where[at]) + begin
            else:
                regions.append((open_at, int(where[at]) + begin + 1))
                open_at = -1
    if open_at >= 0:
        regions.append((open_at, len(body)))
    return regions


def _unescape(d: np.ndarray, quotes: np.ndarray, carried: int) -> int:
    """Clear escaped quotes in `quotes` (in place); the backslash run left at the chunk's end.

    A byte is escaped when an odd run of backslashes ends just before it; `carried` is the
    run that ended the previous chunk (it continues into this one when this one starts with
    a backslash)."""
    n = len(d)
    found = np.flatnonzero(d == _BACKSLASH)
    if not found.size:
        if carried % 2 and n:
            quotes[0] = False
        return 0
    breaks = np.flatnonzero(np.diff(found) != 1)
    starts = np.concatenate((found[:1], found[breaks + 1]))
    ends = np.concatenate((found[breaks], found[-1:]))
    lengths = ends - starts + 1
    if starts[0] == 0:
        lengths[0] += carried
    elif carried % 2:
        quotes[0] = False
    escaped = ends[(lengths % 2) == 1] + 1
    quotes[escaped[escaped < n]] = False
    return int(lengths[-1]) if ends[-1] == n - 1 else 0
