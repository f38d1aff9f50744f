"""Goodput: the weighted share of requests that met every latency target, exact on raw rows.

Each request is judged against its engine's targets (`Targets.by_engine`), or the default
(`Targets.default`: the fleet's) when its engine has none of its own or it names no engine.
The rule, in one place (`_OUTCOME`):

- *missed*: a value it measured is above its target (TTFT > ttft_ms, ITL > itl_ms, E2E >
  e2e_ms). A known miss is a miss even when another value is missing.
- *not measured*: nothing it measured missed, but a value with a target is missing (no TTFT,
  say): it is counted on its own and left out of goodput, never counted as good.
- *good*: every value with a target was measured and is within it.
- *no SLO*: neither its engine nor the fleet sets any target.

ITL targets apply to requests with more than one output token (a single token has no gap).
goodput = good / (good + missed); the SLO holds over a group when goodput ≥ percentile/100
(e.g. TTFT p95 ≤ 500 ms holds iff at least 95% of requests have TTFT ≤ 500 ms). `target` is
the group's percentile as a share, weighted by request where engines with different
percentiles are pooled. Every count is weighted by the sampling weight (`WEIGHT`); quantiles
here are weighted discrete quantiles over the judged requests (good or missed).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd

from app.analytics.bins import case_sql, edges_for
from app.analytics.filters import WEIGHT, Filter
from app.analytics.weighted import is_sampled
from app.analytics.windows import BUCKETS, bucket_sql

DEFAULT_PERCENTILE = 95.0
LOW_QUANTILE = 0.1  # the fast end of a shape's TTFT: its prefill with little waiting


@dataclass(frozen=True)
class Target:
    """Latency targets (ms; None: no target on that value) at one percentile."""

    ttft_ms: float | None
    itl_ms: float | None
    e2e_ms: float | None = None
    percentile: float = DEFAULT_PERCENTILE


@dataclass(frozen=True)
class Targets:
    """Targets per engine name, and the default for every other request (None: no SLO)."""

    by_engine: Mapping[str, Target] = field(default_factory=dict)
    default: Target | None = None

    def any(self) -> bool:
        """Whether any request can be judged at all."""
        return bool(self.by_engine) or self.default is not None


COUNT_COLUMNS = [
    "requests",
    "good",
    "missed",
    "not_measured",
    "no_slo",
    "miss_ttft",
    "miss_itl",
    "miss_e2e",
    "goodput",
    "target",
    "rows",
]

_OUTCOME = """CASE
    WHEN t_ttft IS NULL AND t_itl IS NULL AND t_e2e IS NULL THEN 'none'
    WHEN miss_ttft OR miss_itl OR miss_e2e THEN 'missed'
    WHEN (t_ttft IS NOT NULL AND ttft_ms IS NULL)
      OR (t_itl IS NOT NULL AND osl > 1 AND itl_ms IS NULL)
      OR (t_e2e IS NOT NULL AND e2e_ms IS NULL) THEN 'unmeasured'
    ELSE 'good' END"""

_COUNTS = """
    coalesce(sum(w) FILTER (WHERE outcome <> 'none'), 0) AS requests,
    coalesce(sum(w) FILTER (WHERE outcome = 'good'), 0) AS good,
    coalesce(sum(w) FILTER (WHERE outcome = 'missed'), 0) AS missed,
    coalesce(sum(w) FILTER (WHERE outcome = 'unmeasured'), 0) AS not_measured,
    coalesce(sum(w) FILTER (WHERE outcome = 'none'), 0) AS no_slo,
    coalesce(sum(w) FILTER (WHERE miss_ttft), 0) AS miss_ttft,
    coalesce(sum(w) FILTER (WHERE miss_itl), 0) AS miss_itl,
    coalesce(sum(w) FILTER (WHERE miss_e2e), 0) AS miss_e2e,
    sum(w * t_pct) FILTER (WHERE judged) / sum(w) FILTER (WHERE judged) / 100 AS target,
    count(*) AS rows"""


def _judged(flt: Filter, targets: Targets) -> tuple[str, list]:
    """The CTEs `slo` (the targets as a VALUES relation) and `judged` (each kept request with
    its weight, its targets, what it missed and its outcome), and their parameters."""
    d = targets.default
    rows = ["(NULL::VARCHAR, FALSE, ?::DOUBLE, ?::DOUBLE, ?::DOUBLE, ?::DOUBLE)"]
    params: list = (
        [d.ttft_ms, d.itl_ms, d.e2e_ms, d.percentile]
        if d is not None
        else [None, None, None, DEFAULT_PERCENTILE]
    )
    for name, t in sorted(targets.by_engine.items()):
        rows.append("(?, TRUE, ?, ?, ?, ?)")
        params += [name, t.ttft_ms, t.itl_ms, t.e2e_ms, t.percentile]
    where, where_params = flt.where()
    sql = f"""
    slo(s_engine, s_own, s_ttft, s_itl, s_e2e, s_pct) AS (VALUES {", ".join(rows)}),
    picked AS (
        SELECT r.*,
               CASE WHEN o.s_own THEN o.s_ttft ELSE d.s_ttft END AS t_ttft,
               CASE WHEN o.s_own THEN o.s_itl ELSE d.s_itl END AS t_itl,
               CASE WHEN o.s_own THEN o.s_e2e ELSE d.s_e2e END AS t_e2e,
               CASE WHEN o.s_own THEN o.s_pct ELSE d.s_pct END AS t_pct
        FROM (SELECT started_at, engine, tenant, isl, osl, ttft_ms, itl_ms, e2e_ms,
                     {WEIGHT} AS w
              FROM requests WHERE {where}) r
        JOIN slo d ON NOT d.s_own
        LEFT JOIN slo o ON o.s_own AND o.s_engine = r.engine),
    flagged AS (
        SELECT *, coalesce(ttft_ms > t_ttft, FALSE) AS miss_ttft,
               osl > 1 AND coalesce(itl_ms > t_itl, FALSE) AS miss_itl,
               coalesce(e2e_ms > t_e2e, FALSE) AS miss_e2e
        FROM picked),
    judged AS (
        SELECT *, outcome IN ('good', 'missed') AS judged
        FROM (SELECT *, {_OUTCOME} AS outcome FROM flagged))"""
    return sql, params + where_params


def _finish(frame: pd.DataFrame) -> pd.DataFrame:
    for column in ("requests", "good", "missed", "not_measured", "no_slo"):
        frame[column] = frame[column].astype(float)
    for column in ("miss_ttft", "miss_itl", "miss_e2e"):
        frame[column] = frame[column].astype(float)
    frame["rows"] = frame["rows"].astype("int64")
    judged = frame["good"] + frame["missed"]
    frame["goodput"] = np.where(judged > 0, frame["good"] / judged.where(judged > 0, 1), np.nan)
    frame["target"] = frame["target"].astype(float)
    return frame


def over_time(
    cur: duckdb.DuckDBPyConnection, flt: Filter, targets: Targets, bucket: str, tz: str
) -> pd.DataFrame:
    """Goodput per time bucket (5m, 1h or 1d as in `windows.BUCKETS`, local to `tz`):
    columns `t` and `COUNT_COLUMNS`, only buckets with requests, in time order."""
    judged, params = _judged(flt, targets)
    local, local_params = bucket_sql("started_at", BUCKETS[bucket], tz)
    frame = cur.execute(
        f"WITH {judged} SELECT {local} AS t, {_COUNTS} FROM judged GROUP BY 1 ORDER BY 1",
        [*params, *local_params],
    ).df()
    return _finish(frame)


def by_dimension(
    cur: duckdb.DuckDBPyConnection, flt: Filter, targets: Targets, column: str
) -> pd.DataFrame:
    """Goodput per tenant or engine (`column`; null: the requests naming none), the most
    requests first: columns `column` and `COUNT_COLUMNS`."""
    if column not in ("tenant", "engine"):  # a fixed name, never the user's text
        raise ValueError(f"goodput by {column!r}: choose tenant or engine")
    judged, params = _judged(flt, targets)
    frame = cur.execute(
        f"WITH {judged} SELECT {column}, {_COUNTS} FROM judged GROUP BY 1 "
        "ORDER BY requests + no_slo DESC, 1 NULLS LAST",
        params,
    ).df()
    frame[column] = frame[column].astype(object).where(frame[column].notna(), None)
    return _finish(frame)


# Quantiles of the judged requests of each group, weighted and discrete: the first value whose
# cumulative weight reaches the share q of the group's (q × total, less a relative 1e-9 so a
# share that lands exactly on a row's cumulative weight is not pushed past it by rounding):
# at the group's SLO percentile (`*_pq`), the median and the low end; the median ISL and OSL.
_MEASURES = ("ttft_ms", "itl_ms", "e2e_ms", "isl", "osl")
_TOLERANCE = "(1 - 1e-9)"


def _wanted(m: str) -> list[tuple[str, str]]:
    """(column name, share as SQL) of the quantiles taken of measure m."""
    name = m.removesuffix("_ms")
    out = [(f"{name}_p50", "0.5")]
    if m in ("ttft_ms", "itl_ms", "e2e_ms"):
        out.append((f"{name}_pq", "any_value(t_pct) / 100"))
    if m == "ttft_ms":
        out.append((f"{name}_low", str(LOW_QUANTILE)))
    return out


def _quantile_columns(keys: str, sampled: bool) -> tuple[str, str]:
    """The window columns a sampled window needs (else a placeholder) and the aggregates.

    Unsampled, each group's values are listed and sorted once (a hash aggregate, fast); the
    value at 1-based position ceil(q × n) is the same first value whose count reaches q × n.
    Sampled, running sums of the weights over each group's sorted values (window functions,
    several times slower). Groups are per engine, so t_pct is one value in each."""
    if not sampled:
        picks = []
        for m in _MEASURES:
            ok = f"judged AND {m} IS NOT NULL"
            n = f"count(*) FILTER (WHERE {ok})"
            values = f"list_sort(list({m}) FILTER (WHERE {ok}))"
            for name, q in _wanted(m):
                at = f"greatest(ceil({q} * {n} * {_TOLERANCE}), 1)::BIGINT"
                picks.append(f"CASE WHEN {n} > 0 THEN {values}[{at}] END AS {name}")
        return "NULL AS none", ", ".join(picks)
    windowed, picks = [], []
    for m in _MEASURES:
        keep = f"CASE WHEN judged AND {m} IS NOT NULL THEN w END"
        windowed.append(
            f"sum({keep}) OVER (PARTITION BY {keys} ORDER BY {m} ROWS UNBOUNDED PRECEDING) "
            f"AS cum_{m}, sum({keep}) OVER (PARTITION BY {keys}) AS tot_{m}"
        )
        ok = f"judged AND {m} IS NOT NULL"
        for name, q in _wanted(m):
            share = "t_pct / 100" if name.endswith("_pq") else q
            picks.append(
                f"min({m}) FILTER (WHERE {ok} AND cum_{m} >= tot_{m} * {share} * {_TOLERANCE}) "
                f"AS {name}"
            )
    return ", ".join(windowed), ", ".join(picks)


QUANTILE_COLUMNS = [
    "ttft_p50",
    "ttft_pq",
    "ttft_low",
    "itl_p50",
    "itl_pq",
    "e2e_p50",
    "e2e_pq",
    "isl_p50",
    "osl_p50",
]


def by_cell(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    targets: Targets,
    *,
    bins: str = "log2",
    per_engine: bool = True,
    quantiles: bool = True,
) -> tuple[tuple[int, ...], pd.DataFrame]:
    """Goodput per ISL × OSL cell of the Shapes heat map's bins (log2 or log2half), split
    by engine (`per_engine`; engines have their own targets and causes) or pooled.

    Returns the bins' lower edges and a frame of `engine` (when per engine), `i`, `j` (the
    ISL and OSL bin indexes), `isl_from`, `osl_from`, `COUNT_COLUMNS` and `QUANTILE_COLUMNS`
    (`*_pq`: at the group's SLO percentile; `ttft_low`: its 10th percentile; left out
    without `quantiles`, which is much faster)."""
    if bins not in ("log2", "log2half"):
        raise ValueError("goodput cells use the heat map's log2 or log2half bins")
    edges = edges_for(bins)
    isl_case, isl_params = case_sql("isl", edges)
    osl_case, osl_params = case_sql("osl", edges)
    judged, params = _judged(flt, targets)
    keys = "engine, i, j" if per_engine else "i, j"
    windowed, picks = (
        _quantile_columns(keys, is_sampled(cur, flt)) if quantiles else ("NULL AS none", "")
    )
    frame = cur.execute(
        f"""WITH {judged},
            celled AS (SELECT *, {isl_case} AS i, {osl_case} AS j FROM judged),
            ranked AS (SELECT *, {windowed} FROM celled)
            SELECT {keys}, {_COUNTS}{", " + picks if picks else ""} FROM ranked GROUP BY ALL
            ORDER BY missed DESC, requests DESC, {keys}""",
        [*params, *isl_params, *osl_params],
    ).df()
    frame["i"] = frame["i"].astype("int64")
    frame["j"] = frame["j"].astype("int64")
    frame.insert(len(keys.split(", ")), "isl_from", [edges[k] for k in frame["i"]])
    frame.insert(len(keys.split(", ")) + 1, "osl_from", [edges[k] for k in frame["j"]])
    if per_engine:
        frame["engine"] = frame["engine"].astype(object).where(frame["engine"].notna(), None)
    for column in QUANTILE_COLUMNS if quantiles else ():
        frame[column] = frame[column].astype(float)
    return edges, _finish(frame)


def engine_stats(cur: duckdb.DuckDBPyConnection, flt: Filter, targets: Targets) -> pd.DataFrame:
    """Goodput per engine with `QUANTILE_COLUMNS` (null engine: requests naming none)."""
    judged, params = _judged(flt, targets)
    windowed, picks = _quantile_columns("engine", is_sampled(cur, flt))
    frame = cur.execute(
        f"""WITH {judged}, ranked AS (SELECT *, {windowed} FROM judged)
            SELECT engine, {_COUNTS}, {picks} FROM ranked GROUP BY ALL
            ORDER BY requests + no_slo DESC, engine NULLS LAST""",
        params,
    ).df()
    frame["engine"] = frame["engine"].astype(object).where(frame["engine"].notna(), None)
    for column in QUANTILE_COLUMNS:
        frame[column] = frame[column].astype(float)
    return _finish(frame)


def grid(
    frame: pd.DataFrame, edges: Sequence[int], column: str = "goodput"
) -> tuple[np.ndarray, np.ndarray]:
    """A pooled `by_cell(per_engine=False)` frame as two len(edges)² arrays: requests judged
    (good + missed) and `column` (NaN where a cell has none)."""
    n = len(edges)
    judged = np.zeros((n, n))
    values = np.full((n, n), np.nan)
    for r in frame.itertuples(index=False):
        judged[r.i, r.j] = r.good + r.missed
        values[r.i, r.j] = getattr(r, column)
    return judged, values
