"""Observed load: requests in flight per engine over time, and latency by requests in flight.

A request is in flight on its engine over [started_at, started_at + e2e_ms) (a zero E2E
counts as one microsecond; requests without an E2E time count nowhere here). The load of an
engine is every such request of that engine, whatever else the filter says: the engine serves
all of them at once. The filter picks the engines (those of the requests it keeps) and, for
latency by requests in flight, the requests whose latency is read. Everything is exact, from
raw rows, by a sweep: +1 at each start, -1 at each end, a running sum per engine in DuckDB's
window functions; a request that started before the window but runs into it counts from the
window's start. Requests with no engine form one group, `engine` null.

Sampled rows: a request kept with probability p stands for 1/p requests in flight, so a
sweep over a window holding sampled rows steps by WEIGHT (+1/p at a start, -1/p at its end):
levels, busy time, counts and means are weighted, and the latency quantiles per level are
weighted quantiles (app/analytics/weighted.py) from a second pass over the same sweep. The
load classes of `ttft_by_isl_and_load` stay each engine's thirds of its stored arrivals.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import duckdb
import numpy as np
import pandas as pd

from app.analytics import weighted
from app.analytics.bins import LOG2_EDGES, case_sql
from app.analytics.filters import WEIGHT, Filter
from app.analytics.windows import BUCKETS, bucket_sql
from app.storage.rows import first_row

# Lower edges of the in-flight levels: 1, 2, 3-4, 5-8, 9-16 … (the last level is open).
INFLIGHT_EDGES: tuple[int, ...] = (1, 2, 3, 5, 9, 17, 33, 65, 129, 257, 513, 1025, 2049, 4097)
QUANTILES = (0.5, 0.9, 0.99)
QUANTILE_NAMES = ("p50", "p90", "p99")
LOAD_NAMES = ("low", "medium", "high")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
LEVEL_COLUMNS = [
    "engine",
    "inflight_lo",
    "inflight_hi",
    "inflight_mean",
    "requests",
    "ttft_p50",
    "ttft_p90",
    "ttft_p99",
    "itl_p50",
    "itl_p90",
    "itl_p99",
    "isl_mean",
    "osl_mean",
    "isl_p50",
    "osl_p50",
]

# A request's start and end in microseconds since the epoch (its E2E rounded to whole
# microseconds, at least one).
_T0 = "epoch_us(started_at)"
_T1 = "(epoch_us(started_at) + greatest(round(e2e_ms * 1000), 1)::BIGINT)"
_FOREVER_US = 2**62  # stands for an open end of the window (times here stay far below)
# The sweep's sort key: 4 x the time, plus 0 for an end, 2 for a start, so at one instant
# ends come first ([start, end) intervals).
END_, START_ = 0, 2


class _Sql:
    """CTEs and their bound parameters, kept in the order they appear in the text."""

    def __init__(self) -> None:
        self.ctes: list[str] = []
        self.params: list = []

    def cte(self, name: str, body: str, *params) -> None:
        self.ctes.append(f"{name} AS ({body})")
        self.params += params

    def df(self, cur: duckdb.DuckDBPyConnection, select: str, *params) -> pd.DataFrame:
        sql = "WITH " + ",\n".join(self.ctes) + "\n" + select
        return cur.execute(sql, self.params + list(params)).df()


def _us(t: datetime | None, default: int) -> int:
    """Microseconds since the epoch of an aware time (naive: UTC, as the API reads it)."""
    if t is None:
        return default
    aware = t if t.tzinfo else t.replace(tzinfo=UTC)
    return (aware - EPOCH) // timedelta(microseconds=1)


def _sweep(
    flt: Filter,
    start: datetime | None,
    end: datetime | None,
    *,
    buckets: tuple[int, str] | None = None,
    arrivals: bool = True,
    sampled: bool = False,
) -> _Sql:
    """The shared CTEs of every load view, over the requests in flight in [start, end) (open
    ends unbounded) on the engines of the filter's requests:

    - `eng(engine, eid)`: those engines, each with a small number (cheaper to sort on);
    - `counted(rid, eid, bi, level)`: per start (rid its row id) and end (rid null), the count
      in flight on the engine just after it: a running sum of +1 per start and -1 per end,
      ends sorting first at one instant ([start, end) intervals) and simultaneous starts
      sharing one sum (RANGE peers), so a start's level counts itself and every request it
      overlaps;
    - with `arrivals`: `arrivals(eid, level, ttft_ms, itl_ms, isl, osl)`, each request the
      filter keeps with the count at its arrival (its values joined back by row id after
      the sweep, faster than carrying them through the sort);
    - with `buckets` = (seconds, tz): `marks(bi, bucket, a, z)`, the window's local time
      buckets and the part [a, z) of each inside it (microseconds), `busy(eid, bi, us,
      running)`, the microseconds in flight in each bucket and the requests running at its
      start, and `peaks(eid, bi, level)`, the highest count just after a start in it; `bi`
      of `counted` is the bucket of a start inside the window.

    `sampled`: every count, time and level is weighted (the module's note); `arrivals` then
    carries each request's `sample_rate` too."""
    lo, hi = _us(start, -_FOREVER_US), _us(end, _FOREVER_US)
    where, where_params = flt.where()
    q = _Sql()
    q.cte("sel", f"SELECT DISTINCT engine FROM requests WHERE {where}", *where_params)
    q.cte("eng", "SELECT engine, (row_number() OVER ())::INTEGER AS eid FROM sel")
    bucket_col = ""
    bucket_params: list = []
    if buckets is not None:
        assert start is not None and end is not None, "a series needs a closed window"
        seconds, tz = buckets
        # Every local bucket of 5 min, 1 h or 1 d holds one of these instants (DST included).
        # Every 15 minutes: the shortest local bucket is half an hour (Lord Howe's hour
        # of a DST change).
        g_bucket, g_params = bucket_sql("g", seconds, tz)
        q.cte(
            "instants",
            f"SELECT DISTINCT {g_bucket} AS bucket FROM unnest("
            "generate_series(?::TIMESTAMPTZ, ?::TIMESTAMPTZ, to_seconds(?))) AS s(g) "
            "WHERE g < ?::TIMESTAMPTZ",
            *g_params,
            start,
            end,
            min(seconds, 900),
            end,
        )
        q.cte(
            "marks",
            "SELECT (row_number() OVER (ORDER BY bucket))::INTEGER AS bi, bucket, "
            "greatest(epoch_us(bucket), ?) AS a, "
            "coalesce(lead(epoch_us(bucket)) OVER (ORDER BY bucket), ?) AS z FROM instants",
            lo,
            hi,
        )
        b0, bucket_params = bucket_sql(
            "greatest(started_at, ?::TIMESTAMPTZ)", seconds, tz, (start,)
        )
        bucket_col = f", {b0} AS b0"
    weight = f", {WEIGHT} AS w" if sampled else ""
    q.cte(
        "load",
        f"SELECT eid, requests.rowid AS rid, {_T0} AS t0, {_T1} AS t1{bucket_col}{weight} "
        "FROM requests JOIN eng ON requests.engine IS NOT DISTINCT FROM eng.engine "
        f"WHERE e2e_ms IS NOT NULL AND {_T0} < ? AND {_T1} > ?",
        *bucket_params,
        hi,
        lo,
    )
    if buckets is not None:
        q.cte(
            "placed",
            "SELECT load.eid, load.rid, load.t0, load.t1, greatest(load.t0, ?) AS c0, "
            "least(load.t1, ?) AS c1, marks.bi AS bi0, marks.a AS a0, marks.z AS z0"
            + (", load.w " if sampled else " ")
            + "FROM load JOIN marks ON marks.bucket = load.b0",
            lo,
            hi,
        )
        source, bi, bi_params = "placed", "CASE WHEN t0 >= ? THEN bi0 END", [lo]
    else:
        source, bi, bi_params = "load", "NULL::INTEGER", []
    if sampled:  # each event steps the level by its request's weight
        q.cte(
            "events",
            f"SELECT eid, rid, {bi} AS bi, t0 * 4 + {START_} AS k, w AS d FROM {source} "
            f"UNION ALL SELECT eid, NULL, NULL, t1 * 4 + {END_}, -w FROM {source} WHERE t1 < ?",
            *bi_params,
            hi,
        )
        step = "d"
    else:
        q.cte(
            "events",
            f"SELECT eid, rid, {bi} AS bi, t0 * 4 + {START_} AS k FROM {source} "
            f"UNION ALL SELECT eid, NULL, NULL, t1 * 4 + {END_} FROM {source} WHERE t1 < ?",
            *bi_params,
            hi,
        )
        step = "CASE WHEN rid IS NULL THEN -1 ELSE 1 END"
    q.cte(
        "counted",
        f"SELECT rid, eid, bi, sum({step}) OVER (PARTITION BY eid ORDER BY k) AS level FROM events",
    )
    if arrivals:
        rate = ", sample_rate" if sampled else ""
        q.cte(
            "arrivals",
            f"SELECT counted.eid, counted.level, r.ttft_ms, r.itl_ms, r.isl, r.osl{rate} "
            f"FROM counted JOIN (SELECT rowid AS rid, ttft_ms, itl_ms, isl, osl{rate} "
            f"FROM requests WHERE {where}) r USING (rid)",
            *where_params,
        )
    if buckets is not None:
        # Each request's part inside every bucket it touches; one that began before a
        # bucket's start (or the window's) runs at that start.
        w, pw = (", w", ", p.w") if sampled else ("", "")
        q.cte(
            "pieces",
            f"SELECT eid, bi0 AS bi, c1 - c0 AS us, t0 < a0 AS running{w} FROM placed "
            "WHERE c1 <= z0 UNION ALL "
            f"SELECT p.eid, m.bi, least(p.c1, m.z) - greatest(p.c0, m.a), p.t0 < m.a{pw} "
            "FROM (SELECT * FROM placed WHERE c1 > z0) p "
            "JOIN marks m ON m.a < p.c1 AND m.z > p.c0",
        )
        if sampled:
            busy = "sum(us * w) AS us, coalesce(sum(w) FILTER (WHERE running), 0) AS running"
        else:
            busy = "sum(us) AS us, count(*) FILTER (WHERE running) AS running"
        q.cte("busy", f"SELECT eid, bi, {busy} FROM pieces GROUP BY ALL")
        q.cte(
            "peaks",
            "SELECT eid, bi, max(level) AS level FROM counted WHERE bi IS NOT NULL GROUP BY ALL",
        )
    return q


_SERIES_SELECT = """
    SELECT eng.engine, marks.bucket,
           coalesce(busy.us, 0) / (marks.z - marks.a) AS inflight_mean,
           greatest(coalesce(busy.running, 0), coalesce(peaks.level, 0)) AS inflight_max
    FROM eng CROSS JOIN marks
    LEFT JOIN busy ON busy.eid = eng.eid AND busy.bi = marks.bi
    LEFT JOIN peaks ON peaks.eid = eng.eid AND peaks.bi = marks.bi
    WHERE marks.z > marks.a"""


def _level_groups(
    edges: tuple[int, ...], isl_edges: Sequence[int] | None, per_engine: bool
) -> tuple[list[str], list]:
    level_case, params = case_sql("level", edges)
    group = ["eid" if per_engine else "NULL::INTEGER AS eid", f"{level_case} AS bin"]
    if isl_edges is not None:
        isl_case, isl_params = case_sql("isl", tuple(isl_edges))
        group.append(f"{isl_case} AS isl_bin")
        params += isl_params
    return group, params


def _levels_select(
    edges: tuple[int, ...],
    isl_edges: Sequence[int] | None,
    per_engine: bool,
    sampled: bool = False,
) -> tuple[str, list]:
    group, params = _level_groups(edges, isl_edges, per_engine)
    if sampled:  # the quantiles come from `_weighted_levels`; the level's eid is kept for it
        sql = f"""
        SELECT eng.engine, levels.* FROM (
            SELECT {", ".join(group)}, {weighted.count_sql(True)} AS requests,
                   {weighted.mean_sql("level", True)} AS inflight_mean,
                   max(level) AS level_max, NULL::DOUBLE[] AS ttft, NULL::DOUBLE[] AS itl,
                   {weighted.mean_sql("isl", True)} AS isl_mean,
                   {weighted.mean_sql("osl", True)} AS osl_mean,
                   NULL::DOUBLE AS isl_p50, NULL::DOUBLE AS osl_p50
            FROM arrivals GROUP BY ALL) levels LEFT JOIN eng USING (eid)"""
        return sql, params
    qs = list(QUANTILES)
    sql = f"""
        SELECT eng.engine, levels.* EXCLUDE (eid) FROM (
            SELECT {", ".join(group)}, count(*) AS requests, avg(level) AS inflight_mean,
                   max(level) AS level_max, quantile_cont(ttft_ms, {qs}) AS ttft,
                   quantile_cont(itl_ms, {qs}) AS itl, avg(isl) AS isl_mean,
                   avg(osl) AS osl_mean, median(isl) AS isl_p50, median(osl) AS osl_p50
            FROM arrivals GROUP BY ALL) levels LEFT JOIN eng USING (eid)"""
    return sql, params


def _weighted_levels(
    cur: duckdb.DuckDBPyConnection,
    q: _Sql,
    frame: pd.DataFrame,
    edges: tuple[int, ...],
    isl_edges: Sequence[int] | None,
    per_engine: bool,
) -> pd.DataFrame:
    """Fill the weighted quantiles of a sampled `_levels_select` frame (rows of its view)."""
    group, params = _level_groups(edges, isl_edges, per_engine)
    keys = ("eid", "bin") + (("isl_bin",) if isl_edges is not None else ())
    source = (
        "(WITH " + ", ".join(q.ctes) + f" SELECT {', '.join(group)}, ttft_ms, itl_ms, isl, osl, "
        "sample_rate FROM arrivals)"
    )
    found = weighted.quantiles(
        cur, source, q.params + params, keys, ("ttft_ms", "itl_ms", "isl", "osl"), QUANTILES
    )
    frame = frame.copy()

    def at(row: dict, measure: str) -> list[float | None] | None:
        key = tuple(None if pd.isna(row[k]) else int(row[k]) for k in keys)
        return found.get((*key, measure))

    rows = frame.to_dict("records")
    frame["ttft"] = [at(r, "ttft_ms") for r in rows]
    frame["itl"] = [at(r, "itl_ms") for r in rows]
    frame["isl_p50"] = [(at(r, "isl") or [np.nan])[0] for r in rows]
    frame["osl_p50"] = [(at(r, "osl") or [np.nan])[0] for r in rows]
    return frame.drop(columns="eid")


_CLASSED = """
        SELECT CASE WHEN a.level <= c.q1 THEN 0 WHEN a.level <= c.q2 THEN 1 ELSE 2 END
                   AS load, {isl_case} AS isl_bin, a.*, c.engines
        FROM arrivals a JOIN (
            SELECT eid, quantile_disc(level, 1 / 3) AS q1, quantile_disc(level, 2 / 3) AS q2,
                   count(*) OVER () AS engines
            FROM arrivals WHERE ttft_ms IS NOT NULL GROUP BY eid) c USING (eid)
        WHERE a.ttft_ms IS NOT NULL"""


def _split_select(isl_edges: Sequence[int], sampled: bool = False) -> tuple[str, list]:
    isl_case, params = case_sql("a.isl", tuple(isl_edges))
    if sampled:  # the quantiles come from `_weighted_split`
        sql = f"""
        SELECT load, isl_bin, {weighted.count_sql(True)} AS requests,
               NULL::DOUBLE AS ttft_p50, NULL::DOUBLE AS ttft_p90,
               min(level) AS inflight_lo, max(level) AS inflight_hi,
               {weighted.mean_sql("level", True)} AS inflight_mean,
               any_value(engines) AS engines
        FROM ({_CLASSED.format(isl_case=isl_case)}) GROUP BY ALL"""
        return sql, params
    sql = f"""
        SELECT CASE WHEN a.level <= c.q1 THEN 0 WHEN a.level <= c.q2 THEN 1 ELSE 2 END
                   AS load,
               {isl_case} AS isl_bin, count(*) AS requests,
               median(a.ttft_ms) AS ttft_p50, quantile_cont(a.ttft_ms, 0.9) AS ttft_p90,
               min(a.level) AS inflight_lo, max(a.level) AS inflight_hi,
               avg(a.level) AS inflight_mean, any_value(c.engines) AS engines
        FROM arrivals a JOIN (
            SELECT eid, quantile_disc(level, 1 / 3) AS q1, quantile_disc(level, 2 / 3) AS q2,
                   count(*) OVER () AS engines
            FROM arrivals WHERE ttft_ms IS NOT NULL GROUP BY eid) c USING (eid)
        WHERE a.ttft_ms IS NOT NULL
        GROUP BY ALL"""
    return sql, params


def _weighted_split(
    cur: duckdb.DuckDBPyConnection, q: _Sql, frame: pd.DataFrame, isl_edges: Sequence[int]
) -> pd.DataFrame:
    """Fill the weighted TTFT quantiles of a sampled `_split_select` frame."""
    isl_case, params = case_sql("a.isl", tuple(isl_edges))
    source = "(WITH " + ", ".join(q.ctes) + _CLASSED.format(isl_case=isl_case) + ")"
    found = weighted.quantiles(
        cur, source, q.params + params, ("load", "isl_bin"), ("ttft_ms",), (0.5, 0.9)
    )
    frame = frame.copy()
    rows = frame.to_dict("records")
    for k, name in enumerate(("ttft_p50", "ttft_p90")):
        frame[name] = [
            (found.get((int(r["load"]), int(r["isl_bin"]), "ttft_ms")) or [np.nan, np.nan])[k]
            for r in rows
        ]
    return frame


def _sampled(cur: duckdb.DuckDBPyConnection, start: datetime | None, end: datetime | None) -> bool:
    """Whether the sweep's window holds sampled rows (of any engine: the load is all of them)."""
    return weighted.is_sampled(cur, Filter(start=start, end=end))


def _check_edges(edges: Sequence[int]) -> tuple[int, ...]:
    out = tuple(int(e) for e in edges)
    if not out or out[0] != 1 or any(b <= a for a, b in zip(out, out[1:], strict=False)):
        raise ValueError("in-flight edges must start at 1 and increase")
    return out


def _series_frame(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[["engine", "bucket", "inflight_mean", "inflight_max"]]
    frame = frame.sort_values(["engine", "bucket"], na_position="last", kind="stable")
    frame = frame.reset_index(drop=True)
    frame["inflight_mean"] = frame["inflight_mean"].astype(float)
    # Weighted levels are float sums of 1/p: rounded, not truncated (exact counts unchanged).
    frame["inflight_max"] = np.rint(frame["inflight_max"].astype(float)).astype("int64")
    return frame


def _levels_frame(
    frame: pd.DataFrame, edges: tuple[int, ...], isl_edges: Sequence[int] | None
) -> pd.DataFrame:
    keys = ["engine", "bin"] + (["isl_bin"] if isl_edges is not None else [])
    frame = frame.sort_values(keys, na_position="last", kind="stable").reset_index(drop=True)
    bins = frame["bin"].astype(int).tolist()
    tops = np.rint(frame["level_max"].astype(float)).astype(int).tolist()
    out = pd.DataFrame({"engine": frame["engine"].astype(object)})
    out["inflight_lo"] = [edges[b] for b in bins]
    out["inflight_hi"] = [
        edges[b + 1] - 1 if b + 1 < len(edges) else top for b, top in zip(bins, tops, strict=True)
    ]
    if isl_edges is not None:
        out["isl_from"] = [int(isl_edges[int(b)]) for b in frame["isl_bin"]]
    out["inflight_mean"] = frame["inflight_mean"].astype(float)
    out["requests"] = frame["requests"].astype("int64")
    for column in ("ttft", "itl"):
        values = frame[column].tolist()
        for k, name in enumerate(QUANTILE_NAMES):
            out[f"{column}_{name}"] = [
                np.nan if v is None or v[k] is None else float(v[k]) for v in values
            ]
    out["isl_mean"] = frame["isl_mean"].astype(float)
    out["osl_mean"] = frame["osl_mean"].astype(float)
    out["isl_p50"] = frame["isl_p50"].astype(float)
    out["osl_p50"] = frame["osl_p50"].astype(float)
    for column in ("inflight_lo", "inflight_hi"):
        out[column] = out[column].astype("int64")
    return out


def _split_frame(frame: pd.DataFrame, isl_edges: Sequence[int]) -> pd.DataFrame:
    frame = frame.sort_values(["load", "isl_bin"], kind="stable").reset_index(drop=True)
    out = pd.DataFrame({"load": frame["load"].astype("int64")})
    out["load_name"] = [LOAD_NAMES[k] for k in out["load"]]
    out["isl_from"] = [int(isl_edges[int(b)]) for b in frame["isl_bin"]]
    out["requests"] = frame["requests"].astype("int64")
    out["ttft_p50"] = frame["ttft_p50"].astype(float)
    out["ttft_p90"] = frame["ttft_p90"].astype(float)
    # The class's range over all its bins (the legend's "1-3 in flight").
    grouped = frame.groupby("load")
    lo, hi = grouped["inflight_lo"].transform("min"), grouped["inflight_hi"].transform("max")
    out["inflight_lo"] = np.rint(lo.astype(float)).astype("int64").to_numpy()
    out["inflight_hi"] = np.rint(hi.astype(float)).astype("int64").to_numpy()
    out["inflight_mean"] = frame["inflight_mean"].astype(float)
    out.attrs["engines"] = int(frame["engines"].iloc[0]) if len(frame) else 0
    return out


def latency_by_inflight(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    *,
    edges: Sequence[int] = INFLIGHT_EDGES,
    isl_edges: Sequence[int] | None = None,
    per_engine: bool = True,
) -> pd.DataFrame:
    """TTFT and ITL percentiles of the filter's requests, grouped by the requests in flight on
    their engine when each arrived (itself included, so levels start at 1).

    One row per (engine, in-flight level) with columns `LEVEL_COLUMNS`: the level's
    `inflight_lo`..`inflight_hi` (inclusive; the last level's `inflight_hi` is the largest
    count seen in it), the mean count in it, `requests`, TTFT and ITL p50/p90/p99 in ms as
    stored (`quantile_cont`; NaN where no request of the level has the value), and mean
    ISL and OSL. Levels are [edges[i], edges[i+1]) (`edges` must start at 1 and increase;
    `range(1, n)` gives one level per count). Only levels with requests are returned, ordered
    by engine (nulls last), then level. Requests without an E2E time are not read.

    `isl_edges` (lower ISL bin edges starting at 0, e.g. `bins.LOG2_EDGES`) splits each level
    by input length too: an `isl_from` column is added after `inflight_hi`. `per_engine=False`
    pools the engines (each request still counted against its own engine's load); `engine`
    is then null."""
    edges = _check_edges(edges)
    sampled = _sampled(cur, flt.start, flt.end)
    q = _sweep(flt, flt.start, flt.end, sampled=sampled)
    select, params = _levels_select(edges, isl_edges, per_engine, sampled)
    frame = q.df(cur, select, *params)
    if sampled:
        frame = _weighted_levels(cur, q, frame, edges, isl_edges, per_engine)
    return _levels_frame(frame, edges, isl_edges)


def levels_and_shapes(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    *,
    edges: Sequence[int] = INFLIGHT_EDGES,
    shape_edges: Sequence[int] = LOG2_EDGES,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """`latency_by_inflight`, and the request shapes at each of its levels, in one statement
    and one sweep (what a calibration reads). The shapes: per (engine, level, ISL bin, OSL bin)
    the requests and their median ISL and OSL (columns engine, inflight_lo, isl, osl,
    requests), for a model evaluated cell by cell: a level's median shape is not its shapes
    (latency is far from linear in ISL and OSL together)."""
    edges = _check_edges(edges)
    sampled = _sampled(cur, flt.start, flt.end)
    q = _sweep(flt, flt.start, flt.end, sampled=sampled)
    levels_sql, levels_params = _levels_select(edges, None, True, sampled)
    shapes_sql, shapes_params = _shapes_select(edges, shape_edges, sampled)
    frame = q.df(
        cur,
        f"SELECT 'levels' AS view, * FROM ({levels_sql}) "
        f"UNION ALL BY NAME SELECT 'shapes' AS view, * FROM ({shapes_sql})",
        *levels_params,
        *shapes_params,
    )
    levels = frame[frame["view"] == "levels"]
    if sampled:
        levels = _weighted_levels(cur, q, levels, edges, None, True)
    return _levels_frame(levels, edges, None), _shapes_frame(
        frame[frame["view"] == "shapes"], edges
    )


def _shapes_select(
    edges: tuple[int, ...], shape_edges: Sequence[int], sampled: bool = False
) -> tuple[str, list]:
    level_case, params = case_sql("level", edges)
    isl_case, isl_params = case_sql("isl", tuple(shape_edges))
    osl_case, osl_params = case_sql("osl", tuple(shape_edges))
    sql = f"""
        SELECT eng.engine, cells.bin, cells.isl, cells.osl, cells.requests FROM (
            SELECT eid, {level_case} AS bin, {isl_case} AS ib, {osl_case} AS ob,
                   median(isl) AS isl, median(osl) AS osl,
                   {weighted.count_sql(sampled)} AS requests
            FROM arrivals WHERE itl_ms IS NOT NULL GROUP BY ALL) cells
        LEFT JOIN eng USING (eid)"""
    return sql, params + isl_params + osl_params


def _shapes_frame(frame: pd.DataFrame, edges: tuple[int, ...]) -> pd.DataFrame:
    frame = frame.sort_values(
        ["engine", "bin", "requests"], ascending=[True, True, False], na_position="last"
    ).reset_index(drop=True)
    out = pd.DataFrame({"engine": frame["engine"].astype(object)})
    out["inflight_lo"] = [edges[int(b)] for b in frame["bin"]]
    out["isl"] = frame["isl"].astype(float)
    out["osl"] = frame["osl"].astype(float)
    out["requests"] = frame["requests"].astype("int64")
    return out


def ttft_by_isl_and_load(
    cur: duckdb.DuckDBPyConnection, flt: Filter, isl_edges: Sequence[int]
) -> pd.DataFrame:
    """Median and p90 TTFT per ISL bin, split into low, medium and high load at arrival.

    The load classes are each engine's own thirds of its requests' in-flight counts at
    arrival (low: at most the engine's 1/3 quantile; high: above its 2/3 quantile), so a busy
    and a quiet engine pooled together each contribute their own busy hours. Columns: `load`
    (0, 1, 2), `load_name`, `isl_from`, `requests`, `ttft_p50`, `ttft_p90`, `inflight_lo`,
    `inflight_hi` (the counts met in the class over every engine) and `inflight_mean`;
    `frame.attrs["engines"]` is the number of engines pooled."""
    sampled = _sampled(cur, flt.start, flt.end)
    q = _sweep(flt, flt.start, flt.end, sampled=sampled)
    select, params = _split_select(isl_edges, sampled)
    frame = q.df(cur, select, *params)
    if sampled:
        frame = _weighted_split(cur, q, frame, isl_edges)
    return _split_frame(frame, isl_edges)


def bucket_for(start: datetime | None, end: datetime | None) -> str:
    """The in-flight series' bucket: 5 min up to a day, 1 h up to 31 days, 1 d beyond (finer
    than the trends', as load swings within the hour)."""
    if start is None or end is None or end - start <= timedelta(days=1):
        return "5m"
    return "1h" if end - start <= timedelta(days=31) else "1d"


def series_window(
    cur: duckdb.DuckDBPyConnection, flt: Filter
) -> tuple[datetime | None, datetime | None]:
    """The window an in-flight series covers: the filter's bounds, an open end falling back to
    the last end of its requests, an open start to the first start."""
    where, params = flt.where()
    row = first_row(
        cur,
        f"SELECT min(started_at), max(started_at + to_microseconds({_T1} - {_T0})) "
        f"FROM requests WHERE {where} AND e2e_ms IS NOT NULL",
        params,
    )
    first, last = row or (None, None)
    return flt.start or first, flt.end or last


def _empty_series() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": pd.Series(dtype=object),
            "bucket": pd.Series(dtype="datetime64[us, UTC]"),
            "inflight_mean": pd.Series(dtype=float),
            "inflight_max": pd.Series(dtype="int64"),
        }
    )


def inflight_series(
    cur: duckdb.DuckDBPyConnection, flt: Filter, bucket: str, tz: str = "UTC"
) -> pd.DataFrame:
    """Requests in flight per engine and time bucket: the time-weighted mean and the maximum.

    Columns `engine`, `bucket` (the bucket's start in `tz`, 5m, 1h or 1d as in
    `windows.BUCKETS`), `inflight_mean` (the time the engine's requests spent in flight inside
    the bucket's part of the window, divided by that part's length) and `inflight_max` (the
    largest count held for a positive time in it), for every bucket of the window and every
    engine of the filter's requests, zeros where nothing ran. The window is the filter's, an
    open start or end falling back to the first start or the last end of its requests
    (`series_window`). The filter's hours and weekdays pick engines only.

    Exact: the mean sums each request's overlap with the buckets it touches; the maximum is
    the larger of the count at the bucket's start (requests that began before it and still
    run) and the counts just after each start inside it (the count only rises at starts)."""
    start, end = series_window(cur, flt)
    if start is None or end is None or start >= end:
        return _empty_series()
    sampled = _sampled(cur, start, end)
    q = _sweep(flt, start, end, buckets=(BUCKETS[bucket], tz), arrivals=False, sampled=sampled)
    return _series_frame(q.df(cur, _SERIES_SELECT))


@dataclass(frozen=True)
class LoadViews:
    """The three load views of one window, from one sweep (see `load_views`)."""

    bucket: str
    series: pd.DataFrame  # as inflight_series
    levels: pd.DataFrame  # as latency_by_inflight
    split: pd.DataFrame  # as ttft_by_isl_and_load


def load_views(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    tz: str = "UTC",
    *,
    bucket: str | None = None,
    isl_edges: Sequence[int] = LOG2_EDGES,
    edges: Sequence[int] = INFLIGHT_EDGES,
) -> LoadViews:
    """`inflight_series`, `latency_by_inflight` and `ttft_by_isl_and_load` at once, in one
    statement and one sweep (the sort is most of the cost): what the Latency page draws.
    `bucket` defaults to `bucket_for` the series' window."""
    edges = _check_edges(edges)
    start, end = series_window(cur, flt)
    bucket = bucket or bucket_for(start, end)
    if start is None or end is None or start >= end:
        empty = _sweep(flt, flt.start, flt.end)
        levels_sql, levels_params = _levels_select(edges, None, True)
        split_sql, split_params = _split_select(isl_edges)
        return LoadViews(
            bucket,
            _empty_series(),
            _levels_frame(empty.df(cur, levels_sql + " LIMIT 0", *levels_params), edges, None),
            _split_frame(empty.df(cur, split_sql + " LIMIT 0", *split_params), isl_edges),
        )
    sampled = _sampled(cur, start, end)
    q = _sweep(flt, start, end, buckets=(BUCKETS[bucket], tz), sampled=sampled)
    levels_sql, levels_params = _levels_select(edges, None, True, sampled)
    split_sql, split_params = _split_select(isl_edges, sampled)
    # One result of three shapes: each row says which view it belongs to.
    frame = q.df(
        cur,
        f"SELECT 'series' AS view, * FROM ({_SERIES_SELECT}) "
        f"UNION ALL BY NAME SELECT 'levels' AS view, * FROM ({levels_sql}) "
        f"UNION ALL BY NAME SELECT 'split' AS view, * FROM ({split_sql})",
        *levels_params,
        *split_params,
    )
    # Names shared by two views keep their meaning in each (inflight_mean, requests …).
    levels, split = frame[frame["view"] == "levels"], frame[frame["view"] == "split"]
    if sampled:
        levels = _weighted_levels(cur, q, levels, edges, None, True)
        split = _weighted_split(cur, q, split, isl_edges)
    return LoadViews(
        bucket,
        _series_frame(frame[frame["view"] == "series"]),
        _levels_frame(levels, edges, None),
        _split_frame(split, isl_edges),
    )
