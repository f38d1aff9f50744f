"""An in-memory index of 64-bit hashes of every stored (gateway, request_id), for dedupe.

DuckDB's ART index makes each insert 5-30x slower with random request ids, so uniqueness is
kept by the single writer instead: a hit in this index is only a candidate, confirmed exactly
against the table before a row is called a duplicate. Memory: 8 bytes per stored request.
"""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

_SCAN_ROWS = 200_000


def key_hashes(rows: pa.Table | pa.RecordBatch) -> np.ndarray:
    """A 64-bit hash of (gateway, request_id) for every row, in order.

    Python's own string hash: about 0.2 us a row, where a DuckDB query costs a millisecond
    or more per call in the writer. It is salted per process, which suits an index that
    lives in memory and is rebuilt from the table at every start (`stored_key_hashes`)."""
    gateways = rows.column("gateway").to_pylist()
    ids = rows.column("request_id").to_pylist()
    out = np.fromiter(map(hash, zip(gateways, ids, strict=True)), np.int64, len(ids))
    return out.view(np.uint64)


def stored_key_hashes(con: duckdb.DuckDBPyConnection) -> np.ndarray:
    """key_hashes of every row of `requests`, read in slices so memory stays bounded."""
    reader = con.sql("SELECT gateway, request_id FROM requests").to_arrow_reader(_SCAN_ROWS)
    parts = [key_hashes(batch) for batch in reader]
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


class KeyIndex:
    """Sorted uint64 arrays in levels (a small LSM): cheap appends, O(k log n) lookups."""

    def __init__(self, hashes: np.ndarray | None = None):
        self._levels: list[np.ndarray] = []
        if hashes is not None and len(hashes):
            self._levels.append(np.unique(hashes.astype(np.uint64, copy=False)))

    def __len__(self) -> int:
        return sum(len(level) for level in self._levels)

    def any_of(self, hashes: np.ndarray) -> bool:
        """True when any of the hashes may already be stored."""
        return bool(len(hashes)) and bool(self.contains(hashes).any())

    def contains(self, hashes: np.ndarray) -> np.ndarray:
        """Boolean mask: which of the hashes may already be stored."""
        found = np.zeros(len(hashes), dtype=bool)
        for level in self._levels:
            pos = np.searchsorted(level, hashes)
            pos[pos == len(level)] = len(level) - 1
            found |= level[pos] == hashes
        return found

    def add(self, hashes: np.ndarray) -> None:
        """Remember newly stored hashes (call only after their commit)."""
        if not len(hashes):
            return
        new = np.sort(hashes.astype(np.uint64, copy=False))
        # Merge while the newest level is at least as large as the one before it, so there
        # are O(log n) levels and each hash is re-sorted O(log n) times overall.
        while self._levels and len(self._levels[-1]) <= len(new):
            new = np.sort(np.concatenate([self._levels.pop(), new]), kind="stable")
        self._levels.append(new)
