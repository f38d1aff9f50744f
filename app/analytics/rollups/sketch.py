"""The sketch estimators: quantiles from log-bucketed counts (each bucket's midpoint is within
the rollups' RELATIVE_ERROR of its values), for one group or many at once. Pure numpy."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from app.storage.rollups import GAMMA, ZERO_BUCKET


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
    cum = np.cumsum(counts)
    totals = np.bincount(group, weights=counts, minlength=groups).astype(np.int64)
    present = np.flatnonzero(totals)
    before = np.concatenate([[0], np.cumsum(totals)[:-1]])[present]
    n = totals[present]
    top = np.full(groups, -np.inf)
    np.maximum.at(top, group, vmax)
    mids = 2 * GAMMA ** (buckets.astype(float) + 1) / (GAMMA + 1)
    mids[buckets == ZERO_BUCKET] = 0.0
    for j, p in enumerate(quantiles):
        pos = p * (n - 1)
        k = np.floor(pos)
        first = mids[np.searchsorted(cum, before + k, side="right")]
        second = mids[np.searchsorted(cum, before + np.minimum(k + 1, n - 1), side="right")]
        out[present, j] = np.minimum(first + (pos - k) * (second - first), top[present])
    return out


def per_bin(
    rows: dict[str, np.ndarray], key: str, quantiles: tuple[float, ...]
) -> dict[int, tuple[int, list[float]]]:
    """bin -> (count, [quantile estimates]) from rows ordered by `key`, then bucket `b`."""
    bins, group = np.unique(rows[key], return_inverse=True)
    counts = rows["n"].astype(np.int64)
    est = group_estimates(group, rows["b"], counts, rows["vmax"], len(bins), quantiles)
    totals = np.bincount(group, weights=counts, minlength=len(bins))
    return {int(k): (int(totals[i]), est[i].tolist()) for i, k in enumerate(bins)}


def estimate(buckets: np.ndarray, counts: np.ndarray, top: float, p: float) -> float:
    """quantile_cont's interpolation between the two ranks it uses, on their buckets'
    midpoints: each is within RELATIVE_ERROR of its value, so the result is of the truth."""
    cum = np.cumsum(counts)
    pos = p * (int(cum[-1]) - 1)
    k = int(np.floor(pos))
    frac = pos - k
    first = mid(buckets[np.searchsorted(cum, k, side="right")])
    second = mid(buckets[np.searchsorted(cum, min(k + 1, int(cum[-1]) - 1), side="right")])
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
