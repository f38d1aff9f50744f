"""Latency views: percentile trends (whole or split by a dimension), queueing time, TTFT vs
ISL (pooled, and fitted per model), ITL vs token position, time to completion."""

from __future__ import annotations

from dataclasses import dataclass, replace

import duckdb
import numpy as np
import pandas as pd

from app.analytics import rollups, split, weighted
from app.analytics.bins import LOG2_EDGES, case_sql
from app.analytics.filters import WEIGHT, Filter
from app.analytics.rollups.sketch import group_estimates
from app.analytics.windows import BUCKETS, bucket_sql
from app.storage.rollups import POSITION_EDGES, RELATIVE_ERROR
from app.storage.rows import first_row

E2E_EDGES_MS: tuple[int, ...] = (
    0,
    50,
    100,
    200,
    500,
    1_000,
    2_000,
    5_000,
    10_000,
    20_000,
    60_000,
    120_000,
    300_000,
)


TREND_MEASURES = ("ttft_ms", "itl_ms", "e2e_ms")
TREND_QUANTILES = (0.5, 0.9, 0.99)
TREND_NAMES = ("p50", "p90", "p99")


def trend(
    cur: duckdb.DuckDBPyConnection, flt: Filter, bucket: str, tz: str, *, exact: bool = False
) -> pd.DataFrame:
    """p50/p90/p99 of TTFT, ITL and E2E and the request count per time bucket.

    Hourly and daily buckets of a window of a day or more read the hourly rollups when `tz`
    keeps whole-hour offsets over it (else a UTC hour would straddle two local buckets): the
    percentiles are then within RELATIVE_ERROR, as `frame.attrs["relative_error"]` says."""
    seconds = BUCKETS[bucket]
    sp = None if exact else rollups.local_split(cur, flt, tz, seconds)
    if sp is not None:
        found = rollups.values_over_time(cur, flt, sp, seconds, tz, TREND_MEASURES, TREND_QUANTILES)
        if found is not None:
            frame, stats = found
            for m in TREND_MEASURES:
                for k, name in enumerate(TREND_NAMES):
                    frame[f"{m}_{name}"] = stats[m][:, k]
            frame.attrs["relative_error"] = RELATIVE_ERROR
            return frame
    where, params = flt.where()
    local, local_params = bucket_sql("started_at", seconds, tz)
    if weighted.is_sampled(cur, flt):
        return _weighted_trend(cur, where, local, [*local_params, *params])
    cols = ", ".join(f"quantile_cont({m}, {list(TREND_QUANTILES)}) AS {m}" for m in TREND_MEASURES)
    frame = cur.execute(
        f"SELECT {local} AS bucket, count(*) AS requests, "
        f"{cols} FROM requests WHERE {where} GROUP BY 1 ORDER BY 1",
        [*local_params, *params],
    ).df()
    for m in TREND_MEASURES:
        values = frame.pop(m)
        for k, name in enumerate(TREND_NAMES):
            # No list where no row reports the measure: None, or pandas' NA (nullable type).
            frame[f"{m}_{name}"] = [
                v[k] if isinstance(v, list | np.ndarray) else None for v in values
            ]
    frame.attrs["relative_error"] = 0.0
    return frame


def _weighted_trend(
    cur: duckdb.DuckDBPyConnection, where: str, local: str, params: list
) -> pd.DataFrame:
    """trend's raw path over sampled rows: weighted counts and quantiles per bucket."""
    source = f"(SELECT {local} AS bucket, * FROM requests WHERE {where})"
    frame = cur.execute(
        f"SELECT bucket, {weighted.count_sql(True)} AS requests FROM {source} "
        "GROUP BY 1 ORDER BY 1",
        params,
    ).df()
    found = weighted.quantiles(cur, source, params, ("bucket",), TREND_MEASURES, TREND_QUANTILES)
    # The keys come back as DuckDB's Python values; match them on the frame's as Timestamps.
    by_time = {(pd.Timestamp(k[0]).tz_convert("UTC"), k[1]): v for k, v in found.items()}
    for m in TREND_MEASURES:
        for k, name in enumerate(TREND_NAMES):
            frame[f"{m}_{name}"] = [
                (by_time.get((pd.Timestamp(b).tz_convert("UTC"), m)) or [None] * 3)[k]
                for b in frame["bucket"]
            ]
    frame.attrs["relative_error"] = 0.0
    return frame


