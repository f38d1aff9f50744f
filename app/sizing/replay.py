"""The arithmetic of a replayable trace: per-cell quotas, copies for a scaled rate, and how close
a trace stays to the traffic it came from (pure: counts in, numbers out)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

# A cell is one ISL bin and one OSL bin of the rollups' half-octave edges, numbered
# isl_bin * CELL_BASE + osl_bin (29 bins each, so one integer per cell).
CELL_BASE = 64
MAX_SCALE = 1000.0  # a scaled trace at most 1,000 × its window's requests


def largest_remainder(counts: dict[int, int], total: int) -> dict[int, int]:
    """Whole quotas per cell, proportional to counts and summing to total ≤ Σ counts (Hamilton's:
    each cell gets the floor of its share, the cells with the largest remainders one more)."""
    n = sum(counts.values())
    if n <= 0 or total <= 0:
        return {cell: 0 for cell in counts}
    exact = {cell: c * total / n for cell, c in counts.items()}
    quotas = {cell: math.floor(x) for cell, x in exact.items()}
    short = total - sum(quotas.values())
    # Ties broken by the cell's size, then its number: the same input gives the same trace.
    order = sorted(counts, key=lambda c: (-(exact[c] - quotas[c]), -counts[c], c))
    for cell in order[:short]:
        quotas[cell] += 1
    return quotas


@dataclass(frozen=True)
class Copies:
    """A rate scaled by `scale`: `full` whole copies of every request, plus `partial`, a per-cell
    quota of one more copy (the fractional part, thinned evenly in time within each cell)."""

    scale: float
    full: int
    partial: dict[int, int]

    def counts(self, source: dict[int, int]) -> dict[int, int]:
        """Requests per cell after scaling."""
        return {c: self.full * n + self.partial.get(c, 0) for c, n in source.items()}


def copies(source: dict[int, int], scale: float) -> Copies:
    """How to scale the requests of each cell by `scale` (> 0)."""
    if not (0 < scale <= MAX_SCALE) or math.isnan(scale):
        raise ValueError(f"scale must be above 0 and at most {MAX_SCALE:g}, got {scale:g}")
    full = math.floor(scale)
    fraction = scale - full
    extra = round(fraction * sum(source.values()))
    return Copies(scale, full, largest_remainder(source, extra) if extra else {})


def tvd(a: dict[int, int], b: dict[int, int]) -> float:
    """Total variation distance between two histograms as shares (0: same shape, 1: disjoint)."""
    na, nb = sum(a.values()), sum(b.values())
    if na == 0 or nb == 0:
        return 0.0 if na == nb else 1.0
    cells = set(a) | set(b)
    return 0.5 * sum(abs(a.get(c, 0) / na - b.get(c, 0) / nb) for c in cells)


@dataclass(frozen=True)
class Burstiness:
    """Requests per minute over a span: the mean, the busiest minute, and the coefficient of
    variation (standard deviation / mean; a Poisson stream of the same rate gives
    ≈ 1/√mean, bursty traffic more)."""

    minutes: int
    mean: float
    peak: int
    cv: float

    @property
    def peak_to_mean(self) -> float:
        """The busiest minute over the average one."""
        return self.peak / self.mean if self.mean else 0.0


def burstiness(per_minute: list[int] | np.ndarray, minutes: int) -> Burstiness:
    """Burstiness of a stream from its non-empty minutes' counts over `minutes` minutes
    (minutes with no request count as zero)."""
    counts = np.asarray(per_minute, dtype=np.float64)
    minutes = max(int(minutes), len(counts), 1)
    total = float(counts.sum())
    mean = total / minutes
    if mean == 0:
        return Burstiness(minutes, 0.0, 0, 0.0)
    var = max(float((counts**2).sum()) / minutes - mean**2, 0.0)
    return Burstiness(minutes, mean, int(counts.max(initial=0)), math.sqrt(var) / mean)


def log2_cells(cells: dict[int, int]) -> dict[int, int]:
    """Half-octave cells pooled into the Shapes page's log2 cells (two half-octave bins make
    one power-of-two bin: index (i + 1) // 2)."""
    out: dict[int, int] = {}
    for cell, n in cells.items():
        i, j = divmod(cell, CELL_BASE)
        key = ((i + 1) // 2) * CELL_BASE + (j + 1) // 2
        out[key] = out.get(key, 0) + n
    return out


BUCKETS_S = (60, 300, 900, 1800, 3600, 7200, 14400, 21600, 43200, 86400)
PER_BUCKET = 20  # trace requests per time bucket, on average, for a readable burstiness


def bucket_seconds(span_s: float, trace_rows: int) -> int:
    """The time bucket to compare arrival patterns in: the shortest of BUCKETS_S in which the
    trace averages PER_BUCKET requests (one minute at least; a finer bucket is mostly noise)."""
    for b in BUCKETS_S:
        if trace_rows * b >= PER_BUCKET * span_s:
            return b
    return BUCKETS_S[-1]


def bucket_words(seconds: int) -> str:
    """'minute', '15 min', '2 h' …"""
    if seconds == 60:
        return "minute"
    if seconds < 3600:
        return f"{seconds // 60} min"
    return "hour" if seconds == 3600 else f"{seconds // 3600} h"
