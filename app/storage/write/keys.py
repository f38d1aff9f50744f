"""An in-memory index of 64-bit hashes of every stored (gateway, request_id), for dedupe.

DuckDB's ART index makes each insert 5-30x slower with random request ids, so uniqueness is
kept by the single writer instead: a hit in this index is only a candidate, confirmed exactly
against the table before a row is called a duplicate. Memory: 16-32 bytes per stored request.
"""

from __future__ import annotations

from collections.abc import Iterable

import duckdb
import numpy as np
import pyarrow as pa

_SCAN_ROWS = 200_000
_MIX = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio, odd: a bijection
_TAIL = 64  # fewer values than this are probed one by one, not in vectorised rounds


def key_hashes(rows: pa.Table | pa.RecordBatch) -> np.ndarray:
    """A 64-bit hash of (gateway, request_id) for every row, in order.

    Python's own string hash: about 0.2 us a row, where a DuckDB query costs a millisecond
    or more per call in the writer. It is salted per process, which suits an index that
    lives in memory and is rebuilt from the table at every start (`stored_key_hashes`)."""
    gateways = rows.column("gateway").to_pylist()
    ids = rows.column("request_id").to_pylist()
    return key_hashes_of(zip(gateways, ids, strict=True), len(ids))


def key_hashes_of(keys: Iterable[tuple[str, str]], n: int) -> np.ndarray:
    """`key_hashes` of n (gateway, request_id) pairs given as Python strings."""
    return np.fromiter(map(hash, keys), np.int64, n).view(np.uint64)


def stored_key_hashes(con: duckdb.DuckDBPyConnection) -> np.ndarray:
    """key_hashes of every row of `requests`, read in slices so memory stays bounded."""
    reader = con.sql("SELECT gateway, request_id FROM requests").to_arrow_reader(_SCAN_ROWS)
    parts = [key_hashes(batch) for batch in reader]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def _run_starts(ordered: np.ndarray) -> np.ndarray:
    """Mask of the first element of each run of equal values in a sorted array."""
    starts = np.ones(len(ordered), dtype=bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    return starts


class KeyIndex:
    """A hash set of the key hashes in one numpy array (open addressing, linear probing),
    probed for a whole flush at once in a few vectorised rounds.

    Binary searches in sorted arrays cost ~5 ms per 4,000-row flush at 1M stored rows (a
    cache miss per step, on the event loop); this 0.3-0.8 ms. Each hash is stored times an
    odd constant (a bijection, so membership is unchanged): every bit of the hash then
    reaches the high bits that pick its home slot, and sorting the stored values sorts them
    by home. Value 0 marks an empty slot, so hash 0 is stored as hash 1: a hit is only a
    candidate, which callers confirm exactly anyway. At most half full: 16-32 bytes a key."""

    _MIN_SLOTS = 1 << 16

    def __init__(self, hashes: np.ndarray | None = None):
        self._slots = np.zeros(self._MIN_SLOTS, dtype=np.uint64)
        self._n = 0
        if hashes is not None and len(hashes):
            self._grow(self._mixed(hashes))

    def __len__(self) -> int:
        return self._n

    @staticmethod
    def _mixed(hashes: np.ndarray) -> np.ndarray:
        values = hashes.astype(np.uint64, copy=True)
        values[values == 0] = 1
        values *= _MIX
        return values

    def _home(self, values: np.ndarray, size: int | None = None) -> np.ndarray:
        """Each value's home slot in a table of `size` slots (a power of two; the current)."""
        shift = np.uint64(64 - ((size or len(self._slots)).bit_length() - 1))
        return (values >> shift).astype(np.intp)

    def any_of(self, hashes: np.ndarray) -> bool:
        """True when any of the hashes may already be stored."""
        return bool(len(hashes)) and bool(self.contains(hashes).any())

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """Boolean mask: which of the hashes may already be stored."""
        return self._has(self._mixed(hashes))

    def _has(self, values: np.ndarray) -> np.ndarray:
        found = np.zeros(len(values), dtype=bool)
        pos = self._home(values)
        todo = np.arange(len(values))
        slots, mask = self._slots, len(self._slots) - 1
        while len(todo) > _TAIL:  # each round probes every unsettled lookup one slot further
            seen = slots[pos]
            found[todo[seen == values]] = True
            go_on = (seen != 0) & (seen != values)
            todo, pos, values = todo[go_on], (pos[go_on] + 1) & mask, values[go_on]
        # The last few go one by one: a round costs the same for 3 values as for 3,000.
        for i, at, value in zip(todo.tolist(), pos.tolist(), values.tolist(), strict=True):
            while (seen := int(slots[at])) != 0 and seen != value:
                at = (at + 1) & mask
            found[i] = seen == value
        return found

    def add(self, hashes: np.ndarray, *, known_new: bool = False) -> None:
        """Remember newly stored hashes (call only after their commit).

        known_new: the caller checked that none is stored or repeated (the writer's screen),
        so the check here is skipped; a hash collision then costs a slot, nothing more."""
        values = np.sort(self._mixed(hashes))  # not np.unique: its hashing took 12 s for 10M
        if len(values) and not known_new:
            values = values[_run_starts(values)]
            values = values[~self._has(values)]
        if not len(values):
            return
        if 2 * (self._n + len(values)) <= len(self._slots):
            self._place(values)
            self._n += len(values)
        else:
            self._grow(np.concatenate([self._slots[self._slots != 0], values]))

    def _grow(self, values: np.ndarray) -> None:
        """Put every value into a new, empty table at most half full, in one pass.

        Not safe against a concurrent lookup (values that wrap round past the end are placed
        after the new table is swapped in): the writer's screen reads the index only while
        no keys wait to be added (see `RequestStore.screen`), and a reindex swaps in a whole
        new index.

        Sorted, the values come in order of home slot, and linear probing puts value i at
        max(home i, slot of i-1 + 1): i + the running maximum of (home - i). Values pushed
        past the end wrap round to the start."""
        size = len(self._slots)
        while 2 * len(values) > size:
            size *= 2
        table = np.zeros(size, dtype=np.uint64)
        values.sort()
        # A reindex hands in the table's keys and those recorded meanwhile, which overlap.
        values = values[_run_starts(values)]
        steps = np.arange(len(values))
        slots = np.maximum.accumulate(self._home(values, size) - steps) + steps
        inside = slots < size
        table[slots[inside]] = values[inside]
        # Swapped in only when built: an allocation that fails midway (memory) leaves the
        # old table, and every key in it, as it was.
        self._slots, self._n = table, len(values)
        if not inside.all():
            self._place(values[~inside])

    def _place(self, values: np.ndarray) -> None:
        """Insert distinct values that are not in the table yet."""
        slots, mask = self._slots, len(self._slots) - 1
        pos = self._home(values)
        while len(values) > _TAIL:
            # Of the values whose slot is free, the first for each slot takes it; the rest
            # now face a taken slot and move one further.
            free = np.flatnonzero(slots[pos] == 0)
            order = free[np.argsort(pos[free], kind="stable")]
            won = order[_run_starts(pos[order])]
            slots[pos[won]] = values[won]
            left = np.ones(len(values), dtype=bool)
            left[won] = False
            values, pos = values[left], (pos[left] + 1) & mask
        for at, value in zip(pos.tolist(), values.tolist(), strict=True):
            while slots[at] != 0:
                at = (at + 1) & mask
            slots[at] = value