def ttft_vs_isl(
    cur: duckdb.DuckDBPyConnection, flt: Filter, *, exact: bool = False
) -> tuple[pd.DataFrame, float | None]:
    """Median and p90 TTFT per ISL bin, and the fitted slope in ms per 1,000 input tokens.

    A window of a day or more reads the hourly TTFT rollup: medians and p90s within
    RELATIVE_ERROR (`frame.attrs["relative_error"]`), counts and the slope exact."""
    sp = None if exact else rollups.split(cur, flt)
    rolled = rollups.ttft_by_isl(cur, flt, sp, (0.5, 0.9)) if sp is not None else None
    if rolled is not None:
        bins, slope = rolled
        frame = pd.DataFrame(
            [(k, n, q[0], q[1]) for k, (n, q) in sorted(bins.items())],
            columns=["bin", "requests", "ttft_p50", "ttft_p90"],
        )
        frame["isl_from"] = [LOG2_EDGES[int(b)] for b in frame["bin"]]
        frame.attrs["relative_error"] = RELATIVE_ERROR
        return frame, None if slope is None else slope * 1000
    where, params = flt.where()
    isl_case, edge_params = case_sql("isl", LOG2_EDGES)
    if weighted.is_sampled(cur, flt):
        source = (
            f"(SELECT {isl_case} AS bin, * FROM requests WHERE {where} AND ttft_ms IS NOT NULL)"
        )
        frame = cur.execute(
            f"SELECT bin, {weighted.count_sql(True)} AS requests FROM {source} "
            "GROUP BY 1 ORDER BY 1",
            edge_params + params,
        ).df()
        found = weighted.quantiles(
            cur, source, edge_params + params, ("bin",), ("ttft_ms",), (0.5, 0.9)
        )
        for k, name in enumerate(("ttft_p50", "ttft_p90")):
            frame[name] = [(found.get((b, "ttft_ms")) or [None, None])[k] for b in frame["bin"]]
        # The weighted least-squares slope: each row counts 1/sample_rate times.
        slope_sql = (
            f"(sum({WEIGHT}) * sum({WEIGHT} * isl * ttft_ms) - sum({WEIGHT} * isl) * "
            f"sum({WEIGHT} * ttft_ms)) / nullif(sum({WEIGHT}) * sum({WEIGHT} * isl * isl) - "
            f"sum({WEIGHT} * isl) ^ 2, 0)"
        )
    else:
        frame = cur.execute(
            f"SELECT {isl_case} AS bin, count(*) AS requests, median(ttft_ms) AS ttft_p50, "
            f"quantile_cont(ttft_ms, 0.9) AS ttft_p90 FROM requests "
            f"WHERE {where} AND ttft_ms IS NOT NULL GROUP BY 1 ORDER BY 1",
            edge_params + params,
        ).df()
        slope_sql = "regr_slope(ttft_ms, isl)"
    frame["isl_from"] = [LOG2_EDGES[int(b)] for b in frame["bin"]]
    frame.attrs["relative_error"] = 0.0
    row = first_row(
        cur,
        f"SELECT {slope_sql} FROM requests WHERE {where} AND ttft_ms IS NOT NULL",
        params,
    )
    slope = None if row is None or row[0] is None else float(row[0]) * 1000
    return frame, slope


def itl_by_position(
    cur: duckdb.DuckDBPyConnection, flt: Filter, *, exact: bool = False
) -> pd.DataFrame:
    """Median and p90 inter-token gap per output-token position bucket (from token_gaps_ms).

    A window of a day or more reads the hourly gap rollup: its quantiles are within
    RELATIVE_ERROR, as `frame.attrs["relative_error"]` says (0.0 when exact)."""
    sp = None if exact else rollups.split(cur, flt)
    rolled = rollups.gap_quantiles(cur, flt, sp, (0.5, 0.9)) if sp is not None else None
    if rolled is not None:
        frame = pd.DataFrame(
            [(pb, n, q[0], q[1]) for pb, (n, q) in sorted(rolled.items())],
            columns=["bin", "gaps", "itl_p50", "itl_p90"],
        )
        frame["position_from"] = [POSITION_EDGES[int(b)] for b in frame["bin"]]
        frame.attrs["relative_error"] = RELATIVE_ERROR
        return frame
    where, params = flt.where()
    pos_case, edge_params = case_sql("pos", POSITION_EDGES)
    if weighted.is_sampled(cur, flt):
        return _weighted_itl(cur, where, pos_case, edge_params + params)
    frame = cur.execute(
        f"""SELECT {pos_case} AS bin, count(*) AS gaps, median(gap) AS itl_p50,
                   quantile_cont(gap, 0.9) AS itl_p90
            FROM (SELECT unnest(range(1, len(token_gaps_ms) + 1)) AS pos,
                         unnest(token_gaps_ms) AS gap
                  FROM requests WHERE {where} AND token_gaps_ms IS NOT NULL)
            GROUP BY 1 ORDER BY 1""",
        edge_params + params,
    ).df()
    frame["position_from"] = [POSITION_EDGES[int(b)] for b in frame["bin"]]
    frame.attrs["relative_error"] = 0.0
    return frame


