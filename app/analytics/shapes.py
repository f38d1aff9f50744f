"""The shape of the traffic: ISL x OSL heat map, quantiles, and the four shapes."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np

from app.analytics.bins import case_sql, edges_for
from app.analytics.filters import Filter
from app.storage.rows import first_row

QUANTILES = (0.5, 0.9, 0.99, 0.999)
QUANTILE_NAMES = ("p50", "p90", "p99", "p99.9")
MEASURES = ("isl", "osl", "ttft_ms", "itl_ms", "e2e_ms")


@dataclass(frozen=True)
class HeatMap:
    """counts[i][j] is the number of requests in ISL bin i and OSL bin j."""

    isl_edges: tuple[int, ...]
    osl_edges: tuple[int, ...]
    counts: np.ndarray
    total: int


def _top(cur: duckdb.DuckDBPyConnection, flt: Filter) -> tuple[int, int]:
    where, params = flt.where()
    row = first_row(
        cur,
        f"SELECT coalesce(max(isl), 0), coalesce(max(osl), 0) FROM requests WHERE {where}",
        params,
    )
    return (int(row[0]), int(row[1])) if row else (0, 0)


def heatmap(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    *,
    bins: str = "log2",
    isl_width: int | None = None,
    osl_width: int | None = None,
) -> HeatMap:
    """Request counts per (ISL bin, OSL bin); every request falls in exactly one cell."""
    top_isl, top_osl = _top(cur, flt) if bins == "linear" else (0, 0)
    isl_edges = edges_for(bins, isl_width, top_isl)
    osl_edges = edges_for(bins, osl_width, top_osl)
    isl_case, isl_params = case_sql("isl", isl_edges)
    osl_case, osl_params = case_sql("osl", osl_edges)
    where, params = flt.where()
    rows = cur.execute(
        f"SELECT {isl_case} AS i, {osl_case} AS j, count(*) AS n FROM requests "
        f"WHERE {where} GROUP BY ALL",
        isl_params + osl_params + params,
    ).fetchnumpy()
    counts = np.zeros((len(isl_edges), len(osl_edges)), dtype=np.int64)
    np.add.at(counts, (rows["i"].astype(int), rows["j"].astype(int)), rows["n"].astype(np.int64))
    return HeatMap(isl_edges, osl_edges, counts, int(counts.sum()))


def quantiles(cur: duckdb.DuckDBPyConnection, flt: Filter) -> dict[str, dict[str, float | None]]:
    """Exact p50/p90/p99/p99.9 and max of token counts and latencies (nulls ignored)."""
    where, params = flt.where()
    selects = ", ".join(
        f"quantile_cont({m}, {list(QUANTILES)}), max({m}), count({m})" for m in MEASURES
    )
    row = first_row(cur, f"SELECT {selects} FROM requests WHERE {where}", params)
    out: dict[str, dict[str, float | None]] = {}
    for k, measure in enumerate(MEASURES):
        qs, top, n = (row[3 * k], row[3 * k + 1], row[3 * k + 2]) if row else (None, None, 0)
        values = dict(zip(QUANTILE_NAMES, qs if n else [None] * 4, strict=True))
        values["max"] = float(top) if n else None
        out[measure] = {k2: (None if v is None else float(v)) for k2, v in values.items()}
    return out


def four_shapes(
    cur: duckdb.DuckDBPyConnection, flt: Filter, *, long_isl: int = 1024, long_osl: int = 256
) -> dict[str, int]:
    """Request counts of the four shapes: long/short input x long/short output."""
    where, params = flt.where()
    row = first_row(
        cur,
        "SELECT count(*) FILTER (WHERE isl >= ? AND osl < ?), "
        "count(*) FILTER (WHERE isl >= ? AND osl >= ?), "
        "count(*) FILTER (WHERE isl < ? AND osl >= ?), "
        f"count(*) FILTER (WHERE isl < ? AND osl < ?) FROM requests WHERE {where}",
        [long_isl, long_osl] * 4 + params,
    )
    names = ("long_in_short_out", "long_in_long_out", "short_in_long_out", "short_in_short_out")
    return dict(zip(names, (int(v) for v in row), strict=True)) if row else dict.fromkeys(names, 0)
