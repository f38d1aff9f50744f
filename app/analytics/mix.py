"""An engine's request-shape mix (ISL × OSL cells and their counts) and its mean load."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb

from app.analytics import weighted
from app.analytics.filters import Filter
from app.analytics.shapes import heatmap
from app.storage.rows import first_row

# The cells evaluated one by one; the rest (rare shapes) are left out and the answer says
# which share of requests the evaluated cells hold.
MAX_CELLS = 64
COVERAGE = 0.995


@dataclass(frozen=True)
class Mix:
    """Representative (ISL, OSL, requests) per half-octave cell, every request counted, and
    the share of requests whose own cell is among them (the rest folded into a neighbour)."""

    cells: tuple[tuple[int, int, int], ...]
    total: int
    covered: float


def mid(edges: Sequence[int], i: int) -> int:
    """A representative token count of bin i (the middle of its edges; the last bin open)."""
    lo = edges[i]
    hi = edges[i + 1] if i + 1 < len(edges) else int(lo * 1.5)
    return max(1, (lo + hi) // 2)


def fold(
    cells: Sequence[tuple[int, int, float]], limit: int, coverage: float = 1.0
) -> tuple[list[tuple[int, int, float]], float]:
    """The busiest cells, up to `limit` of them or until they hold `coverage` of the requests,
    and the requests they held before the rest were folded in.

    The rarest cells are folded into the nearest kept cell with at least their prompt and
    output (else the nearest): dropping them would drop the long-prompt tail, where TTFT and
    KV use are highest; folding them up errs long."""
    ordered = sorted(cells, key=lambda c: -c[2])
    total = sum(c[2] for c in ordered)
    kept: list[list] = []
    acc = 0.0
    for cell in ordered:
        if len(kept) >= limit or acc >= coverage * total:
            break
        kept.append(list(cell))
        acc += cell[2]
    for isl, osl, n in ordered[len(kept) :]:
        longer = [k for k in kept if k[0] >= isl and k[1] >= osl] or kept
        near = min(longer, key=lambda k: abs(math.log(k[0] / isl)) + abs(math.log(k[1] / osl)))
        near[2] += n
    return [(k[0], k[1], k[2]) for k in kept], acc


def shape_mix(cur: duckdb.DuckDBPyConnection, flt: Filter) -> Mix:
    """The busiest half-octave ISL × OSL cells (from rollups when the window has them)."""
    hm = heatmap(cur, flt, bins="log2half")
    if not hm.total:
        return Mix((), 0, 0.0)
    cells = [
        (mid(hm.isl_edges, i), mid(hm.osl_edges, j), int(hm.counts[i][j]))
        for i in range(len(hm.isl_edges))
        for j in range(len(hm.osl_edges))
        if hm.counts[i][j] > 0
    ]
    kept, acc = fold(cells, MAX_CELLS, COVERAGE)
    return Mix(tuple((i, o, int(n)) for i, o, n in kept), hm.total, acc / hm.total)


def mean_in_flight(cur: duckdb.DuckDBPyConnection, flt: Filter) -> float | None:
    """Time-averaged requests in flight over the window: Σ E2E ÷ the window's length (a
    sampled request stands for 1/sample_rate requests in flight)."""
    if flt.start is None or flt.end is None:
        return None
    where, params = flt.where()
    e2e = weighted.total_sql("e2e_ms", weighted.is_sampled(cur, flt))
    row = first_row(
        cur,
        f"SELECT coalesce({e2e}, 0) FROM requests WHERE {where} AND e2e_ms IS NOT NULL",
        params,
    )
    seconds = (flt.end - flt.start).total_seconds()
    if not row or seconds <= 0:
        return None
    return float(row[0]) / 1000.0 / seconds


def peak_hour_in_flight(cur: duckdb.DuckDBPyConnection, flt: Filter) -> float | None:
    """Mean requests in flight in the window's busiest hour (Σ E2E of the requests that
    started in it ÷ 3,600 s), or None without requests."""
    where, params = flt.where()
    e2e = weighted.total_sql("e2e_ms", weighted.is_sampled(cur, flt))
    row = first_row(
        cur,
        f"SELECT max(s) FROM (SELECT {e2e} AS s FROM requests WHERE {where} "
        "AND e2e_ms IS NOT NULL GROUP BY date_trunc('hour', started_at))",
        params,
    )
    if not row or row[0] is None:
        return None
    return float(row[0]) / 1000.0 / 3600.0