def _weighted_itl(
    cur: duckdb.DuckDBPyConnection, where: str, pos_case: str, params: list
) -> pd.DataFrame:
    """itl_by_position's raw path over sampled rows: each gap weighs its request's weight."""
    source = (
        f"(SELECT {pos_case} AS bin, gap, sample_rate FROM (SELECT sample_rate, "
        "unnest(range(1, len(token_gaps_ms) + 1)) AS pos, unnest(token_gaps_ms) AS gap "
        f"FROM requests WHERE {where} AND token_gaps_ms IS NOT NULL))"
    )
    frame = cur.execute(
        f"SELECT bin, {weighted.count_sql(True)} AS gaps FROM {source} GROUP BY 1 ORDER BY 1",
        params,
    ).df()
    found = weighted.quantiles(cur, source, params, ("bin",), ("gap",), (0.5, 0.9))
    for k, name in enumerate(("itl_p50", "itl_p90")):
        frame[name] = [(found.get((b, "gap")) or [None, None])[k] for b in frame["bin"]]
    frame["position_from"] = [POSITION_EDGES[int(b)] for b in frame["bin"]]
    frame.attrs["relative_error"] = 0.0
    return frame


def e2e_distribution(cur: duckdb.DuckDBPyConnection, flt: Filter) -> pd.DataFrame:
    """Requests per time-to-completion bin (E2E, ms; half-open bins, the last open-ended)."""
    where, params = flt.where()
    e2e_case, edge_params = case_sql("e2e_ms", E2E_EDGES_MS)
    n = weighted.count_sql(weighted.is_sampled(cur, flt))
    rows = cur.execute(
        f"SELECT {e2e_case} AS bin, {n} AS n FROM requests "
        f"WHERE {where} AND e2e_ms IS NOT NULL GROUP BY 1",
        edge_params + params,
    ).fetchnumpy()
    counts = np.zeros(len(E2E_EDGES_MS), dtype=np.int64)
    counts[rows["bin"].astype(int)] = rows["n"]
    return pd.DataFrame({"e2e_from_ms": E2E_EDGES_MS, "requests": counts})


def trend_by(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    bucket: str,
    tz: str,
    by: str,
    *,
    exact: bool = False,
    limit: int = split.TOP_N,
) -> split.Breakdown:
    """`trend` per value of `by` (one of split.SPLITS): the `limit` busiest values (requests)
    a series each, and one series of the rest (split.OTHER).

    Model, engine and gateway read the hourly rollups exactly when `trend` does (quantiles
    within RELATIVE_ERROR); tenant, and windows `trend` reads raw, read raw rows."""
    split.check(by)
    seconds = BUCKETS[bucket]
    top = split.top_values(cur, flt, by, limit)
    sp = None if exact or by not in split.ROLLED else rollups.local_split(cur, flt, tz, seconds)
    if sp is not None:
        found = split.rolled_series(
            cur, flt, sp, seconds, tz, by, top, TREND_MEASURES, TREND_QUANTILES, TREND_NAMES
        )
        if found is not None:
            return split.Breakdown(by, split.named(found, by, top), RELATIVE_ERROR, raw=False)
    raw, sampled = split.raw_series(
        cur, flt, seconds, tz, by, top, TREND_MEASURES, TREND_QUANTILES, TREND_NAMES
    )
    return split.Breakdown(by, split.named(raw, by, top), 0.0, raw=True, sampled=sampled)


QUEUE_QUANTILES = (0.5, 0.95)
QUEUE_NAMES = ("p50", "p95")


def queue_over_time(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    bucket: str,
    tz: str,
    by: str | None = None,
    *,
    limit: int = split.TOP_N,
) -> split.Breakdown:
    """p50 and p95 of `queue_ms` (the wait before the engine started the request) per time
    bucket, of the requests that report it (`requests`), whole or per value of `by`; from
    raw rows (no rollup keeps queue_ms), weighted when sampled."""
    seconds = BUCKETS[bucket]
    top = split.top_values(cur, flt, by, limit, reported="queue_ms") if by else ()
    found, sampled = split.raw_series(
        cur,
        flt,
        seconds,
        tz,
        by,
        top,
        ("queue_ms",),
        QUEUE_QUANTILES,
        QUEUE_NAMES,
        reported="queue_ms",
    )
    return split.Breakdown(by, split.named(found, by, top), 0.0, raw=True, sampled=sampled)


