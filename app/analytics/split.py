"""Series split by one dimension: the window's busiest values (by requests), a series each, and
one series for all the rest (other values, and rows without one), over time buckets.

Column names reach the SQL only from the allow-lists below, never from the user; the chosen
values are one bound list parameter (`list_position(?, column)`: 1..N a top value, 0 the rest).
Splits by model, engine or gateway read the hourly rollups where the unsplit views do (the
same `local_split`); tenants are kept only in the full-grain hourly tier, so a split by tenant,
like `queue_ms` and `cached_tokens` (no rollup keeps them), reads raw rows."""

from __future__ import annotations

from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from app.analytics import rollups, weighted
from app.analytics.filters import WEIGHT, Filter
from app.analytics.rollups.sketch import group_estimates

# The rollup readers' building blocks: the clean hours of a split and its raw intervals, read
# the same way `values_over_time_by` reads them, with a key that also keeps "the rest".
from app.analytics.rollups.sql import keyed_counts, keyed_values, raw_selects, rolled
from app.analytics.windows import bucket_sql
from app.storage.rollups import MEASURES, ttft_sql

SPLITS = ("model", "engine", "tenant", "gateway")
TOP_N = 8
OTHER = "(other)"
# Dimensions every rollup tier keeps (tenant only the full-grain hourly one).
ROLLED = ("model", "engine", "gateway")
# Columns a raw series may take quantiles of, sum, or require (a field some gateways omit).
QUANTILED = ("ttft_ms", "itl_ms", "e2e_ms", "queue_ms")
SUMMED = ("isl", "osl", "cached_tokens")
OPTIONAL = ("queue_ms", "cached_tokens")


@dataclass(frozen=True)
class Breakdown:
    """Series per value of `by` (None: one series, the whole window), busiest first and OTHER
    last; how they were read: `relative_error` of the quantiles (rollups), `raw` (raw rows
    alone) and `sampled` (raw rows with a sample rate: counts and quantiles estimated)."""

    by: str | None
    series: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    relative_error: float = 0.0
    raw: bool = True
    sampled: bool = False

    @property
    def requests(self) -> int:
        """Requests behind every series together."""
        return int(sum(float(f["requests"].sum()) for _, f in self.series))


def check(by: str) -> str:
    """`by` when it is one of SPLITS, else a ValueError naming it and the choices."""
    if by not in SPLITS:
        raise ValueError(f"cannot split by {by!r}: choose one of {', '.join(SPLITS)}")
    return by


def _check_columns(names: tuple[str, ...], allowed: tuple[str, ...]) -> None:
    for name in names:
        if name not in allowed:
            raise ValueError(f"column {name!r}: choose from {', '.join(allowed)}")


def key_sql(by: str | None, top: tuple[str, ...]) -> tuple[str, list]:
    """SQL of a row's series key (1..N: its value's place in `top`, 0: the rest) and its
    parameters; "0" for no split."""
    if by is None:
        return "0", []
    return f"coalesce(list_position(?, {check(by)}), 0)", [list(top)]


def top_values(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    by: str,
    limit: int = TOP_N,
    reported: str | None = None,
) -> tuple[str, ...]:
    """The named values of `by` in the window, busiest first (weighted requests), at most
    `limit`; with `reported` (one of OPTIONAL), among the rows that report that field."""
    check(by)
    if reported is None and by in ROLLED and (sp := rollups.split(cur, flt)) is not None:
        found = rollups.busiest(cur, flt, sp, by, limit)
        if found is not None:
            return tuple(found)
    where, params = flt.where()
    if reported is not None:
        _check_columns((reported,), OPTIONAL)
        where += f" AND {reported} IS NOT NULL"
    rows = cur.execute(
        f"SELECT {by} FROM requests WHERE {where} AND {by} IS NOT NULL "
        f"GROUP BY 1 ORDER BY sum({WEIGHT}) DESC, 1 LIMIT ?",
        [*params, limit],
    ).fetchall()
    return tuple(r[0] for r in rows)


def named(
    found: dict[int, pd.DataFrame], by: str | None, top: tuple[str, ...]
) -> list[tuple[str, pd.DataFrame]]:
    """Keyed series as (name, frame): the top values in their order, then OTHER; a split
    key without rows is left out; no split is one series named "all"."""
    if by is None:
        return [("all", found[0])] if 0 in found else []
    out = [(top[k - 1], found[k]) for k in range(1, len(top) + 1) if k in found]
    return out + ([(OTHER, found[0])] if 0 in found else [])


