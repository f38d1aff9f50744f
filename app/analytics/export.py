"""A window's requests as a trace, in SQL: per-cell counts, the busiest hour, and the rows to
write (copies for a scaled rate, stratified thinning for a cap, time compression), streamed."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

import duckdb
import pyarrow as pa

from app.analytics.filters import WEIGHT, Filter
from app.storage.rollups import UTC_HOUR, half_octave_sql
from app.storage.rows import first_row
from app.storage.schema import REQUEST_COLUMNS

# The cursor type, named here so the service floor can annotate with it without importing duckdb.
Cursor = duckdb.DuckDBPyConnection

# isl_bin * CELL_BASE + osl_bin, one integer per half-octave cell: the same numbering as
# app.sizing.replay.CELL_BASE (analytics may not import sizing; a unit test holds them equal).
CELL_BASE = 64
CELL = f"({half_octave_sql('isl')} * {CELL_BASE} + {half_octave_sql('osl')})"
BATCH_ROWS = 20_000
SLICE_ROWS = 250_000  # rows a full-window export sorts at a time (bench/export.py: memory)
# The canonical record's columns as `tokenshape import` reads them back from Parquet or CSV:
# the stored row's, but for the gateway (the importer names its own) and the time of receipt.
RECORD_COLUMNS = tuple(c for c in REQUEST_COLUMNS if c not in ("gateway", "received_at"))


@dataclass(frozen=True)
class Window:
    """What a trace is cut from: rows with origin ≤ started_at < origin + span_us that pass
    the filter; offsets are microseconds from origin."""

    flt: Filter
    origin: datetime
    span_us: int
    rows: int | None = None  # the filter's stored rows, when the caller has counted them


class Copying(Protocol):
    """A rate scaled by `scale`: `full` copies of every row plus a per-cell quota of one more
    (app.sizing.replay.Copies)."""

    @property
    def scale(self) -> float: ...
    @property
    def full(self) -> int: ...
    @property
    def partial(self) -> Mapping[int, int]: ...


@dataclass(frozen=True)
class Selection:
    """Which rows a trace holds: copies of the window (None: each row once) and per-cell quotas
    after copying (None: every row)."""

    copies: Copying | None
    quotas: dict[int, int] | None
    seed: int = 0


def cell_counts(cur: duckdb.DuckDBPyConnection, flt: Filter) -> dict[int, int]:
    """Stored rows per ISL × OSL cell (half-octave bins) of the filter's window."""
    where, params = flt.where()
    rows = cur.execute(
        f"SELECT {CELL} AS cell, count(*) FROM requests WHERE {where} GROUP BY cell", params
    ).fetchall()
    return {int(c): int(n) for c, n in rows}


def requests_of(cur: duckdb.DuckDBPyConnection, flt: Filter) -> tuple[int, float]:
    """Stored rows of the window and the requests they stand for (Σ 1/sample_rate)."""
    where, params = flt.where()
    row = first_row(
        cur, f"SELECT count(*), coalesce(sum({WEIGHT}), 0) FROM requests WHERE {where}", params
    )
    return (int(row[0]), float(row[1])) if row else (0, 0.0)


def first_started(cur: duckdb.DuckDBPyConnection, flt: Filter) -> datetime | None:
    """The earliest request of the window, or None."""
    where, params = flt.where()
    row = first_row(cur, f"SELECT min(started_at) FROM requests WHERE {where}", params)
    return row[0] if row else None


def busiest_hour(cur: duckdb.DuckDBPyConnection, flt: Filter) -> tuple[datetime, float] | None:
    """The UTC clock hour with the most requests (weighted) in the window, and that count."""
    where, params = flt.where()
    row = first_row(
        cur,
        f"SELECT {UTC_HOUR} AS h, sum({WEIGHT}) AS w FROM requests WHERE {where} "
        "GROUP BY h ORDER BY w DESC, h LIMIT 1",
        params,
    )
    return (row[0], float(row[1])) if row else None


def _quota_table(quotas: Mapping[int, int]) -> tuple[str, list]:
    cells = sorted(quotas)
    return (
        "(SELECT unnest(?::BIGINT[]) AS cell, unnest(?::BIGINT[]) AS q)",
        [cells, [quotas[c] for c in cells]],
    )


