"""Hourly rollups of `requests`, rebuilt from the raw rows of every hour a write touched.

Four tables, one row per (UTC hour, model, engine, gateway, tenant, status, bin):
- `rollup_shapes`: request counts per half-octave ISL bin and OSL bin (exact; the log2 heat
  map merges pairs of them);
- `rollup_values`: counts of ISL, OSL, TTFT, ITL and E2E per log-spaced bucket of relative
  width GAMMA, with the largest value and the sum of each bucket (quantiles within
  RELATIVE_ERROR; maxima, counts and sums exact);
- `rollup_gaps`: the per-token gaps of `token_gaps_ms` counted per output-token position bin
  (POSITION_EDGES) and gap bucket, with each bucket's largest gap;
- `rollup_ttft`: TTFT per half-octave ISL bin and TTFT bucket, with each bucket's largest
  TTFT and the sums a least-squares fit of TTFT on ISL needs (Σx, Σy, Σxy, Σx²).

Sampled rows: each table keeps beside the row count `n` the weighted count `w` = Σ 1/p (the
requests the rows stand for, WEIGHT), and its sums are weighted the same way, so readers
merge hours and filters by summing and weighted quantiles come from `w` per bucket.

Every insert into or delete from `requests` marks the hours it touched in `rollup_dirty`, in
the same transaction. `rebuild` recomputes dirty hours from the raw rows and clears their
marks in one transaction, so readers treat a dirty hour as raw and a clean one as exact.
Only the mover's thread (or a command that holds the file) rebuilds, so rebuilds never race.
"""

from __future__ import annotations

import math
from datetime import datetime, timedelta

import duckdb

from app.storage import tiers
from app.storage.rows import first_row, rollback
from app.storage.schema import DERIVED, KINDS, TIERS, WEIGHT

# Buckets [GAMMA^b, GAMMA^(b+1)): any value is within RELATIVE_ERROR of its bucket's midpoint
# 2 * GAMMA^(b+1) / (GAMMA + 1) (the DDSketch bound). 2% buckets: ±0.99%.
GAMMA = 1.02
RELATIVE_ERROR = (GAMMA - 1) / (GAMMA + 1)
ZERO_BUCKET = -32768  # value 0 (token counts and latencies are never negative)
# Buckets fit the SMALLINT column: 1.02^±32000 is about 1e±275, so only absurd values (a
# latency of 1e-300 ms) share an end bucket; the maximum stays exact whatever they are.
BUCKET_LIMIT = 32000
MEASURES = ("isl", "osl", "ttft_ms", "itl_ms", "e2e_ms")
# Half-octave lower edges of the heat map's `log2half` bins: 0, 16, 24, 32, 48 … 131072.
# Defined here, where the rollups are built; app/analytics/bins.py serves them to readers.
HALF_OCTAVE_EDGES: tuple[int, ...] = (0,) + tuple(
    e for k in range(14) for e in (16 * 2**k, 24 * 2**k)
)[:-1]
# Lower edges of the output-token position bins of ITL by position (gap k follows token k).
POSITION_EDGES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
# One rebuild transaction takes the oldest settled dirty hours while their raw rows, plus
# HOUR_ROWS for each hour, stay within REBUILD_ROWS (an hour holding more is rebuilt alone),
# and at most REBUILD_MAX_HOURS of them: bounded by rows, so its time follows the rows it
# reads, not the hours it names. Measured here (bench/cardinality.py, bench/RESULTS.md): a
# call costs ~0.15-0.2 s of statements, ~12 us per raw row and ~0.25-0.5 ms per hour, so a
# full one takes ~0.4-0.55 s, about as long as the mover lets rows gather (MOVE_AFTER_S).
# (24 hours a call, as before: 0.2 s for 24 cheap hours, unbounded for dense ones.)
REBUILD_ROWS = 30_000
HOUR_ROWS = 30
REBUILD_MAX_HOURS = 1_000
# An hour is rebuilt once no write has touched it for this long: the current hour is read raw
# while traffic flows into it, instead of being recomputed again and again.
SETTLE_S = 60.0

