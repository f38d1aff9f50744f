"""An engine's request-shape mix per local hour of day, for replica plans under an SLO."""

from __future__ import annotations

import math

import duckdb

from app.analytics.filters import WEIGHT, Filter
from app.storage.rollups import HALF_OCTAVE_EDGES, half_octave_sql

# Cells per hour the performance model evaluates: the rest are folded into a neighbour with a
# longer prompt and output (errs long, so latency errs high).
PLAN_CELLS = 12

# (isl, osl, requests) cells of one hour; requests are weighted (sampled rows count 1/p).
Cells = tuple[tuple[int, int, float], ...]


def _mid(i: int) -> int:
    lo = HALF_OCTAVE_EDGES[i]
    hi = HALF_OCTAVE_EDGES[i + 1] if i + 1 < len(HALF_OCTAVE_EDGES) else int(lo * 1.5)
    return max(1, (lo + hi) // 2)


def fold(cells: list[tuple[int, int, float]], limit: int) -> Cells:
    """The `limit` busiest cells, each rarer cell added to the nearest kept one that is at least
    as long in both prompt and output (else the nearest)."""
    cells = sorted(cells, key=lambda c: -c[2])
    kept = [list(c) for c in cells[:limit]]
    for isl, osl, n in cells[limit:]:
        longer = [k for k in kept if k[0] >= isl and k[1] >= osl] or kept
        near = min(longer, key=lambda k: abs(math.log(k[0] / isl)) + abs(math.log(k[1] / osl)))
        near[2] += n
    return tuple((int(i), int(o), float(n)) for i, o, n in kept)


def hour_mixes(
    cur: duckdb.DuckDBPyConnection, flt: Filter, tz: str, limit: int = PLAN_CELLS
) -> dict[int, Cells]:
    """Per local hour (0–23) of `tz`: its busiest half-octave ISL × OSL cells (one query)."""
    where, params = flt.where()
    rows = cur.execute(
        f"SELECT hour(started_at AT TIME ZONE ?) AS h, {half_octave_sql('isl')} AS ib, "
        f"{half_octave_sql('osl')} AS ob, sum({WEIGHT}) AS n FROM requests WHERE {where} "
        "GROUP BY ALL",
        [tz, *params],
    ).fetchall()
    by_hour: dict[int, list[tuple[int, int, float]]] = {}
    for h, ib, ob, n in rows:
        by_hour.setdefault(int(h), []).append((_mid(int(ib)), _mid(int(ob)), float(n)))
    return {h: fold(cells, limit) for h, cells in by_hour.items()}
