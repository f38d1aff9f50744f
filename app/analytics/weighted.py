"""Weighing sampled rows: each stored row stands for WEIGHT = 1/sample_rate requests.

Unsampled windows (no row with a rate below 1, checked in ~2 ms through DuckDB's zone maps)
keep the exact SQL they always had: count(*), sum, quantile_cont. Sampled windows weigh:

- counts are sum(WEIGHT), rounded to whole requests; sums (tokens) are sums of value x WEIGHT;
  shares and means are ratios of weighted sums;
- quantiles are weighted quantile_cont: with total weight W the quantile q sits at the
  position q(W - 1) of the values sorted by size, where a row of weight w holds positions
  [c - w, c) of its cumulative weight c, interpolated linearly between the values at
  floor(q(W - 1)) and the next position (at most W - 1). A row of weight k gives exactly
  what k copies of it give to quantile_cont (numpy's "linear" method).
"""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd

from app.analytics.filters import WEIGHT, Filter
from app.storage.rows import first_row

# Cumulative weights are sums of floats: compare them with a tolerance relative to the total
# (capped below 1, so integer weights, exact in floats, are compared exactly), so a position
# that should fall exactly on a row's cumulative weight is not moved by rounding.
_EPS = 1e-9
_EPS_CAP = 0.25


def is_sampled(cur: duckdb.DuckDBPyConnection, flt: Filter) -> bool:
    """Whether any row of the filter's window was sampled (sample_rate < 1)."""
    where, params = flt.where()
    return (
        first_row(cur, f"SELECT 1 FROM requests WHERE {where} AND sample_rate < 1 LIMIT 1", params)
        is not None
    )


def count_sql(sampled: bool, condition: str | None = None) -> str:
    """The request count: count(*) unsampled, else the rounded sum of WEIGHT; `condition` a
    constant SQL predicate (a FILTER clause)."""
    where = f" FILTER (WHERE {condition})" if condition else ""
    if not sampled:
        return f"count(*){where}"
    return f"round(coalesce(sum({WEIGHT}){where}, 0))::BIGINT"


def sum_sql(expr: str, sampled: bool) -> str:
    """The sum of `expr` over the requests the rows stand for."""
    return f"sum({expr})" if not sampled else f"round(sum(({expr}) * {WEIGHT}))::HUGEINT"


def total_sql(expr: str, sampled: bool) -> str:
    """The (unrounded) sum of `expr` over the requests the rows stand for."""
    return f"sum({expr})" if not sampled else f"sum(({expr}) * {WEIGHT})"


def mean_sql(expr: str, sampled: bool) -> str:
    """The mean of `expr` (nulls skipped) over the requests the rows stand for."""
    if not sampled:
        return f"avg({expr})"
    return f"(sum(({expr}) * {WEIGHT}) / sum(CASE WHEN ({expr}) IS NOT NULL THEN {WEIGHT} END))"


def share_sql(condition: str, sampled: bool) -> str:
    """The share of requests meeting `condition` (a constant SQL predicate)."""
    if not sampled:
        return f"avg(CASE WHEN {condition} THEN 1 ELSE 0 END)"
    return f"(sum(CASE WHEN {condition} THEN {WEIGHT} ELSE 0 END) / sum({WEIGHT}))"


def quantiles(
    cur: duckdb.DuckDBPyConnection,
    source: str,
    params: list,
    keys: tuple[str, ...],
    measures: tuple[str, ...],
    qs: tuple[float, ...],
) -> dict[tuple, list[float | None]]:
    """Weighted quantiles (see the module's note) of each of `measures` per group of `keys`
    over `source` (a SQL relation with those columns and `sample_rate`; its `params`):
    (key values…, measure) -> [one value per q]; a group without values of a measure is absent.
    A measure may be a constant SQL expression of the source's columns (`isl + osl`).

    DuckDB reads the columns; numpy sorts and ranks the values by weight (an unnest and a
    window sum over the same rows in SQL are several times slower)."""
    key_cols = "".join(f"{k} AS k{i}, " for i, k in enumerate(keys))
    value_cols = "".join(f"({m})::DOUBLE AS m{j}, " for j, m in enumerate(measures))
    data = cur.execute(
        f"SELECT {key_cols}{value_cols}{WEIGHT} AS w FROM {source}", params
    ).fetchnumpy()
    weights = np.asarray(data["w"], dtype=np.float64)
    if not len(weights):
        return {}
    if keys:
        key_frame = pd.DataFrame({f"k{i}": _objects(data[f"k{i}"]) for i in range(len(keys))})
        codes = key_frame.groupby(list(key_frame.columns), dropna=False, sort=False).ngroup()
        code = codes.to_numpy()
    else:
        key_frame, code = None, np.zeros(len(weights), dtype=np.int64)
    out: dict[tuple, list[float | None]] = {}
    for j, measure in enumerate(measures):
        column = data[f"m{j}"]
        values = np.ma.getdata(column).astype(np.float64)
        kept = ~np.ma.getmaskarray(column) & ~np.isnan(values)
        rows = np.flatnonzero(kept)
        if not len(rows):
            continue
        order = rows[np.lexsort((values[rows], code[rows]))]
        firsts, found = _ranked(code[order], values[order], weights[order], qs)
        heads = (
            [()] * len(firsts)
            if key_frame is None
            else key_frame.iloc[order[firsts]].itertuples(index=False)
        )
        for key, result in zip(heads, found.tolist(), strict=True):
            out[(*(_plain(x) for x in key), measure)] = result
    return out


def _ranked(
    group: np.ndarray, v: np.ndarray, w: np.ndarray, qs: tuple[float, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """Each group's first row and its quantiles (a row per group), of rows sorted by group,
    then value."""
    cum = np.cumsum(w)
    firsts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    lasts = np.r_[firsts[1:], len(group)] - 1
    before = np.where(firsts > 0, cum[np.maximum(firsts - 1, 0)], 0.0)
    total = cum[lasts] - before
    last = np.maximum(total - 1, 0.0)
    eps = np.minimum(_EPS * total, _EPS_CAP)
    found = np.empty((len(firsts), len(qs)))
    for j, q in enumerate(qs):
        pos = q * last
        k = np.floor(pos)
        # The first row whose cumulative weight passes a position holds it.
        lo = v[np.searchsorted(cum, before + k + eps, side="right")]
        hi = v[np.searchsorted(cum, before + np.minimum(k + 1, last) + eps, side="right")]
        found[:, j] = lo + (pos - k) * (hi - lo)
    return firsts, found


def _objects(column: np.ndarray) -> np.ndarray:
    """A fetched key column with its nulls as None (masked arrays hide them)."""
    if isinstance(column, np.ma.MaskedArray):
        out = column.data.astype(object)
        out[np.ma.getmaskarray(column)] = None
        return out
    return column


def _plain(value: object) -> object:
    """A group key as Python reads it: None for a null, int for a whole number."""
    if value is None or (not isinstance(value, str) and bool(pd.isna(value))):  # type: ignore[arg-type]
        return None
    if isinstance(value, np.datetime64):  # DuckDB hands TIMESTAMPTZ over as naive UTC
        return pd.Timestamp(value, tz="UTC")
    if isinstance(value, pd.Timestamp) and value.tzinfo is None:
        return value.tz_localize("UTC")
    if isinstance(value, np.bool_ | bool):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, float | np.floating) and float(value).is_integer():
        return int(value)
    return value
