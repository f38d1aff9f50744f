"""The exact lower edge of every value bucket, as tokenshape's own DuckDB buckets values.

`bucket_sql` takes floor(ln(v) / ln(GAMMA)) with DuckDB's `ln` (the C library's log). Spark's
`ln` is Java's StrictMath.log (fdlibm), which rounds differently in the last bit for some
doubles, and near a bucket edge one last bit moves a value into the neighbouring bucket. So the
Spark job does not trust its own `ln`: it takes a first guess from it and corrects that guess
by one bucket either way against this table.

For b in -BUCKET_LIMIT..BUCKET_LIMIT, edge b is the smallest double x > 0 whose bucket_sql(x)
is b or more; found by bisection on the doubles' bit patterns (positive doubles order as their
bits do), each step one vectorised DuckDB query over every bucket at once. Computed when a
job is prepared, not shipped as a data file: the table is then what *this* machine's DuckDB
says (DuckDB takes `ln` from the platform's C library, which may round differently from the
one a shipped file was made with), the same DuckDB that builds and later reads the rollups.
"""

from __future__ import annotations

import math
from functools import lru_cache

import duckdb
import numpy as np

from app.storage import offline
from app.storage.rollups import BUCKET_LIMIT, GAMMA, bucket_sql

_SMALLEST = 1  # bit pattern of the smallest positive double (4.9e-324)
_WINDOW = 1 << 20  # first bracket, in units in the last place either side of GAMMA^b


def duckdb_buckets(con: duckdb.DuckDBPyConnection, values: np.ndarray) -> np.ndarray:
    """bucket_sql of each double in `values`, evaluated by DuckDB, in order."""
    con.register("lake_edge_values", {"i": np.arange(len(values)), "v": values})
    try:
        out = con.execute(
            f"SELECT {bucket_sql('v')} AS b FROM lake_edge_values ORDER BY i"
        ).fetchnumpy()["b"]
    finally:
        con.unregister("lake_edge_values")
    return np.asarray(out, dtype=np.int64)


def _doubles(bits: np.ndarray) -> np.ndarray:
    return bits.astype(np.int64).view(np.float64)


@lru_cache(maxsize=1)
def bucket_edges() -> tuple[float, ...]:
    """Lower edge of each bucket -BUCKET_LIMIT..BUCKET_LIMIT (index 0 is -BUCKET_LIMIT)."""
    con = offline.connect()
    try:
        return tuple(_edges(con).tolist())
    finally:
        con.close()


def _edges(con: duckdb.DuckDBPyConnection) -> np.ndarray:
    buckets = np.arange(-BUCKET_LIMIT + 1, BUCKET_LIMIT + 1, dtype=np.int64)
    guess = np.exp(buckets * math.log(GAMMA)).view(np.int64)
    # Invariant: bucket(lo) < b <= bucket(hi). Widen the first bracket until it holds.
    lo, hi = guess - _WINDOW, guess + _WINDOW
    while True:
        low_ok = duckdb_buckets(con, _doubles(lo)) < buckets
        high_ok = duckdb_buckets(con, _doubles(hi)) >= buckets
        if low_ok.all() and high_ok.all():
            break
        lo = np.where(low_ok, lo, np.maximum(lo - (hi - lo), _SMALLEST))
        hi = np.where(high_ok, hi, hi + (hi - lo))
    while (hi - lo > 1).any():
        mid = lo + (hi - lo) // 2
        up = duckdb_buckets(con, _doubles(mid)) >= buckets
        hi = np.where(up, mid, hi)
        lo = np.where(up, lo, mid)
    # Below the lowest bucket's edge there is no bucket: bucket_sql clamps there, so the
    # smallest positive double already lands in -BUCKET_LIMIT.
    return np.concatenate([[_doubles(np.array([_SMALLEST]))[0]], _doubles(hi)])
