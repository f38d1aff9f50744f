"""Counting the items and nested messages of a protobuf body from its wire format, unparsed.

Parsing builds every message a body holds: 16 MB of empty spans is 8 million of them, over a
GiB of memory before anything can be counted. This walk reads only tags and lengths, steps
over whatever it need not look into, and stops as soon as a count passes its bound, so it
costs O(min(items, limit)) and no memory. What to look into comes from the message
descriptors: `tables` marks, per message type, its message-typed fields and the one field whose
entries are the body's items.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from google.protobuf.descriptor import Descriptor, FieldDescriptor

# upb refuses messages nested deeper than this (Python protobuf's default recursion limit).
MAX_DEPTH = 100

# field number -> (the sub-message's table, or None to step over it; whether it is an item)
Table = dict[int, "tuple[Table | None, bool]"]


class WireError(ValueError):
    """The bytes are not a protobuf message (truncated, a bad wire type or length)."""


class TooMany(Exception):
    """A count passed its bound; `what` is "items" or "messages", `limit` the bound."""

    def __init__(self, what: str, limit: int):
        super().__init__(what)
        self.what = what
        self.limit = limit


class TooDeep(Exception):
    """Messages nest deeper than MAX_DEPTH."""


@dataclass
class Tally:
    """What a walk counted, and its bounds."""

    max_items: int
    max_messages: int  # bounds `messages`: every field visited (a message or not)
    items: int = 0
    messages: int = 0
    # Where each item is, if asked: (its tag's offset, its payload's offset, its end).
    ranges: list[tuple[int, int, int]] | None = field(default=None)


class Tables(NamedTuple):
    """How to walk one kind of export: its envelope only, all of it, or one of its items."""

    envelope: Table  # reaches the items, stepping over their insides
    full: Table  # reaches every nested message
    item: Table  # an item's own nested messages


def tables(root: Descriptor, items: FieldDescriptor) -> Tables:
    """The tables of a message type whose items are the `items` field."""
    memo: dict[str, Table] = {}

    def full(desc: Descriptor) -> Table:
        if desc.full_name in memo:
            return memo[desc.full_name]
        table: Table = {}
        memo[desc.full_name] = table  # before the fields: message types recurse
        for f in desc.fields:
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                table[f.number] = (full(f.message_type), f.full_name == items.full_name)
        return table

    def envelope(desc: Descriptor, path: frozenset[str]) -> Table | None:
        table: Table = {}
        path = path | {desc.full_name}
        for f in desc.fields:
            if f.full_name == items.full_name:
                table[f.number] = (None, True)
            elif f.type == FieldDescriptor.TYPE_MESSAGE and f.message_type.full_name not in path:
                if sub := envelope(f.message_type, path):
                    table[f.number] = (sub, False)
        return table or None

    whole = full(root)
    return Tables(envelope(root, frozenset()) or {}, whole, memo[items.message_type.full_name])


def count(data: bytes, table: Table, tally: Tally, start: int = 0, end: int | None = None) -> Tally:
    """Walk `data[start:end]` (unsliced: byte offsets stay the body's) as the message `table`
    describes, counting into `tally`; raises TooMany when a bound is passed, TooDeep, or
    WireError (with the byte offset) for broken bytes. Every field visited counts against
    max_messages, stepped over or not: 8 million unknown `08 00` fields store nothing but
    cost a walk as long as 8 million messages."""
    try:
        _walk(data, start, len(data) if end is None else end, table, 0, tally, 0)
    except IndexError:
        raise WireError("the message is truncated (a field runs past the end)") from None
    return tally


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7
        if shift >= 70:
            raise WireError(f"a varint longer than 10 bytes at byte {pos}")


def _walk(
    data: bytes, pos: int, end: int, table: Table, depth: int, tally: Tally, group: int
) -> int:
    """Walk one message (or group, when `group` is its field number) from pos to end; returns
    where it ended."""
    while pos < end:
        begin = pos
        tally.messages += 1  # every field, a message or not
        if tally.messages > tally.max_messages:
            raise TooMany("messages", tally.max_messages)
        tag = data[pos]
        pos += 1
        if tag >= 0x80:
            tag, pos = _varint(data, pos - 1)
        wire, number = tag & 7, tag >> 3
        if number == 0:
            raise WireError(f"field number 0 at byte {pos}")
        if wire == 2:
            size = data[pos]
            pos += 1
            if size >= 0x80:
                size, pos = _varint(data, pos - 1)
            stop = pos + size
            if stop > end:
                raise WireError(f"a length at byte {pos} runs past the end of its message")
            sub = table.get(number)
            if sub is not None:
                inner, is_item = sub
                if is_item:
                    tally.items += 1
                    if tally.items > tally.max_items:
                        raise TooMany("items", tally.max_items)
                    if tally.ranges is not None:
                        tally.ranges.append((begin, pos, stop))
                if inner is not None and size:
                    if depth >= MAX_DEPTH:
                        raise TooDeep
                    _walk(data, pos, stop, inner, depth + 1, tally, 0)
            pos = stop
        elif wire == 0:
            _, pos = _varint(data, pos)
        elif wire == 1:
            pos += 8
        elif wire == 5:
            pos += 4
        elif wire == 3:  # a group (unknown to OTLP): step over it, nested groups included
            if depth >= MAX_DEPTH:
                raise TooDeep
            pos = _walk(data, pos, end, {}, depth + 1, tally, number)
        elif wire == 4:
            if number != group:
                raise WireError(f"an unmatched end of group at byte {pos}")
            return pos
        else:
            raise WireError(f"wire type {wire} (none such) at byte {pos}")
    if pos > end:
        raise WireError("the message is truncated (a field runs past the end)")
    if group:
        raise WireError("a group is not closed")
    return pos
