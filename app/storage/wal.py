"""DuckDB's write-ahead log read by its framing (WAL version 2: a version entry, then per entry
an 8-byte size, an 8-byte checksum and the payload): where its whole entries end and what is
damaged, including the damage DuckDB itself reads past in silence (a damaged header or size
field reads to it as a crash's torn write, and it drops the rest). Used by app/storage/recovery
at start; the checksum is DuckDB's own algorithm (src/common/checksum.cpp), written anew."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

log = logging.getLogger("tokenshape.database")

_WAL_VERSION = 98  # DuckDB's WALType::WAL_VERSION, the entry every WAL starts with
_WAL_HEADER_MAX = 64  # the version entry's size: a shorter WAL was torn in its first write
_ABSURD_ENTRY = 1 << 40  # an entry's stated size beyond any real one: a damaged length
# A version entry with no database id or checkpoint iteration, which DuckDB replays without
# comparing them: put before the entries of a WAL whose own header is damaged.
_BARE_HEADER = b"\x64\x00\x62\x65\x00\x02\xff\xff"


@dataclass
class WalLayout:
    """Where a WAL's entries end, read from its framing (DuckDB's WAL version 2: a version
    entry, then per entry an 8-byte size, an 8-byte checksum and the payload)."""

    body: bytes  # the WAL, or the WAL with its damaged header replaced
    cuts: list[int] = field(default_factory=list)  # end offset of every complete entry
    problem: str | None = None  # damage DuckDB would read past in silence (and drop the rest)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while shift < 64:
        if pos >= len(data):
            raise ValueError("the header ends inside a number")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ValueError("a number in the header runs on")


def read_header(data: bytes) -> tuple[int, int]:
    """(end offset, version) of the version entry a WAL starts with; ValueError if damaged."""
    pos, version, kind = 0, None, None
    while True:
        if pos + 2 > len(data):
            raise ValueError("the header is cut short")
        fid = int.from_bytes(data[pos : pos + 2], "little")
        pos += 2
        if fid == 0xFFFF:
            break
        if fid == 100:
            kind, pos = _varint(data, pos)
        elif fid == 101:
            version, pos = _varint(data, pos)
        elif fid == 102:  # the database id: a list of bytes
            count, pos = _varint(data, pos)
            if count > 64:
                raise ValueError("the database id is too long")
            for _ in range(count):
                _, pos = _varint(data, pos)
        elif fid == 103:  # the checkpoint iteration
            _, pos = _varint(data, pos)
        else:
            raise ValueError(f"unknown field {fid}")
    if kind != _WAL_VERSION or version is None:
        raise ValueError("no version entry")
    return pos, version


def _frames(data: bytes, pos: int) -> tuple[list[int], str | None]:
    """End offsets of the complete entries from `pos`, and damage that stops the walk. A
    torn last entry (its size runs past the end, or a tail of zeros) is a crash, no damage,
    unless a whole entry follows it: then its size was damaged, and DuckDB would take it for
    the end of the log and drop every transaction after it without a word."""
    cuts: list[int] = []
    while len(data) - pos >= 16:
        size = int.from_bytes(data[pos : pos + 8], "little")
        if size == 0 or size >= _ABSURD_ENTRY:
            if not any(data[pos:]):
                break  # a zeroed tail: a crash before the file's last pages were written
            return cuts, f"the entry at byte {pos:,} states a size of {size:,} bytes"
        if pos + 16 + size > len(data):
            later = _entry_after(data, pos + 1)
            if later is None:
                break  # the last write of a crash
            return cuts, (
                f"the entry at byte {pos:,} states a size of {size:,} bytes, past the end of "
                f"the file, yet a whole entry follows at byte {later:,}"
            )
        pos += 16 + size
        cuts.append(pos)
    return cuts, None


def _entry_after(data: bytes, start: int) -> int | None:
    """The offset of a whole entry at or after `start`: its payload begins as every entry's
    does (field 100, the entry's type) and matches its stored checksum."""
    at = start + 16
    while (at := data.find(b"\x64\x00", at)) >= 0:
        pos = at - 16
        size = int.from_bytes(data[pos : pos + 8], "little")
        if 0 < size <= len(data) - at:
            stored = int.from_bytes(data[pos + 8 : pos + 16], "little")
            if checksum(data[at : at + size]) == stored:
                return pos
        at += 1
    return None


_M, _SEED, _MASK = 0xC6A4A7935BD1E995, 0xE17A1465, (1 << 64) - 1


def checksum(payload: bytes) -> int:
    """DuckDB's checksum of a WAL entry (src/common/checksum.cpp): each 8-byte word times a
    constant, xor-ed; the last 0-7 bytes by robin-hood hashing's murmur-style mix."""
    words = len(payload) // 8
    result = 5381
    if words:
        values = np.frombuffer(payload, dtype="<u8", count=words) * np.uint64(0xBF58476D1CE4E5B9)
        result ^= int(np.bitwise_xor.reduce(values))
    rest = payload[words * 8 :]
    if rest:
        h = _SEED ^ ((len(rest) * _M) & _MASK)
        for i, byte in enumerate(rest):
            h ^= byte << (8 * i)
        h = (h * _M) & _MASK
        h ^= h >> 47
        h = (h * _M) & _MASK
        h ^= h >> 47
        result ^= h
    return result


def layout_of(data: bytes) -> WalLayout:
    """The WAL's entries, and damage DuckDB itself would take for the end of the log."""
    try:
        end, version = read_header(data)
    except ValueError as exc:
        if len(data) <= _WAL_HEADER_MAX:
            return WalLayout(data)  # torn in the first write: nothing in it was committed
        return _rebuilt(data, f"its header is unreadable ({exc})")
    if version != 2:
        return WalLayout(data)  # another framing: DuckDB's replay alone judges it
    cuts, problem = _frames(data, end)
    return WalLayout(data, cuts, problem)


def _rebuilt(data: bytes, problem: str) -> WalLayout:
    """A WAL whose version entry is damaged, with a bare one in its place when its entries can
    be found after it (their checksums decide, when DuckDB replays them)."""
    for start in range(8, min(len(data) - 16, 4 * _WAL_HEADER_MAX)):
        cuts, damage = _frames(data, start)
        if cuts and damage is None and len(data) - cuts[-1] < 16:
            shift = len(_BARE_HEADER) - start
            return WalLayout(_BARE_HEADER + data[start:], [c + shift for c in cuts], problem)
    return WalLayout(data, [], problem)