DIMS = "model, engine, gateway, tenant, status"
# The UTC hour of a row. A bare date_trunc on a TIMESTAMPTZ cuts in the connection's time
# zone (the host's by default): at +05:30 its "hours" would start at :30 UTC.
UTC_HOUR = "(date_trunc('hour', started_at AT TIME ZONE 'UTC') AT TIME ZONE 'UTC')"


def bucket_sql(column: str) -> str:
    """SQL giving the value bucket of `column` (a constant GAMMA: no user input)."""
    return (
        f"(CASE WHEN {column} <= 0 THEN {ZERO_BUCKET} "
        f"ELSE least(greatest(floor(ln({column}) / {math.log(GAMMA)!r}), {-BUCKET_LIMIT}), "
        f"{BUCKET_LIMIT})::INTEGER END)"
    )


def _bin_sql(column: str, edges: tuple[int, ...]) -> str:
    if len(edges) < 2:  # one bin: CASE needs at least one WHEN
        return "(0)"
    whens = " ".join(f"WHEN {column} < {edge} THEN {i}" for i, edge in enumerate(edges[1:]))
    return f"(CASE {whens} ELSE {len(edges) - 1} END)"


def half_octave_sql(column: str) -> str:
    """SQL giving the half-octave bin index of a token count (constant edges)."""
    return _bin_sql(column, HALF_OCTAVE_EDGES)


def position_sql(column: str) -> str:
    """SQL giving the POSITION_EDGES bin index of an output-token position (from 1)."""
    return _bin_sql(column, POSITION_EDGES)


def ttft_sql(source: str, group: str) -> str:
    """SELECT of (`group`…, ib, b, n, vmax, sx, sy, sxy, sxx, w) over `source`'s rows that
    have a TTFT (sums weighted by WEIGHT); the same SQL builds the rollup and reads raw hours."""
    return (
        f"SELECT {group}, {half_octave_sql('isl')} AS ib, {bucket_sql('ttft_ms')} AS b, "
        f"count(*) AS n, max(ttft_ms) AS vmax, sum(isl::DOUBLE * {WEIGHT}) AS sx, "
        f"sum(ttft_ms * {WEIGHT}) AS sy, sum(isl::DOUBLE * ttft_ms * {WEIGHT}) AS sxy, "
        f"sum(isl::DOUBLE * isl * {WEIGHT}) AS sxx, sum({WEIGHT}) AS w "
        f"FROM {source} WHERE ttft_ms IS NOT NULL GROUP BY ALL"
    )


def gaps_sql(source: str, group: str) -> str:
    """SELECT of (`group`…, pb, b, n, vmax, w) over the unnested gaps of `source`'s rows (w:
    each gap weighs its request's WEIGHT); the same SQL builds the rollup and reads raw
    hours, so both bin alike."""
    return (
        f"SELECT {group}, {position_sql('pos')} AS pb, {bucket_sql('gap')} AS b, "
        "count(*) AS n, max(gap) AS vmax, sum(wt) AS w FROM ("
        f"SELECT *, {WEIGHT} AS wt, unnest(range(1, len(token_gaps_ms) + 1)) AS pos, "
        f"unnest(token_gaps_ms) AS gap FROM {source} WHERE token_gaps_ms IS NOT NULL"
        ") WHERE gap IS NOT NULL GROUP BY ALL"
    )


def mark_inserted(con: duckdb.DuckDBPyConnection, relation: str) -> None:
    """Mark the hours of the rows in `relation` (a registered view) dirty; call inside the
    transaction that inserts them."""
    con.execute(
        f"INSERT INTO rollup_dirty SELECT DISTINCT {UTC_HOUR} AS hour, "
        f"get_current_timestamp() AS marked_at FROM {relation}"
    )


def mark_deleted(con: duckdb.DuckDBPyConnection, where: str, params: list) -> None:
    """Mark the hours of the `requests` rows matching `where` dirty, before deleting them."""
    con.execute(
        f"INSERT INTO rollup_dirty SELECT DISTINCT {UTC_HOUR} AS hour, "
        f"get_current_timestamp() AS marked_at FROM requests WHERE {where}",
        params,
    )