def reporting(cur: duckdb.DuckDBPyConnection, flt: Filter, column: str) -> tuple[int, int]:
    """(requests that report `column`, all requests) in the window, weighted."""
    _check_columns((column,), OPTIONAL)
    where, params = flt.where()
    sampled = weighted.is_sampled(cur, flt)
    row = cur.execute(
        f"SELECT {weighted.count_sql(sampled, f'{column} IS NOT NULL')}, "
        f"{weighted.count_sql(sampled)} FROM requests WHERE {where}",
        params,
    ).fetchone()
    return (0, 0) if row is None else (int(row[0] or 0), int(row[1] or 0))


def raw_series(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    seconds: int,
    tz: str,
    by: str | None,
    top: tuple[str, ...],
    measures: tuple[str, ...] = (),
    quantiles: tuple[float, ...] = (),
    labels: tuple[str, ...] = (),
    *,
    sums: tuple[str, ...] = (),
    reported: str | None = None,
) -> tuple[dict[int, pd.DataFrame], bool]:
    """Per series key and local time bucket, from raw rows: `requests`, `sum_<column>` of each
    of `sums`, `<measure>_<label>` per quantile of each of `measures`; only rows reporting
    `reported` when given. Weighted when the window holds sampled rows (the second value)."""
    _check_columns(measures, QUANTILED)
    _check_columns(sums, SUMMED)
    key, key_params = key_sql(by, top)
    local, lead = bucket_sql("started_at", seconds, tz)
    where, params = flt.where()
    if reported is not None:
        _check_columns((reported,), OPTIONAL)
        where += f" AND {reported} IS NOT NULL"
    sampled = weighted.is_sampled(cur, flt)
    summed = "".join(f", {weighted.total_sql(c, sampled)}::DOUBLE AS sum_{c}" for c in sums)
    if not sampled:
        cols = "".join(f", quantile_cont({m}, ?) AS {m}" for m in measures)
        frame = cur.execute(
            f"SELECT {key} AS k, {local} AS bucket, count(*) AS requests{summed}{cols} "
            f"FROM requests WHERE {where} GROUP BY 1, 2 ORDER BY 1, 2",
            [*key_params, *lead, *([list(quantiles)] * len(measures)), *params],
        ).df()
        for m in measures:
            values = frame.pop(m)
            for j, label in enumerate(labels):
                # A bucket where no row reports the measure has no list: None, or pandas'
                # NA when the column's type is a nullable one.
                frame[f"{m}_{label}"] = [
                    v[j] if isinstance(v, list | np.ndarray) else np.nan for v in values
                ]
    else:
        source = f"(SELECT {key} AS k, {local} AS bucket, * FROM requests WHERE {where})"
        source_params = [*key_params, *lead, *params]
        frame = cur.execute(
            f"SELECT k, bucket, {weighted.count_sql(True)} AS requests{summed} FROM {source} "
            "GROUP BY 1, 2 ORDER BY 1, 2",
            source_params,
        ).df()
        found = (
            weighted.quantiles(cur, source, source_params, ("k", "bucket"), measures, quantiles)
            if measures
            else {}
        )
        # DuckDB hands the keys back as Python values: match them as UTC Timestamps.
        at = {(int(k[0]), pd.Timestamp(k[1]).tz_convert("UTC"), k[2]): v for k, v in found.items()}
        for m in measures:
            for j, label in enumerate(labels):
                frame[f"{m}_{label}"] = [
                    (
                        at.get((int(k), pd.Timestamp(b).tz_convert("UTC"), m))
                        or [np.nan] * len(labels)
                    )[j]
                    for k, b in zip(frame["k"], frame["bucket"], strict=True)
                ]
    out = {int(k): part.drop(columns="k").reset_index(drop=True) for k, part in frame.groupby("k")}
    return out, sampled


