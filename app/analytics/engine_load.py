"""What rightsizing needs of an engine's traffic: coverage quantiles, footprint, peak minute."""

from __future__ import annotations

import duckdb

from app.analytics import weighted
from app.analytics.filters import Filter
from app.analytics.shapes import QUANTILE_NAMES, QUANTILES
from app.storage.rows import first_row


def engine_load(cur: duckdb.DuckDBPyConnection, flt: Filter, coverage: float) -> dict:
    """Quantiles at the coverage target, E[ISL + OSL/2], mean E2E and the busiest minute
    (requests weighted by 1/sample_rate when the window holds sampled rows)."""
    where, params = flt.where()
    qs = list(QUANTILES)
    if weighted.is_sampled(cur, flt):
        return _weighted_engine_load(cur, where, params, coverage)
    row = first_row(
        cur,
        "SELECT count(*), quantile_cont(isl, ?), quantile_cont(osl, ?), "
        "quantile_cont(isl + osl, ?), avg(isl + osl / 2.0), avg(e2e_ms) / 1000.0, "
        f"quantile_cont(isl, {qs}), quantile_cont(osl, {qs}), quantile_cont(isl + osl, {qs}), "
        f"max(isl), max(osl), max(isl + osl) FROM requests WHERE {where}",
        [coverage, coverage, coverage] + params,
    )
    peak = first_row(
        cur,
        "SELECT coalesce(max(n), 0) / 60.0, coalesce(max(tokens), 0) / 60.0 FROM ("
        "SELECT date_trunc('minute', started_at) AS m, count(*) AS n, sum(isl) AS tokens "
        f"FROM requests WHERE {where} GROUP BY 1)",
        params,
    )
    assert row is not None and peak is not None
    n = int(row[0])
    table = {}
    for k, name in enumerate(("isl", "osl", "seq")):
        values = row[6 + k] if n else [None] * len(qs)
        table[name] = dict(zip(QUANTILE_NAMES, values, strict=True)) | {
            "max": row[9 + k] if n else None
        }
    return {
        "requests": n,
        "isl_q": row[1],
        "osl_q": row[2],
        "seq_q": row[3],
        "mean_kv_tokens": row[4],
        "mean_e2e_s": row[5],
        "peak_rate": float(peak[0]),
        "peak_prefill_tps": float(peak[1]),
        "quantiles": table,
    }


def _weighted_engine_load(
    cur: duckdb.DuckDBPyConnection, where: str, params: list, coverage: float
) -> dict:
    """engine_load over a window holding sampled rows: weighted counts, means and quantiles."""
    source = f"(SELECT * FROM requests WHERE {where})"
    row = first_row(
        cur,
        f"SELECT {weighted.count_sql(True)}, {weighted.mean_sql('isl + osl / 2.0', True)}, "
        f"{weighted.mean_sql('e2e_ms', True)} / 1000.0, max(isl), max(osl), max(isl + osl) "
        f"FROM {source}",
        params,
    )
    peak = first_row(
        cur,
        "SELECT coalesce(max(n), 0) / 60.0, coalesce(max(tokens), 0) / 60.0 FROM ("
        f"SELECT date_trunc('minute', started_at) AS m, {weighted.count_sql(True)} AS n, "
        f"{weighted.total_sql('isl', True)} AS tokens FROM {source} GROUP BY 1)",
        params,
    )
    assert row is not None and peak is not None
    measures = ("isl", "osl", "isl + osl")
    found = weighted.quantiles(cur, source, params, (), measures, (coverage, *QUANTILES))
    n = int(row[0])
    table = {}
    for k, name in enumerate(("isl", "osl", "seq")):
        values = found.get((measures[k],)) or [None] * (len(QUANTILES) + 1)
        table[name] = dict(zip(QUANTILE_NAMES, values[1:], strict=True)) | {
            "max": row[3 + k] if n else None
        }
    at = [(found.get((m,)) or [None])[0] for m in measures]
    return {
        "requests": n,
        "isl_q": at[0],
        "osl_q": at[1],
        "seq_q": at[2],
        "mean_kv_tokens": row[1],
        "mean_e2e_s": row[2],
        "peak_rate": float(peak[0]),
        "peak_prefill_tps": float(peak[1]),
        "quantiles": table,
    }


def rejected(cur: duckdb.DuckDBPyConnection, flt: Filter, bounds: list[tuple]) -> list[int | None]:
    """Requests each (max_input_len, max_seq_len) pair would refuse; None where both are unset."""
    where, params = flt.where()
    sampled = weighted.is_sampled(cur, flt)
    parts, args = [], []
    unset = 2**31 - 1
    for max_in, max_seq in bounds:
        if max_in is None and max_seq is None:
            continue
        parts.append(weighted.count_sql(sampled, "isl > ? OR isl + osl > ?"))
        args += [unset if max_in is None else max_in, unset if max_seq is None else max_seq]
    if not parts:
        return [None] * len(bounds)
    row = first_row(cur, f"SELECT {', '.join(parts)} FROM requests WHERE {where}", args + params)
    assert row is not None
    values = iter(int(v) for v in row)
    return [None if a is None and b is None else next(values) for a, b in bounds]