def _full_from_raw(
    con: duckdb.DuckDBPyConnection, hours: list[datetime], kind: str, into: str
) -> None:
    """Insert the full-grain `kind` rows of `hours` from their raw rows into `into` (the
    rollup table, or a temp table of its columns)."""
    # The range lets DuckDB skip row groups by their min/max time; the semi-join is exact.
    raw = (
        "FROM requests WHERE started_at >= ? AND started_at < ? "
        f"AND {UTC_HOUR} IN (SELECT unnest(?::TIMESTAMPTZ[]))"
    )
    params = [min(hours), max(hours) + timedelta(hours=1), hours]
    hourly = f"(SELECT {UTC_HOUR} AS hour, * {raw})"
    if kind == "shapes":
        sql = (
            f"SELECT {UTC_HOUR} AS hour, {DIMS}, {half_octave_sql('isl')} AS ib, "
            f"{half_octave_sql('osl')} AS ob, count(*) AS n, sum({WEIGHT}) AS w {raw} GROUP BY ALL"
        )
    elif kind == "values":
        values = ", ".join(f"{m}::DOUBLE" for m in MEASURES)
        sql = (
            f"SELECT hour, {DIMS}, measure, {bucket_sql('v')} AS b, count(*) AS n, "
            "max(v) AS vmax, sum(v * wt) AS vsum, sum(wt) AS w FROM ("
            f"SELECT {UTC_HOUR} AS hour, {DIMS}, {WEIGHT} AS wt, "
            f"unnest(range({len(MEASURES)})) AS measure, unnest([{values}]) AS v {raw}"
            ") WHERE v IS NOT NULL GROUP BY ALL"
        )
    elif kind == "gaps":
        sql = gaps_sql(hourly, f"hour, {DIMS}")
    else:
        sql = ttft_sql(hourly, f"hour, {DIMS}")
    con.execute(f"INSERT INTO {into} {sql}", params)


def _sources(con: duckdb.DuckDBPyConnection, hours: list[datetime]) -> dict[datetime, str]:
    rows = con.execute(
        "SELECT hour, source FROM rollup_hours WHERE hour IN (SELECT unnest(?::TIMESTAMPTZ[]))",
        [hours],
    ).fetchall()
    return {r[0]: r[1] for r in rows}


