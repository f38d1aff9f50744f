"""An engine's request-shape mix per local hour of day, for replica plans under an SLO."""

from __future__ import annotations

import duckdb

from app.analytics.filters import WEIGHT, Filter
from app.analytics.mix import fold, mid
from app.storage.rollups import HALF_OCTAVE_EDGES, half_octave_sql

# Cells per hour the performance model evaluates: the rest are folded into a neighbour with a
# longer prompt and output (mix.fold: errs long, so latency errs high).
PLAN_CELLS = 12

# (isl, osl, requests) cells of one hour; requests are weighted (sampled rows count 1/p).
Cells = tuple[tuple[int, int, float], ...]


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
        by_hour.setdefault(int(h), []).append(
            (mid(HALF_OCTAVE_EDGES, int(ib)), mid(HALF_OCTAVE_EDGES, int(ob)), float(n))
        )
    return {
        h: tuple((i, o, float(n)) for i, o, n in fold(cells, limit)[0])
        for h, cells in by_hour.items()
    }