def _thinned(relation: str, order: str, quotas: Mapping[int, int], seed: int) -> tuple[str, list]:
    """Rows of `relation` kept so that cell c keeps exactly quotas[c] of its n rows, spread
    evenly along `order` (systematic sampling: row r is kept when ⌊(r·q + o)/n⌋ steps, with
    an offset o in [0, n) drawn from the seed and the cell)."""
    table, params = _quota_table(quotas)
    sql = (
        f"SELECT * EXCLUDE (rn_, n_, q, o_) FROM ("
        f"SELECT x.*, qt.q, row_number() OVER (PARTITION BY x.cell ORDER BY {order}) AS rn_, "
        f"count(*) OVER (PARTITION BY x.cell) AS n_, "
        f"CAST(hash(x.cell, ?::BIGINT) % CAST(count(*) OVER (PARTITION BY x.cell) AS UBIGINT) "
        f"AS BIGINT) AS o_ "
        f"FROM {relation} x JOIN {table} qt USING (cell)) "
        f"WHERE q > 0 AND (rn_ * q + o_) // n_ > ((rn_ - 1) * q + o_) // n_"
    )
    return sql, [seed, *params]


def _rows(window: Window, pick: Selection) -> tuple[str, list]:
    """SQL of the trace's rows: every source column, `cell`, `copy` and `t_us` (offset from the
    window's origin after copying), before time compression."""
    where, params = window.flt.where()
    base = (
        f"(SELECT *, {CELL} AS cell, epoch_us(started_at) - ? AS t0_us FROM requests WHERE {where})"
    )
    base_params = [int(window.origin.timestamp() * 1_000_000), *params]
    order = "x.t0_us, x.request_id"
    cps = pick.copies
    if cps is None:
        rel, rel_params = f"(SELECT *, 0 AS copy, t0_us AS t_us FROM {base})", base_params
    else:
        # Copy i is the window shifted by i/scale of its span, wrapping around its end: each
        # copy keeps the arrival pattern, and the copies spread evenly over the window.
        span = max(window.span_us, 1)
        shift = f"CAST(floor(c.i * {span} / {cps.scale!r}) AS BIGINT)"
        parts: list[str] = []
        rel_params = []
        if cps.full:
            parts.append(
                f"SELECT b.*, c.i AS copy, (b.t0_us + {shift}) % {span} AS t_us "
                f"FROM {base} b, range({cps.full}) c(i)"
            )
            rel_params += base_params
        if cps.partial:
            thin, thin_params = _thinned(base, order, cps.partial, pick.seed + 1)
            parts.append(
                f"SELECT p.*, c.i AS copy, (p.t0_us + {shift}) % {span} AS t_us "
                f"FROM ({thin}) p, (SELECT {cps.full} AS i) c"
            )
            rel_params += [*thin_params[:1], *base_params, *thin_params[1:]]
        rel = "(" + " UNION ALL ".join(parts) + ")"
    if pick.quotas is not None:
        thin, thin_params = _thinned(rel, "x.t_us, x.request_id, x.copy", pick.quotas, pick.seed)
        return f"({thin})", [*thin_params[:1], *rel_params, *thin_params[1:]]
    return rel, rel_params


def trace_rows(
    cur: duckdb.DuckDBPyConnection,
    window: Window,
    pick: Selection,
    *,
    speedup: float,
    columns: str = "mooncake",
) -> Iterator[pa.RecordBatch]:
    """The trace's rows in arrival order, in batches: `mooncake` gives timestamp_ms (an integer
    offset, compressed by speedup), isl and osl; `records` the canonical record's columns, with
    started_at moved by the same transform and copies' request ids suffixed `~i`."""
    if pick.copies is None and pick.quotas is None:
        # Every row once: the window is read a time slice at a time, so the sort behind ORDER BY
        # holds one slice (about SLICE_ROWS rows), not the window, whatever its size.
        for part in _slices(cur, window):
            yield from _ordered(cur, part, pick, speedup, columns)
    else:
        # Copies and samples are bounded by the hour (peak) or by max_requests.
        yield from _ordered(cur, window, pick, speedup, columns)


