"""Storing batches: dedupe on (gateway, request_id), one INSERT per batch, group commit."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from app.storage.batches import Batch, WriteResult, rejects_table
from app.storage.keys import KeyIndex
from app.storage.schema import REQUEST_COLUMNS

_COLS = ", ".join(REQUEST_COLUMNS)
_HASH = "hash(gateway, request_id)"


class RequestStore:
    """Writes batches through one connection; keeps the dedupe index in step with commits."""

    def __init__(self, con: duckdb.DuckDBPyConnection, raw_chars: int = 4096):
        self.con = con
        self.raw_chars = raw_chars
        hashes = con.execute(f"SELECT {_HASH} AS h FROM requests").fetchnumpy()["h"]
        self.keys = KeyIndex(np.asarray(hashes, dtype=np.uint64))

    def write(self, batches: list[Batch]) -> list[WriteResult]:
        """Store every batch in one transaction; returns per-batch counts, in order."""
        results: list[WriteResult] = []
        added: list[np.ndarray] = []
        self.con.execute("BEGIN TRANSACTION")
        try:
            for batch in batches:
                result, hashes = self._write_one(batch, added)
                results.append(result)
                added.append(hashes)
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        for hashes in added:  # only now are these rows durable
            self.keys.add(hashes)
        return results

    def _write_one(self, batch: Batch, earlier: list[np.ndarray]) -> tuple[WriteResult, np.ndarray]:
        rows = batch.rows
        new_hashes = np.empty(0, dtype=np.uint64)
        accepted = duplicates = 0
        if rows is not None and rows.num_rows:
            hashes = self._hashes(rows)
            keep = self._fresh_mask(rows, hashes, earlier)
            duplicates = int((~keep).sum())
            if duplicates:
                rows = rows.filter(pa.array(keep))
            new_hashes = hashes[keep]
            if rows.num_rows:
                self.con.register("staged", rows)
                try:
                    self.con.execute(f"INSERT INTO requests ({_COLS}) SELECT {_COLS} FROM staged")
                finally:
                    self.con.unregister("staged")
            accepted = rows.num_rows
        if batch.rejects:
            self.con.register("staged_rejects", rejects_table(batch, self.raw_chars))
            try:
                self.con.execute("INSERT INTO rejects SELECT * FROM staged_rejects")
            finally:
                self.con.unregister("staged_rejects")
        return WriteResult(accepted, duplicates, len(batch.rejects)), new_hashes

    def _hashes(self, rows: pa.Table) -> np.ndarray:
        keys = rows.select(["gateway", "request_id"])
        self.con.register("staged_keys", keys)
        try:
            out = self.con.execute(f"SELECT {_HASH} AS h FROM staged_keys").fetchnumpy()["h"]
        finally:
            self.con.unregister("staged_keys")
        return np.asarray(out, dtype=np.uint64)

    def _fresh_mask(
        self, rows: pa.Table, hashes: np.ndarray, earlier: list[np.ndarray]
    ) -> np.ndarray:
        """True for rows to insert: not stored yet and first of their key in this batch."""
        keep = np.ones(len(hashes), dtype=bool)
        # Within the batch: a repeated hash is a repeated key unless the strings differ.
        _, first = np.unique(hashes, return_index=True)
        if len(first) < len(hashes):
            keep[:] = False
            keep[first] = True
            seen: set[tuple[str, str]] = set()
            gw = rows.column("gateway").to_pylist()
            rid = rows.column("request_id").to_pylist()
            for i in np.flatnonzero(np.isin(hashes, hashes[~keep])):
                key = (gw[i], rid[i])
                keep[i] = key not in seen
                seen.add(key)
        # Against stored rows (and earlier batches of this transaction): confirm every hit.
        maybe = self.keys.contains(hashes)
        for prev in earlier:
            maybe |= np.isin(hashes, prev)
        maybe &= keep
        if maybe.any():
            idx = np.flatnonzero(maybe)
            stored = self._stored(rows.take(pa.array(idx)).select(["gateway", "request_id"]))
            keep[idx[stored]] = False
        return keep

    def _stored(self, cand: pa.Table) -> np.ndarray:
        """Exact check: which candidate keys are already in `requests`."""
        cand = cand.append_column("i", pa.array(np.arange(cand.num_rows, dtype=np.int64)))
        self.con.register("cand", cand)
        try:
            hits = self.con.execute(
                "SELECT c.i FROM cand c SEMI JOIN requests r "
                "ON r.gateway = c.gateway AND r.request_id = c.request_id"
            ).fetchnumpy()["i"]
        finally:
            self.con.unregister("cand")
        mask = np.zeros(cand.num_rows, dtype=bool)
        mask[np.asarray(hits, dtype=np.int64)] = True
        return mask


def count_rows(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Row count of one of our tables (name checked against a fixed list)."""
    if table not in {"requests", "rejects", "tokens", "engines", "report_runs"}:
        raise ValueError(f"unknown table {table!r}")
    row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    return int(row[0]) if row else 0