def due_hours(
    con: duckdb.DuckDBPyConnection,
    settle_s: float = SETTLE_S,
    max_hours: int = REBUILD_MAX_HOURS,
    max_rows: int | None = REBUILD_ROWS,
) -> list[datetime]:
    """The oldest dirty hours untouched for `settle_s`: at most `max_hours`, and (unless
    `max_rows` is None) only as many as keep their raw rows plus HOUR_ROWS each within
    `max_rows`; always the first one, however many rows it holds."""
    hours = [
        r[0]
        for r in con.execute(
            "SELECT hour FROM rollup_dirty GROUP BY hour "
            "HAVING max(marked_at) <= get_current_timestamp() - to_microseconds(?) "
            "ORDER BY hour LIMIT ?",
            # No more candidates than could fit (each costs HOUR_ROWS at least).
            [
                int(settle_s * 1e6),
                max_hours if max_rows is None else min(max_hours, max_rows // HOUR_ROWS + 1),
            ],
        ).fetchall()
    ]
    if len(hours) <= 1 or max_rows is None:
        return hours
    # One scan of the candidates' time range counts every hour's rows at once, by the hour's
    # number since 1970 (8x cheaper than UTC_HOUR's time zone arithmetic).
    counts = dict(
        con.execute(
            "SELECT floor(epoch_us(started_at) / 3600e6)::BIGINT AS h, count(*) FROM requests "
            "WHERE started_at >= ? AND started_at < ? GROUP BY ALL",
            [hours[0], hours[-1] + timedelta(hours=1)],
        ).fetchall()
    )
    taken: list[datetime] = []
    cost = 0
    for hour in hours:
        cost += counts.get(int(hour.timestamp()) // 3600, 0) + HOUR_ROWS
        if taken and cost > max_rows:
            break
        taken.append(hour)
    return taken


def rebuild(
    con: duckdb.DuckDBPyConnection,
    max_hours: int = REBUILD_MAX_HOURS,
    settle_s: float = SETTLE_S,
    tz: str = "UTC",
    max_rows: int | None = REBUILD_ROWS,
) -> int:
    """Recompute the oldest dirty hours untouched for `settle_s` from the raw rows, as many as
    `due_hours` allows (`max_hours`, `max_rows`), and the tiers above them
    (app/storage/tiers.py; a new hour's day is its local day in `tz`); returns how many were
    rebuilt (0: none is due).

    An hour imported from the lake is left as it is (its raw rows, if any, stay raw); a
    sealed hour (retention pruned its raw rows) gets its late raw rows added, which are then
    deleted, being counted. One transaction: the marks cleared are those this transaction
    saw, so an hour marked again meanwhile (a concurrent write) stays dirty."""
    con.execute("BEGIN TRANSACTION")
    try:
        hours = due_hours(con, settle_s, max_hours, max_rows)
        if not hours:
            con.execute("COMMIT")
            return 0
        rebuild_hours(con, hours, tz)
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
    return len(hours)


def rebuild_hours(con: duckdb.DuckDBPyConnection, hours: list[datetime], tz: str) -> None:
    """Bring `hours` up to date inside the caller's transaction and clear their dirty marks:
    raw hours rebuilt from raw rows (and the tiers above), sealed hours given their late raw
    rows (then deleted, being counted), lake hours left as imported."""
    if not hours:
        return
    sources = _sources(con, hours)
    normal = [h for h in hours if sources.get(h, "raw") == "raw"]
    sealed = [h for h in hours if sources.get(h) == "sealed"]
    if normal:
        tiers.replace(con, normal, tz, lambda kind, into: _full_from_raw(con, normal, kind, into))
    if sealed:
        temps = {kind: f"_fold_{kind}" for kind in KINDS}
        for kind, temp in temps.items():
            con.execute(
                f"CREATE OR REPLACE TEMP TABLE {temp} AS SELECT * FROM rollup_{kind} LIMIT 0"
            )
            _full_from_raw(con, sealed, kind, temp)
        tiers.fold(con, sealed, temps)
        for temp in temps.values():
            con.execute(f"DROP TABLE {temp}")
        con.execute(
            f"DELETE FROM requests WHERE started_at >= ? AND started_at < ? "
            f"AND {UTC_HOUR} IN (SELECT unnest(?::TIMESTAMPTZ[]))",
            [min(sealed), max(sealed) + timedelta(hours=1), sealed],
        )
    con.execute("DELETE FROM rollup_dirty WHERE hour IN (SELECT unnest(?::TIMESTAMPTZ[]))", [hours])


def rebuild_all(con: duckdb.DuckDBPyConnection, tz: str = "UTC") -> int:
    """Rebuild every dirty hour now (commands that hold the file: demo, import)."""
    total = 0
    while n := rebuild(con, settle_s=0, tz=tz):
        total += n
    return total


def hour_counts(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """(hours with rollups, hours waiting for a rebuild), for /api/health."""
    row = first_row(
        con,
        "SELECT (SELECT count(DISTINCT hour) FROM rollup_shapes), "
        "(SELECT count(DISTINCT hour) FROM rollup_dirty)",
    )
    return (int(row[0]), int(row[1])) if row else (0, 0)


def unbuild_all(con: duckdb.DuckDBPyConnection, settled: bool = True) -> None:
    """Drop every rollup tier and mark every hour of raw rows dirty, as a migration adding a
    rollup leaves the file (a rebuild from scratch starts there); `settled` marks them a day
    old, so the catch-up takes them at once."""
    for tier in (*TIERS, *DERIVED):
        for kind in KINDS:
            con.execute(f"DELETE FROM {tiers.table(tier, kind)}")
    con.execute("DELETE FROM rollup_hours")
    con.execute("DELETE FROM rollup_derived")
    age = "INTERVAL 1 DAY" if settled else "INTERVAL 0 SECOND"
    con.execute(
        f"INSERT INTO rollup_dirty SELECT DISTINCT {UTC_HOUR}, get_current_timestamp() - {age} "
        "FROM requests"
    )