def _slices(cur: duckdb.DuckDBPyConnection, window: Window) -> Iterator[Window]:
    """The window cut into equal spans of time holding about SLICE_ROWS rows each on average."""
    flt = window.flt
    n = window.rows
    if n is None:
        where, params = flt.where()
        row = first_row(cur, f"SELECT count(*) FROM requests WHERE {where}", params)
        n = int(row[0]) if row else 0
    if n <= SLICE_ROWS or flt.start is None or flt.end is None:
        yield window
        return
    k = -(-n // SLICE_ROWS)
    step = (flt.end - flt.start) / k
    bounds = [flt.start + step * i for i in range(k)] + [flt.end]
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        yield replace(window, flt=replace(flt, start=lo, end=hi), rows=None)


def _ordered(
    cur: duckdb.DuckDBPyConnection, window: Window, pick: Selection, speedup: float, columns: str
) -> Iterator[pa.RecordBatch]:
    rel, params = _rows(window, pick)
    if columns == "mooncake":
        select = (
            f"SELECT CAST(round(t_us / 1000.0 / {speedup!r}) AS BIGINT) AS timestamp_ms, isl, osl"
        )
    else:
        fields = ", ".join(
            "CASE WHEN copy = 0 THEN request_id ELSE request_id || '~' || copy END AS request_id"
            if c == "request_id"
            else f"? + to_microseconds(CAST(round(t_us / {speedup!r}) AS BIGINT)) AS started_at"
            if c == "started_at"
            else c
            for c in RECORD_COLUMNS
        )
        select = f"SELECT {fields}"
        params = [window.origin, *params]
    # A relation's reader streams the result; a DB-API result's would copy it first.
    reader = cur.sql(f"{select} FROM {rel} ORDER BY t_us, request_id, copy", params=params)
    yield from reader.to_arrow_reader(BATCH_ROWS)


def zero_length_rows(cur: duckdb.DuckDBPyConnection, window: Window, pick: Selection) -> int:
    """The trace's rows with no input or no output token."""
    rel, params = _rows(window, pick)
    row = first_row(cur, f"SELECT count(*) FROM {rel} WHERE isl = 0 OR osl = 0", params)
    return int(row[0]) if row else 0


@dataclass(frozen=True)
class TraceStats:
    """What a trace holds, to compare with its source: rows per cell, ISL/OSL quantiles and
    requests per time bucket."""

    cells: dict[int, int]
    isl: tuple[int, int, int]  # p50, p90, p99
    osl: tuple[int, int, int]
    per_bucket: dict[int, int]  # time bucket from the origin → requests


def _stats(cur: duckdb.DuckDBPyConnection, rel: str, params: list, bucket_us: int) -> TraceStats:
    cells = {
        int(c): int(n)
        for c, n in cur.execute(
            f"SELECT cell, count(*) FROM {rel} GROUP BY cell", params
        ).fetchall()
    }
    row = first_row(
        cur,
        f"SELECT quantile_disc(isl, [0.5, 0.9, 0.99]), quantile_disc(osl, [0.5, 0.9, 0.99]) "
        f"FROM {rel}",
        params,
    )
    buckets = {
        int(m): int(n)
        for m, n in cur.execute(
            f"SELECT t_us // {int(bucket_us)} AS m, count(*) FROM {rel} GROUP BY m", params
        ).fetchall()
    }

    def three(values: list | None) -> tuple[int, int, int]:
        v = [int(x) for x in values] if values else [0, 0, 0]
        return v[0], v[1], v[2]

    return TraceStats(
        cells, three(row[0] if row else None), three(row[1] if row else None), buckets
    )


def trace_stats(
    cur: duckdb.DuckDBPyConnection, window: Window, pick: Selection, bucket_us: int
) -> TraceStats:
    """Rows per cell, ISL/OSL quantiles and rows per time bucket of the trace (offsets before
    time compression); Selection(None, None) gives the window's own figures."""
    rel, params = _rows(window, pick)
    return _stats(cur, rel, params, bucket_us)