def rolled_series(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: rollups.Split,
    seconds: int,
    tz: str,
    by: str,
    top: tuple[str, ...],
    measures: tuple[str, ...] = (),
    quantiles: tuple[float, ...] = (),
    labels: tuple[str, ...] = (),
) -> dict[int, pd.DataFrame] | None:
    """`raw_series` (requests and quantile estimates of rollup `measures`) from the rollups'
    clean hours and the split's raw intervals; `by` one of ROLLED. None when no rollup row is
    in the window (the raw path is as fast then)."""
    if by not in ROLLED:
        raise ValueError(f"the rollups cannot split by {by!r}: one of {', '.join(ROLLED)}")
    _check_columns(measures, MEASURES)
    key, key_params = key_sql(by, top)
    # NULL keys stay: they are "(other)".
    counted = keyed_counts(cur, flt, sp, seconds, tz, (key, key_params), (by,), keep_null=True)
    if not len(counted["k"]) or not counted["rolled"].any():
        return None
    rows: dict[str, np.ndarray] = {"k": np.array([], dtype=np.int32)}
    codes = [MEASURES.index(m) for m in measures]
    if measures:
        rows = keyed_values(
            cur, flt, sp, seconds, tz, (key, key_params), (by,), codes, keep_null=True
        )
    setting = cur.execute("SELECT current_setting('TimeZone')").fetchone()
    zone = str(setting[0]) if setting else "UTC"
    out: dict[int, pd.DataFrame] = {}
    for k in np.unique(counted["k"]):
        mine = counted["k"] == k
        times = counted["g"][mine]  # every bucket with requests, in time order
        frame = pd.DataFrame({"bucket": pd.to_datetime(times, unit="us", utc=True)})
        if zone != "UTC":  # as DuckDB hands TIMESTAMPTZ to pandas on the raw path
            frame["bucket"] = frame["bucket"].dt.tz_convert(zone)
        frame["requests"] = np.rint(counted["n"][mine]).astype(np.int64)
        sel = rows["k"] == k
        if measures and sel.any():
            at = rows["g"][sel]
            g = np.searchsorted(times, at)
            # A value row in a bucket without requests cannot be placed (tiers out of step).
            held = (g < len(times)) & (times[np.minimum(g, len(times) - 1)] == at)
            measure, b = rows["measure"][sel], rows["b"][sel]
            n, vmax = rows["n"][sel], rows["vmax"][sel]
        for m, code in zip(measures, codes, strict=True):
            est = np.full((len(times), len(quantiles)), np.nan)
            if sel.any():
                pick = held & (measure == code)
                est = group_estimates(g[pick], b[pick], n[pick], vmax[pick], len(times), quantiles)
            for j, label in enumerate(labels):
                frame[f"{m}_{label}"] = est[:, j]
        out[int(k)] = frame
    return out


def rolled_ttft_by_model(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: rollups.Split
) -> dict[str, np.ndarray] | None:
    """Rows (model, octave ISL bin of LOG2_EDGES, TTFT bucket b) of the TTFT rollup and the
    split's raw intervals, sorted so: weighted count n, vmax and the fit's sums (sx, sy, sxy,
    sxx); None when no rollup row is in the window."""
    src, params = rolled(flt, sp, "ttft", ("model",))
    columns = "model, ib, b, w AS n, vmax, sx, sy, sxy, sxx"
    raw, raw_params = raw_selects(
        flt, sp, f"SELECT {columns}, false AS rolled FROM ({ttft_sql('{src}', 'model')})"
    )
    rows = cur.execute(
        "SELECT model, ((ib + 1) // 2)::INTEGER AS bin, b, sum(n)::DOUBLE AS n, "
        "max(vmax)::DOUBLE AS vmax, sum(sx)::DOUBLE AS sx, sum(sy)::DOUBLE AS sy, "
        "sum(sxy)::DOUBLE AS sxy, sum(sxx)::DOUBLE AS sxx, bool_or(rolled) AS rolled FROM ("
        f"SELECT {columns}, true AS rolled FROM {src}"
        + "".join(f" UNION ALL {q}" for q in raw)
        + ") GROUP BY model, bin, b ORDER BY model, bin, b",
        params + raw_params,
    ).fetchnumpy()
    if not len(rows["n"]) or not rows["rolled"].any():
        return None
    return rows


def parse(value: object) -> tuple[str | None, str | None]:
    """A URL's `split` as (dimension or None, what was wrong with it or None): a value not
    in SPLITS is named, and the views are drawn unsplit."""
    if value is None or value == "":
        return None, None
    if isinstance(value, str) and value in SPLITS:
        return value, None
    shown = str(value)[:40]
    return None, (
        f"“split”: {shown!r} is not one of {', '.join(SPLITS)}; the charts are not split."
    )
