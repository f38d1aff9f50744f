"""The rollup queries: each reads clean hours from the rollup tables and the rest raw, binned
the same way, so every request of a window is counted exactly once (app/storage/rollups.py
builds the tables).

Counts are weighted: the rollups' `w` and the raw rows' WEIGHT (1/sample_rate) are summed in
floats, quantiles are ranked by weight, and counts are rounded to whole requests at the end;
with no sampled row every weight is 1 and the answers are the plain counts."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import pandas as pd

from app.analytics.filters import WEIGHT, Filter
from app.analytics.rollups import memo
from app.analytics.rollups.plan import Part, Split
from app.analytics.rollups.sketch import (
    GroupStats,
    MeasureStats,
    estimate,
    group_estimates,
    per_bin,
)
from app.analytics.windows import width
from app.storage import tiers
from app.storage.rollups import (
    HALF_OCTAVE_EDGES,
    MEASURES,
    UTC_HOUR,
    bucket_sql,
    gaps_sql,
    half_octave_sql,
    ttft_sql,
)
from app.storage.schema import DERIVED

# One row per (request, measure): the raw side of `rollup_values`.
MEASURE_ROWS = (
    f"unnest(range({len(MEASURES)})) AS measure, "
    f"unnest([{', '.join(f'{m}::DOUBLE' for m in MEASURES)}]) AS v"
)


def _derived_for(flt: Filter, needs: tuple[str, ...]) -> list[str]:
    """The derived daily tiers that can answer a query filtering `flt`'s dimensions and
    grouping by `needs`, smallest first."""
    used = set(flt.dimensions()) | set(needs)
    return [tier for tier, (_, dims) in DERIVED.items() if used <= set(dims)]


def rolled(flt: Filter, sp: Split, kind: str, needs: tuple[str, ...] = ()) -> tuple[str, list]:
    """A subquery of the rollup rows of `kind` that answer the split's parts, each from its
    tier's table (a daily part from the smallest derived tier that keeps the dimensions the
    filter and `needs` use), with the columns every tier has (all but tenant; values also
    `bad`, the weight not ok), filtered by the dimensions; and its parameters."""
    dims, dim_params = flt.dims_where()
    names = tiers.columns("daily", kind)
    derived = _derived_for(flt, needs)
    selects, params = [], []
    # Parts of one table read alike; many of them (the clean runs between scattered stale
    # hours) are one SELECT over the list of their ranges, not a UNION ALL branch each.
    groups: dict[tuple[str, bool], list[Part]] = {}
    for part in sp.parts:
        tier = derived[0] if part.tier == "daily" and part.derived and derived else part.tier
        groups.setdefault((tier, bool(part.keys)), []).append(part)
    for (tier, keyed), group in groups.items():
        have = set(tiers.columns(tier, kind))
        picks = [n if n in have else f"NULL::VARCHAR AS {n}" for n in names]
        if kind == "values":
            picks.append(
                "bad" if "bad" in have else "CASE WHEN status <> 'ok' THEN w ELSE 0 END AS bad"
            )
        head = f"SELECT {', '.join(picks)} FROM {tiers.table(tier, kind)}"
        if len(group) > MERGE_RAW_OVER:
            lo, hi = min(p.lo for p in group), max(p.hi for p in group)
            if keyed:  # the exact day keys of every part: one list says them all
                keys = [k for p in group for k in p.keys]
                selects.append(
                    f"{head} WHERE hour >= ? AND hour < ? AND hour IN {_HOURS} AND {dims}"
                )
                params += [lo, hi, keys, *dim_params]
            elif (holes := _holes(group)) is not None:
                # The hours between the parts (the stale ones, mostly) are few next to the
                # rows: one hash look-up per row (an anti join) beats a range join over
                # thousands of parts, and list_contains, a scan of the list per row (8,000
                # stale hours: 1.0 s against 0.02 s over 700 days of value rollups).
                selects.append(
                    f"{head} WHERE hour >= ? AND hour < ? AND hour NOT IN {_HOURS} AND {dims}"
                )
                params += [lo, hi, holes, *dim_params]
            else:
                selects.append(
                    f"{head} JOIN (SELECT unnest(?::TIMESTAMPTZ[]) AS s, "
                    "unnest(?::TIMESTAMPTZ[]) AS e) iv ON hour >= iv.s AND hour < iv.e "
                    f"WHERE hour >= ? AND hour < ? AND {dims}"
                )
                params += [[p.lo for p in group], [p.hi for p in group], lo, hi, *dim_params]
            continue
        for part in group:
            exact = " AND list_contains(?, hour)" if keyed else ""
            selects.append(f"{head} WHERE hour >= ? AND hour < ?{exact} AND {dims}")
            params += [part.lo, part.hi, *([list(part.keys)] if keyed else []), *dim_params]
    if not selects:
        extra = ", 0.0 AS bad" if kind == "values" else ""
        selects.append(
            f"SELECT {', '.join(names)}{extra} FROM {tiers.table('daily', kind)} WHERE false"
        )
    return f"({' UNION ALL '.join(selects)})", params


MAX_HOLES = 200_000  # hours between merged parts listed as a set, beyond: a range join
# A list parameter of hours as a relation, so DuckDB hashes it (a semi or anti join).
_HOURS = "(SELECT unnest(?::TIMESTAMPTZ[]))"


def _holes(group: list[Part]) -> list[datetime] | None:
    """The whole hours between consecutive parts (sorted), or None when a part does not
    start and end on the hour or there are more than MAX_HOLES of them."""
    parts = sorted(group, key=lambda p: p.lo)
    out: list[datetime] = []
    for p in parts:
        if p.lo.minute or p.lo.second or p.lo.microsecond or p.hi.minute or p.hi.second:
            return None
    for a, b in zip(parts, parts[1:], strict=False):
        t = a.hi
        while t < b.lo:
            out.append(t)
            if len(out) > MAX_HOLES:
                return None
            t += timedelta(hours=1)
    return out


# Up to this many raw intervals are a SELECT each (each skips row groups by its own times);
# more are one range join against the list of intervals.
MERGE_RAW_OVER = 8
_OPEN_LO = datetime(1, 1, 2, tzinfo=UTC)  # an open end of an interval, as a bound DuckDB takes
_OPEN_HI = datetime(9999, 12, 30, tzinfo=UTC)


MAX_RAW_HOURS = 200_000  # hours of raw intervals listed for the hash join, beyond: a range join


def _interval_hours(
    raw: list[tuple[datetime | None, datetime | None]],
) -> tuple[list[datetime], list[datetime], list[datetime]] | None:
    """Each UTC hour the intervals touch with its interval's bounds, as three lists (hour,
    start, end); None when an interval is open-ended or they cover more than MAX_RAW_HOURS."""
    hours: list[datetime] = []
    starts: list[datetime] = []
    ends: list[datetime] = []
    for start, end in raw:
        if start is None or end is None:
            return None
        h = start.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
        while h < end:
            hours.append(h)
            starts.append(start)
            ends.append(end)
            if len(hours) > MAX_RAW_HOURS:
                return None
            h += timedelta(hours=1)
    return (hours, starts, ends) if hours else None


def raw_selects(
    flt: Filter, sp: Split, template: str, lead: list | None = None, tail: list | None = None
) -> tuple[list[str], list]:
    """`template` once per raw interval, its `{src}` the interval's rows (so each SELECT can
    skip row groups by time); `lead` and `tail` are the template's own parameters before and
    after `{src}`."""
    dims, dim_params = flt.dims_where()
    if len(sp.raw) > MERGE_RAW_OVER and (listed := _interval_hours(sp.raw)) is not None:
        # Many scattered stale hours: one SELECT joining the rows to the UTC hours the
        # intervals cover, on the hour (a hash join), then to the intervals' own bounds: a
        # range join on the bounds alone is a nested loop in DuckDB (8,000 stale hours:
        # 1.2 s against 0.02 s), and a UNION ALL branch each took 13 s to plan at 4,000.
        src = (
            "(SELECT r.* FROM requests r JOIN (SELECT unnest(?::TIMESTAMPTZ[]) AS h, "
            "unnest(?::TIMESTAMPTZ[]) AS s, unnest(?::TIMESTAMPTZ[]) AS e) iv "
            f"ON {UTC_HOUR.replace('started_at', 'r.started_at')} = iv.h "
            "AND r.started_at >= iv.s AND r.started_at < iv.e "
            f"WHERE r.started_at >= ? AND r.started_at < ? AND {dims})"
        )
        bounds = [*listed, min(listed[1]), max(listed[2])]
        return [template.replace("{src}", src)], [
            *(lead or []),
            *bounds,
            *dim_params,
            *(tail or []),
        ]
    if len(sp.raw) > MERGE_RAW_OVER:
        # Open-ended intervals, or too many hours to list: a range join on the bounds.
        starts = [s or _OPEN_LO for s, _ in sp.raw]
        ends = [e or _OPEN_HI for _, e in sp.raw]
        src = (
            "(SELECT r.* FROM requests r JOIN (SELECT unnest(?::TIMESTAMPTZ[]) AS s, "
            "unnest(?::TIMESTAMPTZ[]) AS e) iv ON r.started_at >= iv.s AND r.started_at < iv.e "
            f"WHERE r.started_at >= ? AND r.started_at < ? AND {dims})"
        )
        bounds = [starts, ends, min(starts), max(ends)]
        return [template.replace("{src}", src)], [
            *(lead or []),
            *bounds,
            *dim_params,
            *(tail or []),
        ]
    src = f"(SELECT * FROM requests WHERE started_at >= ? AND started_at < ? AND {dims})"
    parts, params = [], []
    for start, end in sp.raw:
        parts.append(template.replace("{src}", src))
        params += [*(lead or []), start, end, *dim_params, *(tail or [])]
    return parts, params


def values_over_time(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: Split,
    seconds: int,
    tz: str,
    measures: tuple[str, ...],
    quantiles: tuple[float, ...],
) -> tuple[pd.DataFrame, dict[str, np.ndarray]] | None:
    """Per time bucket of `seconds` in `tz` (from `local_split`): the
    buckets and request counts as a frame, and each measure's quantile estimates (one row
    per bucket, one column per quantile; NaN where the bucket has no value of it). None when
    no clean hour of the rollups is in the window."""
    found = values_over_time_by(cur, flt, sp, seconds, tz, measures, quantiles)
    return None if found is None else found[None]


# Dimensions a series can be split by (names from this tuple only, never from the user).
SERIES_BY = ("model", "engine", "gateway", "status")


def values_over_time_by(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: Split,
    seconds: int,
    tz: str,
    measures: tuple[str, ...],
    quantiles: tuple[float, ...],
    by: str | None = None,
    values: tuple[str, ...] = (),
) -> dict[str | None, tuple[pd.DataFrame, dict[str, np.ndarray]]] | None:
    """`values_over_time` for each of `values` of the dimension `by` (one of SERIES_BY; None:
    the whole window, under the key None) from one scan of the rollups; a value without
    rows is left out. Keys travel as integers (a year of one engine's days is ~400k bucket
    rows: Python strings and timestamps would cost seconds)."""
    if by is not None and by not in SERIES_BY:
        raise ValueError(f"cannot split a series by {by!r}: one of {', '.join(SERIES_BY)}")
    if by is not None and not values:
        return {}
    args = (seconds, tz, measures, quantiles, by, values)
    days = [p for p in sp.parts if p.tier == "daily"]
    if seconds % 86400 or not days:
        return _series_by(cur, flt, sp, *args)
    # Whole days are kept across page loads (memo.kept) until a day of them is rebuilt: with
    # day buckets their buckets are their own, so the rest of the window is added bucket by
    # bucket (a year of 12 engines' days is ~2 M rows; the rest a day or two of hours).
    day_split = replace(sp, dirty=[], raw=[], parts=days)
    rest = replace(sp, parts=[p for p in sp.parts if p.tier != "daily"])
    key = _days_key(cur, days)
    if key is None:
        return _series_by(cur, flt, sp, *args)
    whole = memo.kept(
        ("series", *key, flt.models, flt.engines, flt.gateways, flt.statuses, args),
        lambda: _series_by(cur, flt, day_split, *args),
    )
    if not rest.parts and not rest.raw:
        return _copied(whole)
    others = _series_by(cur, flt, rest, *args, rolled_only=False)
    joined = _joined(whole, others)
    return joined if joined is not None else _series_by(cur, flt, sp, *args)


Series = dict[str | None, tuple[pd.DataFrame, dict[str, np.ndarray]]]


def _days_key(cur: duckdb.DuckDBPyConnection, days: list[Part]) -> tuple | None:
    """What a result over these daily parts depends on besides the query: the file, the parts,
    and when their days (and derived rows) were last built; None for an in-memory database."""
    row = cur.execute(
        "SELECT (SELECT path FROM duckdb_databases() WHERE database_name = current_database()), "
        "(SELECT count(*) || '/' || max(built_at) FROM rollup_hours WHERE day >= ? AND day < ?), "
        "(SELECT count(*) || '/' || max(built_at) FROM rollup_derived WHERE day >= ? AND day < ?)",
        [days[0].lo, days[-1].hi, days[0].lo, days[-1].hi],
    ).fetchone()
    if row is None or not row[0]:
        return None
    return (row[0], tuple(days), row[1], row[2])


def _copied(found: Series | None) -> Series | None:
    """A copy the caller may change (the kept one is shared)."""
    if found is None:
        return None
    return {k: (f.copy(), {m: a.copy() for m, a in st.items()}) for k, (f, st) in found.items()}


def _joined(whole: Series | None, others: Series | None) -> Series | None:
    """The two series bucket by bucket, in time order; None when a bucket is in both (then
    the caller reads the window in one piece)."""
    if whole is None:
        return _copied(others)
    if others is None:
        return _copied(whole)
    out: Series = {}
    for name in [*whole, *(k for k in others if k not in whole)]:
        if name not in others or name not in whole:
            out[name] = _copied({name: (whole.get(name) or others[name])})[name]  # type: ignore[index]
            continue
        (fa, sa), (fb, sb) = whole[name], others[name]
        if np.intersect1d(fa["bucket"].to_numpy(), fb["bucket"].to_numpy()).size:
            return None
        frame = pd.concat([fa, fb], ignore_index=True)
        order = np.argsort(frame["bucket"].to_numpy(), kind="stable")
        stats = {m: np.concatenate([sa[m], sb[m]])[order] for m in sa}
        out[name] = (frame.iloc[order].reset_index(drop=True), stats)
    return out


def _series_by(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: Split,
    seconds: int,
    tz: str,
    measures: tuple[str, ...],
    quantiles: tuple[float, ...],
    by: str | None,
    values: tuple[str, ...],
    *,
    rolled_only: bool = True,
) -> Series | None:
    """`values_over_time_by` in one piece (None: no rollup row, unless not `rolled_only`)."""
    names: list[str | None] = [None] if by is None else list(values)
    key, key_params = ("0", []) if by is None else (f"list_position(?, {by})", [list(values)])
    needs = (by,) if by else ()
    # Requests per (key, bucket) from the shapes rollups: a fraction of the value rows an ISL
    # measure would scan for the same count.
    counted = keyed_counts(cur, flt, sp, seconds, tz, (key, key_params), needs)
    if not len(counted["k"]) or (rolled_only and not counted["rolled"].any()):
        return None
    codes = [MEASURES.index(m) for m in measures]
    rows = keyed_values(cur, flt, sp, seconds, tz, (key, key_params), needs, codes)
    setting = cur.execute("SELECT current_setting('TimeZone')").fetchone()
    zone = str(setting[0]) if setting else "UTC"
    ck, cg, cn = counted["k"], counted["g"], counted["n"]
    c_cuts = [0, *(np.flatnonzero(np.diff(ck)) + 1).tolist(), len(ck)]
    # Each key's value rows: [start, end) in `rows` (sorted by key).
    v_lo = np.searchsorted(rows["k"], ck[c_cuts[:-1]], side="left")
    v_hi = np.searchsorted(rows["k"], ck[c_cuts[:-1]], side="right")
    out: dict[str | None, tuple[pd.DataFrame, dict[str, np.ndarray]]] = {}
    for j, (lo, hi) in enumerate(zip(c_cuts[:-1], c_cuts[1:], strict=False)):
        times = cg[lo:hi]  # every bucket with requests, in time order
        frame = pd.DataFrame({"bucket": pd.to_datetime(times, unit="us", utc=True)})
        if zone != "UTC":  # as DuckDB hands TIMESTAMPTZ to pandas on the other paths
            frame["bucket"] = frame["bucket"].dt.tz_convert(zone)
        frame["requests"] = np.rint(cn[lo:hi]).astype(np.int64)
        part = slice(int(v_lo[j]), int(v_hi[j]))
        at = rows["g"][part]
        g = np.searchsorted(times, at)
        # A value row in a bucket without requests cannot be placed (tiers out of step).
        held = (g < len(times)) & (times[np.minimum(g, len(times) - 1)] == at)
        g = g[held]
        measure, b = rows["measure"][part][held], rows["b"][part][held]
        n, vmax = rows["n"][part][held], rows["vmax"][part][held]
        stats: dict[str, np.ndarray] = {}
        for code in codes:
            sel = measure == code
            stats[MEASURES[code]] = group_estimates(
                g[sel], b[sel], n[sel], vmax[sel], len(times), quantiles
            )
        out[names[0] if by is None else names[int(ck[lo]) - 1]] = (frame, stats)
    return out


def summed(rows: dict[str, np.ndarray], keys: tuple[str, ...]) -> dict[str, np.ndarray]:
    """Rows sorted by `keys` with each run of equal keys summed (`n`) and maxed (`vmax`)."""
    size = len(rows["n"])
    if size == 0:
        return rows
    same = np.ones(size - 1, dtype=bool)
    for name in keys:
        column = rows[name]
        same &= column[1:] == column[:-1]
    first = np.flatnonzero(np.r_[True, ~same])
    out = {name: rows[name][first] for name in keys}
    out["n"] = np.add.reduceat(rows["n"], first)
    out["vmax"] = np.maximum.reduceat(rows["vmax"], first)
    return out


def sums_over_time(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split, seconds: int, tz: str
) -> pd.DataFrame | None:
    """Per time bucket of `seconds` in `tz` (from `local_split`): requests,
    input tokens and output tokens, exact (counts and sums of the ISL and OSL buckets)."""
    src, params = rolled(flt, sp, "values")
    raw, raw_params = raw_selects(
        flt,
        sp,
        f"SELECT time_bucket(?::INTERVAL, started_at, ?) AS g, sum({WEIGHT}) AS requests, "
        f"sum(isl * {WEIGHT}) AS input_tokens, sum(osl * {WEIGHT}) AS output_tokens, "
        "false AS rolled FROM {src} GROUP BY ALL",
        lead=[width(seconds), tz],
    )
    return _merged(
        cur,
        "SELECT g AS bucket, round(sum(requests))::BIGINT AS requests, "
        "round(sum(input_tokens))::HUGEINT AS input_tokens, "
        "round(sum(output_tokens))::HUGEINT AS output_tokens",
        "SELECT time_bucket(?::INTERVAL, hour, ?) AS g, "
        "sum(w) FILTER (WHERE measure = 0) AS requests, "
        "sum(vsum) FILTER (WHERE measure = 0) AS input_tokens, "
        "sum(vsum) FILTER (WHERE measure = 1) AS output_tokens, true AS rolled "
        f"FROM {src} WHERE measure IN (0, 1) GROUP BY ALL",
        raw,
        [width(seconds), tz, *params, *raw_params],
        "g",
        frame=True,
    )


def totals(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split
) -> tuple[float, float, float] | None:
    """(requests, input tokens, output tokens) over the window, weighted and exact (sums of
    the ISL and OSL buckets); None when no rollup row is in it."""
    src, params = rolled(flt, sp, "values")
    raw, raw_params = raw_selects(
        flt,
        sp,
        f"SELECT sum({WEIGHT}) AS requests, sum(isl * {WEIGHT}) AS input_tokens, "
        f"sum(osl * {WEIGHT}) AS output_tokens, false AS rolled FROM {{src}}",
    )
    row = cur.execute(
        "SELECT coalesce(sum(requests), 0), coalesce(sum(input_tokens), 0), "
        "coalesce(sum(output_tokens), 0), bool_or(rolled) FROM ("
        "SELECT sum(w) FILTER (WHERE measure = 0) AS requests, "
        "sum(vsum) FILTER (WHERE measure = 0) AS input_tokens, "
        "sum(vsum) FILTER (WHERE measure = 1) AS output_tokens, count(*) > 0 AS rolled "
        f"FROM {src} WHERE measure IN (0, 1)" + "".join(f" UNION ALL {q}" for q in raw) + ")",
        params + raw_params,
    ).fetchone()
    if row is None or not row[3]:
        return None
    return float(row[0]), float(row[1]), float(row[2])


def local_hour_counts(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split, tz: str
) -> np.ndarray | None:
    """7 x 24 request counts by local weekday (row 0 Monday) and hour of day in `tz`
    (from `local_split`), exact; None when no rollup hour is in the window."""
    src, params = rolled(flt, sp, "shapes")
    local = "isodow({t} AT TIME ZONE ?) - 1 AS d, hour({t} AT TIME ZONE ?) AS h"
    raw, raw_params = raw_selects(
        flt,
        sp,
        f"SELECT {local.format(t='started_at')}, sum({WEIGHT}) AS n, false AS rolled "
        "FROM {src} GROUP BY ALL",
        lead=[tz, tz],
    )
    rows = _merged(
        cur,
        "SELECT d, h, round(sum(n))::BIGINT AS n",
        f"SELECT {local.format(t='hour')}, w AS n, true AS rolled FROM {src}",
        raw,
        [tz, tz, *params, *raw_params],
        "d, h",
    )
    if rows is None:
        return None
    matrix = np.zeros((7, 24), dtype=np.int64)
    matrix[rows["d"].astype(int), rows["h"].astype(int)] = rows["n"]
    return matrix


def half_octave_counts(cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split) -> np.ndarray:
    """Request counts per (half-octave ISL bin, half-octave OSL bin) over the window."""
    src, params = rolled(flt, sp, "shapes")
    parts = [f"SELECT ib, ob, w AS n FROM {src}"]
    raw, raw_params = raw_selects(
        flt,
        sp,
        f"SELECT {half_octave_sql('isl')} AS ib, {half_octave_sql('osl')} AS ob, "
        f"sum({WEIGHT}) AS n FROM {{src}} GROUP BY ALL",
    )
    rows = cur.execute(
        f"SELECT ib, ob, round(sum(n))::BIGINT AS n FROM ({' UNION ALL '.join(parts + raw)}) "
        "GROUP BY ALL",
        params + raw_params,
    ).fetchnumpy()
    size = len(HALF_OCTAVE_EDGES)
    counts = np.zeros((size, size), dtype=np.int64)
    np.add.at(counts, (rows["ib"].astype(int), rows["ob"].astype(int)), rows["n"].astype(np.int64))
    return counts


def _merged(
    cur: duckdb.DuckDBPyConnection,
    select: str,
    rolled: str,
    raw: list[str],
    params: list,
    keys: str,
    *,
    frame: bool = False,
) -> Any:
    """`select` (aggregates grouped by `keys`) over the rollup rows `rolled` and the raw
    parts, all flagged `rolled` or not, as a DataFrame (`frame`) or numpy columns; None when
    no row came from the rollups (the caller's exact path is as fast then)."""
    result = cur.execute(
        f"{select}, bool_or(rolled) AS rolled FROM ({rolled}"
        + "".join(f" UNION ALL {q}" for q in raw)
        + f") GROUP BY {keys} ORDER BY {keys}",
        params,
    )
    if frame:
        df = result.df()
        return df.drop(columns="rolled") if df["rolled"].any() else None
    rows = result.fetchnumpy()
    return rows if rows["rolled"].any() else None


def gap_quantiles(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split, quantiles: tuple[float, ...]
) -> dict[int, tuple[int, list[float]]] | None:
    """Per output-token position bin: (gaps, [quantile estimates]) of the per-token gaps over
    the window; None when no clean hour of the rollups is in it (the exact path is as fast)."""
    src, params = rolled(flt, sp, "gaps")
    raw, raw_params = raw_selects(
        flt, sp, f"SELECT pb, b, w AS n, vmax, false AS rolled FROM ({gaps_sql('{src}', '1')})"
    )
    rows = _merged(
        cur,
        "SELECT pb, b, sum(n) AS n, max(vmax) AS vmax",
        f"SELECT pb, b, w AS n, vmax, true AS rolled FROM {src}",
        raw,
        params + raw_params,
        "pb, b",
    )
    return None if rows is None else per_bin(rows, "pb", quantiles)


def ttft_by_isl(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split, quantiles: tuple[float, ...]
) -> tuple[dict[int, tuple[int, list[float]]], float | None] | None:
    """Per octave ISL bin (LOG2_EDGES: half-octave bins 2k-1 and 2k): (requests with a TTFT,
    [TTFT quantile estimates]); and the least-squares slope of TTFT on ISL in ms per token
    (exact but for rounding). None when no clean hour of the rollups is in the window."""
    src, params = rolled(flt, sp, "ttft")
    columns = "ib, b, w AS n, vmax, sx, sy, sxy, sxx"
    raw, raw_params = raw_selects(
        flt, sp, f"SELECT {columns}, false AS rolled FROM ({ttft_sql('{src}', '1')})"
    )
    rows = _merged(
        cur,
        "SELECT (ib + 1) // 2 AS bin, b, sum(n) AS n, max(vmax) AS vmax, "
        "sum(sx) AS sx, sum(sy) AS sy, sum(sxy) AS sxy, sum(sxx) AS sxx",
        f"SELECT {columns}, true AS rolled FROM {src}",
        raw,
        params + raw_params,
        "bin, b",
    )
    if rows is None:
        return None
    n = float(rows["n"].sum())
    sx, sy, sxy, sxx = (float(rows[c].sum()) for c in ("sx", "sy", "sxy", "sxx"))
    spread = n * sxx - sx * sx
    slope = (n * sxy - sx * sy) / spread if n > 1 and spread > 0 else None
    return per_bin(rows, "bin", quantiles), slope


def _split_key(sp: Split) -> tuple:
    return (tuple(sp.parts), tuple(sp.raw))


def _value_rows(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split, by_model: bool
) -> dict[str, np.ndarray] | None:
    """Σw, max, Σv and Σw not ok per (model or all, measure, bucket) over the window."""
    src, params = rolled(flt, sp, "values", ("model",) if by_model else ())
    group = "model" if by_model else "NULL::VARCHAR"
    # Every request has an ISL (measure 0), so its rows count requests and those not ok.
    raw, raw_params = raw_selects(
        flt,
        sp,
        f"SELECT g, measure, {bucket_sql('v')} AS b, sum(wt) AS n, max(v) AS vmax, "
        "sum(v * wt) AS vsum, coalesce(sum(wt) FILTER (WHERE measure = 0 AND status <> 'ok'), 0) "
        f"AS not_ok, false AS rolled FROM (SELECT {group} AS g, status, {WEIGHT} AS wt, "
        f"{MEASURE_ROWS} FROM {{src}}) WHERE v IS NOT NULL GROUP BY g, measure, b",
    )
    return _merged(
        cur,
        "SELECT g, measure, b, sum(n) AS n, max(vmax) AS vmax, sum(vsum) AS vsum, "
        "sum(not_ok) AS not_ok",
        f"SELECT {group} AS g, measure, b, w AS n, vmax, vsum, "
        "CASE WHEN measure = 0 THEN bad ELSE 0 END AS not_ok, true AS rolled "
        f"FROM {src}",
        raw,
        params + raw_params,
        "g, measure, b",
    )


def _pooled(rows: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-model value rows summed over the models (rows by measure, then bucket)."""
    keys = np.stack([rows["measure"].astype(np.int64), rows["b"].astype(np.int64)], axis=1)
    unique, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    size = len(unique)
    vmax = np.full(size, -np.inf)
    np.maximum.at(vmax, inverse, rows["vmax"].astype(np.float64))
    out = {
        "g": np.full(size, None, dtype=object),
        "measure": unique[:, 0],
        "b": unique[:, 1],
        "vmax": vmax,
    }
    for column in ("n", "vsum", "not_ok"):
        out[column] = np.bincount(inverse, weights=rows[column].astype(np.float64), minlength=size)
    return out


def value_stats(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: Split,
    quantiles: tuple[float, ...],
    *,
    by_model: bool = False,
) -> dict[str | None, GroupStats] | None:
    """Stats of every measure over the window, per model or for all (key None); None when
    no clean hour of the rollups is in the window (then the caller's exact path is as fast)."""
    # One scan for both groupings: in a `memo.shared()` block (a page build) the window's
    # stats are the per-model rows summed, so the Overview's KPIs and its table share it.
    if by_model or memo.active():
        key = ("value_rows", flt, _split_key(sp))
        rows = memo.once(key, lambda: _value_rows(cur, flt, sp, True))
        if rows is not None and not by_model:
            rows = _pooled(rows)
    else:
        rows = _value_rows(cur, flt, sp, False)
    if rows is None:
        return None
    out: dict[str | None, GroupStats] = {}
    # Each group's rows as one slice of a stable sort by group: linear in rows and groups
    # (a mask per group was quadratic: 4,000 models took 4 s).
    codes, names = pd.factorize(pd.Series(rows["g"], dtype=object), use_na_sentinel=False)
    order = np.argsort(codes, kind="stable")
    bounds = np.searchsorted(codes[order], np.arange(len(names) + 1))
    for code, found in enumerate(names.tolist()):  # first-seen order, None included
        name = None if isinstance(found, float) else found  # factorize turns None into NaN
        at = order[bounds[code] : bounds[code + 1]]
        kinds = rows["measure"][at]
        measures: dict[str, MeasureStats | None] = {}
        for index, measure in enumerate(MEASURES):
            pick = at[kinds == index]
            if not len(pick):
                measures[measure] = None
                continue
            buckets, counts = rows["b"][pick], rows["n"][pick].astype(np.float64)
            top = float(rows["vmax"][pick].max())
            measures[measure] = MeasureStats(
                [estimate(buckets, counts, top, p) for p in quantiles],
                top,
                round(float(counts.sum())),
                float(rows["vsum"][pick].sum()),
            )
        out[name] = GroupStats(measures, round(float(rows["not_ok"][at].sum())))
    return out


def busiest(
    cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split, column: str, limit: int
) -> list[str] | None:
    """The named values of `column` (one of SERIES_BY) in the window, busiest first (requests,
    weighted), at most `limit`, from the shapes rollups and the raw intervals; None when no
    rollup row is in the window."""
    if column not in SERIES_BY:
        raise ValueError(f"cannot rank {column!r}: one of {', '.join(SERIES_BY)}")
    src, params = rolled(flt, sp, "shapes", (column,))
    raw, raw_params = raw_selects(
        flt,
        sp,
        f"SELECT {column} AS k, sum({WEIGHT}) AS n, false AS rolled FROM {{src}} GROUP BY ALL",
    )
    rows = cur.execute(
        "SELECT k, bool_or(rolled) OVER () AS rolled FROM (SELECT k, sum(n) AS n, "
        f"bool_or(rolled) AS rolled FROM (SELECT {column} AS k, w AS n, true AS rolled FROM "
        f"{src}" + "".join(f" UNION ALL {q}" for q in raw) + ") GROUP BY k) "
        "WHERE k IS NOT NULL ORDER BY n DESC, k LIMIT ?",
        [*params, *raw_params, limit],
    ).fetchall()
    if not rows or not rows[0][1]:
        return None
    return [r[0] for r in rows]


def request_count(cur: duckdb.DuckDBPyConnection, flt: Filter, sp: Split) -> float | None:
    """Requests in the window (weighted), from the shapes rollups (the smallest tables: a
    year's count is a few milliseconds) and the raw intervals; None when no rollup row is in
    the window."""
    src, params = rolled(flt, sp, "shapes")
    raw, raw_params = raw_selects(
        flt, sp, f"SELECT sum({WEIGHT}) AS n, false AS rolled FROM {{src}}"
    )
    row = cur.execute(
        "SELECT coalesce(sum(n), 0), bool_or(rolled) FROM ("
        f"SELECT sum(w) AS n, count(*) > 0 AS rolled FROM {src}"
        + "".join(f" UNION ALL {q}" for q in raw)
        + ")",
        params + raw_params,
    ).fetchone()
    if row is None or not row[1]:
        return None
    return float(row[0])


def keyed_counts(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: Split,
    seconds: int,
    tz: str,
    key: tuple[str, list],
    needs: tuple[str, ...],
    keep_null: bool = False,
) -> dict[str, np.ndarray]:
    """Requests per (key, time bucket of `seconds` in `tz`) from the shapes rollups and the
    split's raw intervals, with whether any came from the rollups (`rolled`); `key` is the
    SQL of the key and its parameters; rows whose key is NULL are kept with `keep_null`."""
    sql, key_params = key
    lead = [width(seconds), tz, *key_params]
    src, params = rolled(flt, sp, "shapes", needs)
    raw, raw_params = raw_selects(
        flt,
        sp,
        "SELECT k, epoch_us(time_bucket(?::INTERVAL, started_at, ?)) AS g, sum(wt) AS n, "
        f"false AS rolled FROM (SELECT {sql} AS k, started_at, {WEIGHT} AS wt FROM {{src}}) "
        "GROUP BY ALL",
        lead=lead,
    )
    where = "" if keep_null else " WHERE k IS NOT NULL"
    return cur.execute(
        "SELECT k::INTEGER AS k, g, sum(n)::DOUBLE AS n, bool_or(rolled) AS rolled FROM ("
        f"SELECT {sql} AS k, epoch_us(time_bucket(?::INTERVAL, hour, ?)) AS g, w AS n, "
        f"true AS rolled FROM {src}"
        + "".join(f" UNION ALL {q}" for q in raw)
        + f"){where} GROUP BY k, g ORDER BY k, g",
        [*key_params, width(seconds), tz, *params, *raw_params],
    ).fetchnumpy()


def keyed_values(
    cur: duckdb.DuckDBPyConnection,
    flt: Filter,
    sp: Split,
    seconds: int,
    tz: str,
    key: tuple[str, list],
    needs: tuple[str, ...],
    codes: list[int],
    keep_null: bool = False,
) -> dict[str, np.ndarray]:
    """Value-bucket counts per (key, time bucket, measure, value bucket) of the measures
    `codes` (indexes into MEASURES), summed, from the rollups and the raw intervals."""
    sql, key_params = key
    lead = [width(seconds), tz, *key_params]
    src, params = rolled(flt, sp, "values", needs)
    raw, raw_params = raw_selects(
        flt,
        sp,
        f"SELECT k, epoch_us(time_bucket(?::INTERVAL, started_at, ?)) AS g, measure, "
        f"{bucket_sql('v')} AS b, sum(wt) AS n, max(v) AS vmax FROM "
        f"(SELECT {sql} AS k, started_at, {WEIGHT} AS wt, {MEASURE_ROWS} FROM {{src}}) "
        "WHERE v IS NOT NULL AND list_contains(?, measure) GROUP BY ALL",
        lead=lead,
        tail=[codes],
    )
    where = "" if keep_null else " WHERE k IS NOT NULL"
    # Sorted, not grouped, in DuckDB: rows of one (key, bucket, measure, b) are summed here
    # (most are one row already: a year of engine-days from the derived tier is ~2 M rows,
    # and DuckDB's hash grouping of them costs twice the sort).
    found = cur.execute(
        "SELECT k::INTEGER AS k, g, measure::SMALLINT AS measure, b::SMALLINT AS b, "
        "n::DOUBLE AS n, vmax::DOUBLE AS vmax FROM ("
        f"SELECT {sql} AS k, epoch_us(time_bucket(?::INTERVAL, hour, ?)) AS g, measure, b, "
        f"w AS n, vmax FROM {src} WHERE list_contains(?, measure)"
        + "".join(f" UNION ALL {q}" for q in raw)
        + f"){where} ORDER BY k, g, measure, b",
        [*key_params, width(seconds), tz, *params, codes, *raw_params],
    ).fetchnumpy()
    return summed(found, ("k", "g", "measure", "b"))
