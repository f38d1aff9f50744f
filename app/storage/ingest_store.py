"""Storing batches: dedupe on (gateway, request_id), one INSERT per batch, group commit."""

from __future__ import annotations

import duckdb
import numpy as np
import pyarrow as pa

from app.storage.batches import Batch, WriteResult, rejects_table
from app.storage.keys import KeyIndex
from app.storage.rows import first_row
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
        """Store every batch in one transaction; returns per-batch counts, in order.

        One INSERT for all rows of the flush and one for all rejects: DuckDB's cost is mostly
        per statement, so the batches are deduplicated here and inserted together.
        """
        results: list[WriteResult] = []
        kept_rows: list[pa.Table] = []
        kept_hashes: list[np.ndarray] = []
        for batch in batches:
            rows = batch.rows
            accepted = 0
            if rows is not None and rows.num_rows:
                hashes = batch.key_hashes
                if hashes is None or len(hashes) != rows.num_rows:
                    hashes = key_hashes(self.con, rows)
                keep = self._fresh_mask(rows, hashes, kept_rows, kept_hashes)
                if not keep.all():
                    rows = rows.filter(pa.array(keep))
                    hashes = hashes[keep]
                if rows.num_rows:
                    kept_rows.append(rows)
                    kept_hashes.append(hashes)
                accepted = rows.num_rows
            total = 0 if batch.rows is None else batch.rows.num_rows
            results.append(WriteResult(accepted, total - accepted, len(batch.rejects)))
        rejects = [rejects_table(b, self.raw_chars) for b in batches if b.rejects]
        self.con.execute("BEGIN TRANSACTION")
        try:
            if kept_rows:
                self._insert("requests", _COLS, pa.concat_tables(kept_rows))
            if rejects:
                self._insert("rejects", "*", pa.concat_tables(rejects))
            self.con.execute("COMMIT")
        except BaseException:
            self.con.execute("ROLLBACK")
            raise
        for hashes in kept_hashes:  # only now are these rows durable
            self.keys.add(hashes)
        return results

    def _insert(self, table: str, cols: str, rows: pa.Table) -> None:
        self.con.register("staged", rows)
        try:
            target = f"{table} ({cols})" if cols != "*" else table
            self.con.execute(f"INSERT INTO {target} SELECT {cols} FROM staged")
        finally:
            self.con.unregister("staged")

    def _fresh_mask(
        self,
        rows: pa.Table,
        hashes: np.ndarray,
        earlier_rows: list[pa.Table],
        earlier_hashes: list[np.ndarray],
    ) -> np.ndarray:
        """True for rows to insert: not stored yet and first of their key in this flush."""
        keep = np.ones(len(hashes), dtype=bool)
        gw: list | None = None
        rid: list | None = None
        # Within the batch: a repeated hash is a repeated key unless the strings differ.
        _, first = np.unique(hashes, return_index=True)
        if len(first) < len(hashes):
            keep[:] = False
            keep[first] = True
            seen: set[tuple[str, str]] = set()
            gw, rid = rows.column("gateway").to_pylist(), rows.column("request_id").to_pylist()
            for i in np.flatnonzero(np.isin(hashes, hashes[~keep])):
                key = (gw[i], rid[i])
                keep[i] = key not in seen
                seen.add(key)
        # Against earlier batches of this flush, which are not in the table yet.
        if earlier_hashes:
            hit = np.isin(hashes, np.concatenate(earlier_hashes)) & keep
            if hit.any():
                if gw is None or rid is None:
                    gw = rows.column("gateway").to_pylist()
                    rid = rows.column("request_id").to_pylist()
                prev = {
                    key
                    for t in earlier_rows
                    for key in zip(
                        t.column("gateway").to_pylist(),
                        t.column("request_id").to_pylist(),
                        strict=True,
                    )
                }
                for i in np.flatnonzero(hit):
                    keep[i] = (gw[i], rid[i]) not in prev
        # Against stored rows: every index hit is confirmed exactly before it counts.
        maybe = self.keys.contains(hashes) & keep
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


def key_hashes(con: duckdb.DuckDBPyConnection, rows: pa.Table) -> np.ndarray:
    """DuckDB's 64-bit hash of (gateway, request_id) per row, the key of the dedupe index.

    Ingest computes it on a reader cursor in its own thread, so the writer does not have to."""
    if rows.num_rows == 0:
        return np.empty(0, dtype=np.uint64)
    keys = rows.select(["gateway", "request_id"])
    con.register("staged_keys", keys)
    try:
        out = con.execute(f"SELECT {_HASH} AS h FROM staged_keys").fetchnumpy()["h"]
    finally:
        con.unregister("staged_keys")
    return np.asarray(out, dtype=np.uint64)


def count_rows(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Row count of one of our tables (name checked against a fixed list)."""
    if table not in {"requests", "rejects", "tokens", "engines", "report_runs"}:
        raise ValueError(f"unknown table {table!r}")
    row = first_row(con, f"SELECT count(*) FROM {table}")
    return int(row[0]) if row else 0
