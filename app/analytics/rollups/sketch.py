"""The sketch estimators: quantiles from log-bucketed counts (each bucket's midpoint is within
the rollups' RELATIVE_ERROR of its values), for one group or many at once. Pure numpy.

The counts may be weighted (the rollups' `w`, Σ 1/sample_rate): ranks are then positions in
the cumulative weight, as app/analytics/weighted.py defines them, so a row of weight k
counts as k rows; unweighted counts give the same answers as before."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.storage.rollups import GAMMA, ZERO_BUCKET

# Cumulative weights are float sums: a rank is looked up a hair above its position, relative
# to the total, so rounding cannot move it to the previous bucket. Capped below 1: integer
# counts (exact in floats) find the very buckets they found before.
_EPS = 1e-9
_EPS_CAP = 0.25


def group_estimates(
    group: np.ndarray,
    buckets: np.ndarray,
    counts: np.ndarray,
    vmax: np.ndarray,
    groups: int,
    quantiles: tuple[float, ...],
) -> np.ndarray:
    """`estimate` for many groups at once (rows sorted by group, then bucket): one row per
    group, one column per quantile, NaN for a group without rows."""
    out = np.full((groups, len(quantiles)), np.nan)
    if not len(counts):
        return out
    cum = np.cumsum(counts.astype(np.float64))
    present = np.unique(group)
    # Each group's cumulative weight before its first row and at its last, read from `cum`
    # itself, so float weights cannot send a rank across a group boundary.
    starts = np.searchsorted(group, present, side="left")
    ends = np.searchsorted(group, present, side="right")
    before = np.where(starts > 0, cum[np.maximum(starts - 1, 0)], 0.0)
    n = cum[ends - 1] - before
    eps = np.minimum(_EPS * n, _EPS_CAP)
    top = np.full(groups, -np.inf)
    np.maximum.at(top, group, vmax)
    mids = 2 * GAMMA ** (buckets.astype(float) + 1) / (GAMMA + 1)
    mids[buckets == ZERO_BUCKET] = 0.0
    for j, p in enumerate(quantiles):
        pos = p * np.maximum(n - 1, 0)
        k = np.floor(pos)
        first = mids[np.searchsorted(cum, before + k + eps, side="right")]
        second = mids[
            np.searchsorted(cum, before + np.minimum(k + 1, np.maximum(n - 1, 0)) + eps, "right")
        ]
        out[present, j] = np.minimum(first + (pos - k) * (second - first), top[present])
    return out


def per_bin(
    rows: dict[str, np.ndarray], key: str, quantiles: tuple[float, ...]
) -> dict[int, tuple[int, list[float]]]:
    """bin -> (count, [quantile estimates]) from rows ordered by `key`, then bucket `b`; the
    count is the rows' (weighted) `n` rounded to whole requests."""
    bins, group = np.unique(rows[key], return_inverse=True)
    counts = rows["n"].astype(np.float64)
    est = group_estimates(group, rows["b"], counts, rows["vmax"], len(bins), quantiles)
    totals = np.rint(np.bincount(group, weights=counts, minlength=len(bins)))
    return {int(k): (int(totals[i]), est[i].tolist()) for i, k in enumerate(bins)}


def estimate(buckets: np.ndarray, counts: np.ndarray, top: float, p: float) -> float:
    """quantile_cont's interpolation between the two ranks it uses, on their buckets'
    midpoints: each is within RELATIVE_ERROR of its value, so the result is of the truth."""
    cum = np.cumsum(counts.astype(np.float64))
    total = float(cum[-1])
    last = max(total - 1, 0.0)
    eps = min(_EPS * total, _EPS_CAP)
    pos = p * last
    k = float(np.floor(pos))
    frac = pos - k
    first = mid(buckets[np.searchsorted(cum, k + eps, side="right")])
    second = mid(buckets[np.searchsorted(cum, min(k + 1, last) + eps, side="right")])
    return min(first + frac * (second - first), top)


def mid(bucket: int) -> float:
    return 0.0 if bucket == ZERO_BUCKET else 2 * GAMMA ** (int(bucket) + 1) / (GAMMA + 1)


@dataclass(frozen=True)
class MeasureStats:
    """One measure of one group: quantile estimates, and the exact max, count and sum."""

    quantiles: list[float]
    top: float
    n: int
    total: float


@dataclass(frozen=True)
class GroupStats:
    """Per measure stats of one group (None: no value of that measure), and its requests
    whose status is not ok."""

    measures: dict[str, MeasureStats | None]
    not_ok: int