@dataclass(frozen=True)
class ModelFit:
    """One model's TTFT against input length: the least-squares line (weighted by
    1/sample_rate) and the median TTFT per octave ISL bin."""

    model: str
    requests: int  # with a TTFT
    slope: float | None  # ms per input token; None with fewer than two distinct ISLs
    intercept: float | None  # ms at no input token
    bins: pd.DataFrame  # bin, isl_from, isl_mean, requests, ttft_p50


def ttft_fits(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    *,
    exact: bool = False,
    limit: int = split.TOP_N,
) -> tuple[list[ModelFit], float]:
    """The TTFT-on-ISL fit of each of the `limit` busiest models, never pooled across models
    (their prefill costs differ); and the medians' relative error (RELATIVE_ERROR from the
    hourly TTFT rollup of a window of a day or more, else 0: exact)."""
    top = split.top_values(cur, flt, "model", limit)
    if not top:
        return [], 0.0
    narrowed = replace(flt, models=top)
    sp = None if exact else rollups.split(cur, narrowed)
    rows = split.rolled_ttft_by_model(cur, narrowed, sp) if sp is not None else None
    if rows is not None:
        frame, error = _fit_bins_rolled(rows), RELATIVE_ERROR
    else:
        frame, error = _fit_bins_raw(cur, narrowed), 0.0
    fits = []
    for model in top:
        mine = frame[frame["model"] == model].reset_index(drop=True)
        if not len(mine):
            continue
        n, sx, sy, sxy, sxx = (float(mine[c].sum()) for c in ("n", "sx", "sy", "sxy", "sxx"))
        spread = n * sxx - sx * sx
        slope = (n * sxy - sx * sy) / spread if n > 1 and spread > 1e-9 * n * sxx else None
        intercept = None if slope is None else (sy - slope * sx) / n
        bins = pd.DataFrame(
            {
                "bin": mine["bin"].astype(int),
                "isl_from": [LOG2_EDGES[int(b)] for b in mine["bin"]],
                "isl_mean": mine["sx"] / mine["n"],
                "requests": np.rint(mine["n"]).astype(np.int64),
                "ttft_p50": mine["ttft_p50"].astype(float),
            }
        )
        fits.append(ModelFit(model, round(n), slope, intercept, bins))
    return fits, error


_FIT_SUMS = ("n", "sx", "sy", "sxy", "sxx")


def _fit_bins_rolled(rows: dict[str, np.ndarray]) -> pd.DataFrame:
    """Per (model, bin): the fit's sums and the median estimate, from rollup rows sorted by
    model, bin, bucket."""
    model, bins = rows["model"], rows["bin"]
    change = np.r_[True, (model[1:] != model[:-1]) | (bins[1:] != bins[:-1])]
    group = np.cumsum(change) - 1
    firsts = np.flatnonzero(change)
    p50 = group_estimates(group, rows["b"], rows["n"], rows["vmax"], len(firsts), (0.5,))
    out = pd.DataFrame({"model": model[firsts], "bin": bins[firsts].astype(int)})
    for column in _FIT_SUMS:
        out[column] = np.add.reduceat(rows[column].astype(np.float64), firsts)
    out["ttft_p50"] = p50[:, 0]
    return out


def _fit_bins_raw(cur: duckdb.DuckDBPyConnection, flt: Filter) -> pd.DataFrame:
    """Per (model, bin): the fit's sums (weighted) and the median TTFT, from raw rows."""
    where, params = flt.where()
    isl_case, edge_params = case_sql("isl", LOG2_EDGES)
    sampled = weighted.is_sampled(cur, flt)
    median = "" if sampled else ", median(ttft_ms) AS ttft_p50"
    frame = cur.execute(
        f"SELECT model, {isl_case} AS bin, sum({WEIGHT})::DOUBLE AS n, "
        f"sum(isl * {WEIGHT})::DOUBLE AS sx, sum(ttft_ms * {WEIGHT}) AS sy, "
        f"sum(isl::DOUBLE * ttft_ms * {WEIGHT}) AS sxy, "
        f"sum(isl::DOUBLE * isl * {WEIGHT}) AS sxx{median} FROM requests "
        f"WHERE {where} AND ttft_ms IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2",
        edge_params + params,
    ).df()
    if sampled:
        source = (
            f"(SELECT {isl_case} AS bin, * FROM requests WHERE {where} AND ttft_ms IS NOT NULL)"
        )
        found = weighted.quantiles(
            cur, source, edge_params + params, ("model", "bin"), ("ttft_ms",), (0.5,)
        )
        frame["ttft_p50"] = [
            (found.get((m, int(b), "ttft_ms")) or [np.nan])[0]
            for m, b in zip(frame["model"], frame["bin"], strict=True)
        ]
    return frame
