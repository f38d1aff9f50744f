"""The shape of the traffic: ISL x OSL heat map, quantiles, and the four shapes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import SupportsFloat, cast

import duckdb
import numpy as np

from app.analytics import rollups, weighted
from app.analytics.bins import LOG2_EDGES, case_sql, edges_for
from app.analytics.filters import Filter
from app.storage.rollups import HALF_OCTAVE_EDGES, MEASURES, RELATIVE_ERROR
from app.storage.rows import first_row

QUANTILES = (0.5, 0.9, 0.99, 0.999)
QUANTILE_NAMES = ("p50", "p90", "p99", "p99.9")


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
    """Request counts per (ISL bin, OSL bin); every request falls in exactly one cell (a
    sampled row counts 1/sample_rate requests, cells rounded to whole requests)."""
    if bins != "linear" and (sp := rollups.split(cur, flt)) is not None:
        half = rollups.half_octave_counts(cur, flt, sp)
        if bins == "log2":  # log2 bin k is half-octave bins 2k-1 and 2k (bin 0 is [0, 16))
            merged = np.zeros((len(LOG2_EDGES),) * 2, dtype=np.int64)
            index = (np.arange(len(HALF_OCTAVE_EDGES)) + 1) // 2
            np.add.at(merged, (index[:, None], index[None, :]), half)
            half = merged
        edges = edges_for(bins)
        return HeatMap(edges, edges, half, int(half.sum()))
    top_isl, top_osl = _top(cur, flt) if bins == "linear" else (0, 0)
    isl_edges = edges_for(bins, isl_width, top_isl)
    osl_edges = edges_for(bins, osl_width, top_osl)
    isl_case, isl_params = case_sql("isl", isl_edges)
    osl_case, osl_params = case_sql("osl", osl_edges)
    where, params = flt.where()
    n = weighted.count_sql(weighted.is_sampled(cur, flt))
    rows = cur.execute(
        f"SELECT {isl_case} AS i, {osl_case} AS j, {n} AS n FROM requests "
        f"WHERE {where} GROUP BY ALL",
        isl_params + osl_params + params,
    ).fetchnumpy()
    counts = np.zeros((len(isl_edges), len(osl_edges)), dtype=np.int64)
    np.add.at(counts, (rows["i"].astype(int), rows["j"].astype(int)), rows["n"].astype(np.int64))
    return HeatMap(isl_edges, osl_edges, counts, int(counts.sum()))


class Quantiles(dict):
    """measure -> {"p50", "p90", "p99", "p99.9", "max"}; `relative_error` is 0.0 when the
    quantiles are exact, else the most any of them may be off, relative to its value (the
    maxima are always exact)."""

    relative_error: float = 0.0


def quantiles(cur: duckdb.DuckDBPyConnection, flt: Filter, *, exact: bool = False) -> Quantiles:
    """p50/p90/p99/p99.9 and max of token counts and latencies (nulls ignored).

    Windows of a day or more come from the hourly rollups, within RELATIVE_ERROR (±0.99%);
    shorter ones, or `exact`, use DuckDB's exact quantile_cont on the raw rows (weighted
    quantiles when the window holds sampled rows: app/analytics/weighted.py)."""
    if not exact and (sp := rollups.split(cur, flt)) is not None:
        stats = rollups.value_stats(cur, flt, sp, QUANTILES)
        if stats is not None:
            approx = Quantiles()
            for measure, found in next(iter(stats.values())).measures.items():
                qs = found.quantiles if found else [None] * len(QUANTILES)
                approx[measure] = {
                    **dict(zip(QUANTILE_NAMES, qs, strict=True)),
                    "max": found.top if found else None,
                }
            approx.relative_error = RELATIVE_ERROR
            return approx
    where, params = flt.where()
    if weighted.is_sampled(cur, flt):
        return _weighted_quantiles(cur, where, params)
    selects = ", ".join(
        f"quantile_cont({m}, {list(QUANTILES)}), max({m}), count({m})" for m in MEASURES
    )
    row = first_row(cur, f"SELECT {selects} FROM requests WHERE {where}", params)
    out = Quantiles()
    for k, measure in enumerate(MEASURES):
        found_qs, top, n = (row[3 * k], row[3 * k + 1], row[3 * k + 2]) if row else (None, None, 0)
        # n > 0 only with a row: its quantiles are a list and its max a number.
        values = dict(zip(QUANTILE_NAMES, cast(list, found_qs) if n else [None] * 4, strict=True))
        values["max"] = float(cast(SupportsFloat, top)) if n else None
        out[measure] = {k2: (None if v is None else float(v)) for k2, v in values.items()}
    return out


def _weighted_quantiles(cur: duckdb.DuckDBPyConnection, where: str, params: list) -> Quantiles:
    source = f"(SELECT * FROM requests WHERE {where})"
    found = weighted.quantiles(cur, source, params, (), MEASURES, QUANTILES)
    tops = first_row(
        cur, f"SELECT {', '.join(f'max({m})' for m in MEASURES)} FROM {source}", params
    )
    out = Quantiles()
    for k, measure in enumerate(MEASURES):
        qs = found.get((measure,), [None] * len(QUANTILES))
        top = tops[k] if tops else None
        out[measure] = {
            **dict(zip(QUANTILE_NAMES, qs, strict=True)),
            "max": None if top is None else float(top),
        }
    return out


def four_shapes(
    cur: duckdb.DuckDBPyConnection, flt: Filter, *, long_isl: int = 1024, long_osl: int = 256
) -> dict[str, int]:
    """Request counts of the four shapes: long/short input x long/short output."""
    names = ("long_in_short_out", "long_in_long_out", "short_in_long_out", "short_in_short_out")
    if (
        long_isl in HALF_OCTAVE_EDGES
        and long_osl in HALF_OCTAVE_EDGES
        and (sp := rollups.split(cur, flt)) is not None
    ):  # thresholds on bin edges: the heat map's rollups hold the exact answer
        half = rollups.half_octave_counts(cur, flt, sp)
        i, j = HALF_OCTAVE_EDGES.index(long_isl), HALF_OCTAVE_EDGES.index(long_osl)
        quarters = (half[i:, :j], half[i:, j:], half[:i, j:], half[:i, :j])
        return dict(zip(names, (int(q.sum()) for q in quarters), strict=True))
    where, params = flt.where()
    sampled = weighted.is_sampled(cur, flt)
    counts = ", ".join(
        weighted.count_sql(sampled, condition)
        for condition in (
            "isl >= ? AND osl < ?",
            "isl >= ? AND osl >= ?",
            "isl < ? AND osl >= ?",
            "isl < ? AND osl < ?",
        )
    )
    row = first_row(
        cur,
        f"SELECT {counts} FROM requests WHERE {where}",
        [long_isl, long_osl] * 4 + params,
    )
    return dict(zip(names, (int(v) for v in row), strict=True)) if row else dict.fromkeys(names, 0)
