"""A simulated year at a billion requests a day: the rollup tiers' file size and the dashboard's
latency over it (issue 23, item 1).

Generates, inside DuckDB, a database migrated by the app's own migrations that holds one
simulated year ending at the current hour, at 1 B requests/day (`--scale` times that) with a
daily and weekly rhythm, the way a node with the default retentions holds it after a year:
`rollup_day_*` for every day, `rollup_nt_*` (hourly, without tenant) for the last 90 days,
`rollup_*` (hourly, full grain) for the last 14, and `rollup_hours` for every hour (source
'sealed': no raw `requests` row is stored). Then serves the file with `tokenshape serve` on a
loopback port and times, over HTTP, every dashboard page's data (Dash's routing callback, which
builds the page's layout and runs its queries, plus the callbacks the page fires on load) and
every JSON route under /api, for a 24-hour window (the reference), 30 days, 365 days and a
tenant-filtered 180 days, in alternation.

The fleet (see FLEET_DOC below and docs/performance.md, "A year at a billion requests a day"):
10 models on 20 engines, each engine behind 1-2 of 5 gateways, 50 tenants with Zipf-skewed
traffic each using 2-4 engines, statuses ok/error/cancelled 97/2/1%. Every row is generated
from per-engine (and per-tenant, per-status, per-load-level) lognormal distributions of ISL,
OSL, TTFT, ITL and E2E: a bucket's count is the number of integers the cumulative count
N x F(bucket) crosses (F the distribution's CDF over the buckets, N the cell's requests that
hour, shifted by a random offset per cell and hour), so counts sum exactly to the cell's
requests, a bucket with an expected count below one is occupied that often, as sampled traffic
would occupy it, and the number of occupied 2% buckets per (dimensions, hour) follows from the
traffic, as with real requests.

Only the distributions (small tables, a few million rows at most) are computed in numpy; every
rollup row is made by one INSERT ... SELECT per tier, kind and day in DuckDB.

Usage: `python bench/year.py` (the full year: ~22 GB, ~35 minutes on the 2-core build machine),
`python bench/year.py --days 2 --scale 0.1 --runs 1` for a smoke check (a few minutes: the
generation's time follows the hours of each tier, not the requests).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlencode

import duckdb
import httpx
import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.services.demo import DEMO_PROFILES  # noqa: E402
from app.storage import tiers  # noqa: E402
from app.storage.database import Database  # noqa: E402
from app.storage.engines import put_profile  # noqa: E402
from app.storage.rollups import (  # noqa: E402
    GAMMA,
    HALF_OCTAVE_EDGES,
    POSITION_EDGES,
    bucket_sql,
)
from bench._server import free_port, start_server, stop_server  # noqa: E402

LN_G = math.log(GAMMA)
PER_DAY = 1_000_000_000
FULL_DAYS, NT_DAYS = 14, 90  # the default retentions of the two hourly tiers (app/config.py)
SEED = 23
# Requests that carry per-token gaps: 2%, as in the demo data (40,119 of 2,000,000 rows).
GAP_SHARE = 0.02
SIGMAS = 6.0  # each distribution's support, in standard deviations either side
UNIT = 2.0**50  # cumulative shares are multiples of 2^-50: exact doubles, exact telescoping
TAIL = 1e-13  # a bucket less likely than this is left out of a distribution
TOKEN_MEASURES = (0, 1)  # isl, osl: integers
# Calibrated on the demo's data (docs/performance.md): TTFT grows with ISL (ln-slope) and varies
# this much within one half-octave ISL bin at least; one token's gap varies this much.
SLOPE, TTFT_SIGMA_MIN, GAP_SIGMA = 0.6, 0.25, 0.4
LEVEL_SHIFT = {  # ln-shift of the latencies' medians at load levels 0 (night), 1, 2 (peak)
    2: (0.0, 0.15, 0.35),  # ttft_ms
    3: (0.0, 0.05, 0.12),  # itl_ms
    4: (0.0, 0.10, 0.25),  # e2e_ms
}
STATUSES = (("ok", 0.97, 0.0, 0.0), ("error", 0.02, -1.2, -0.9), ("cancelled", 0.01, -0.6, -0.5))
WEEKDAY = {1: 1.12, 2: 1.12, 3: 1.12, 4: 1.12, 5: 1.12, 6: 0.70, 7: 0.70}  # mean 1.0
MODELS = (
    "llama-3.1-8b-instruct",
    "llama-3.1-70b-instruct",
    "qwen2.5-coder-7b-instruct",
    "qwen2.5-72b-instruct",
    "mistral-7b-instruct",
    "mixtral-8x7b-instruct",
    "gemma-2-9b-it",
    "gemma-2-27b-it",
    "deepseek-v3",
    "llama-3.3-70b-instruct",
)
# (ISL median, σ), (OSL median, σ), TTFT median ms, ITL median ms: the four shapes and more.
KINDS = {
    "chat": ((420, 0.6), (350, 0.7), 180, 18),
    "rag": ((2000, 0.5), (200, 0.5), 450, 22),
    "code": ((1200, 0.6), (60, 0.7), 220, 14),
    "batch": ((8000, 0.45), (700, 0.4), 1500, 30),
    "classify": ((300, 0.45), (8, 0.5), 90, 12),
}
FLEET_DOC = (
    "10 models on 20 engines (2 per model; each engine's traffic one of chat, RAG, code, batch "
    "or classification, with its own ISL/OSL/TTFT/ITL/E2E lognormals), each engine behind 1-2 "
    "of 5 gateways (27 engine-gateway pairs), 50 tenants whose traffic is Zipf-skewed (s = 1.1: "
    "the largest sends 22%, the smallest 0.3%) each using 2-4 engines (its own ISL/OSL shift on "
    "each), statuses ok/error/cancelled 97/2/1% (errors and cancellations shorter); a daily "
    "rhythm (peak 14:00, trough 3.2x lower; TTFT, ITL and E2E higher at the busier hours) and a "
    "weekly one (weekdays 1.12, weekends 0.70 of the mean); 2% of requests carry per-token gaps"
)


# ---------------------------------------------------------------- the fleet (small tables)


@dataclass
class Fleet:
    """The simulated fleet: one row per cell (tenant, engine, gateway, status) with its share
    of all requests and its distributions' parameters (ln-space)."""

    cells: pd.DataFrame
    engines: pd.DataFrame
    shape: np.ndarray  # relative requests per local hour of day (24)
    levels: np.ndarray  # load level per local hour of day (24)


def _erfc(x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(math.erfc, 1, 1)(x).astype(np.float64)


def normal_mass(lo: np.ndarray, hi: np.ndarray, mu: np.ndarray, sig: np.ndarray) -> np.ndarray:
    """P(lo <= X < hi) for X ~ N(mu, sig), accurate in both tails (erfc of the far side)."""
    a, b = (lo - mu) / (sig * math.sqrt(2)), (hi - mu) / (sig * math.sqrt(2))
    ea, eb = _erfc(np.abs(a)), _erfc(np.abs(b))
    right = 0.5 * (ea - eb)  # a > 0: both edges right of the median
    left = 0.5 * (eb - ea)  # b < 0: both left of it
    return np.where(a > 0, right, np.where(b < 0, left, 1.0 - 0.5 * ea - 0.5 * eb))


def build_fleet() -> Fleet:
    """The fleet of FLEET_DOC, from a fixed seed."""
    rng = np.random.default_rng(SEED)
    kinds = list(KINDS)
    engines = []
    for i in range(20):
        model = MODELS[i // 2]
        kind = kinds[(i + i // 5) % len(kinds)]
        (isl_m, isl_s), (osl_m, osl_s), ttft_m, itl_m = KINDS[kind]
        big = 2.2 if any(s in model for s in ("70b", "72b", "v3", "8x7b")) else 1.0
        jit = np.exp(rng.normal(0, 0.15, 4))
        mu_isl, mu_osl = math.log(isl_m * jit[0]), math.log(osl_m * jit[1])
        mu_ttft, mu_itl = math.log(ttft_m * big * jit[2]), math.log(itl_m * big * jit[3])
        mu_e2e = math.log(math.exp(mu_ttft) + math.exp(mu_osl + mu_itl))
        gateways = [f"gw-{i % 5}"] + ([f"gw-{(i + 2) % 5}"] if i % 3 == 0 else [])
        engines.append(
            {
                "engine": f"{model.split('-instruct')[0].split('-it')[0]}-{'ab'[i % 2]}",
                "model": model,
                "kind": kind,
                "gateways": gateways,
                "mu": [mu_isl, mu_osl, mu_ttft, mu_itl, mu_e2e],
                "sig": [isl_s, osl_s, 0.45, 0.25, 0.6],
            }
        )
    zipf = 1.0 / np.arange(1, 51) ** 1.1
    zipf /= zipf.sum()
    uses: list[list[tuple[int, float]]] = []
    for _ in range(50):
        k = int(rng.integers(2, 5))
        picked = rng.choice(20, k, replace=False)
        split = rng.dirichlet(np.full(k, 2.0))
        uses.append(list(zip(picked.tolist(), split.tolist(), strict=True)))
    used = {e for u in uses for e, _ in u}
    for e in sorted(set(range(20)) - used):  # every engine serves someone
        t = int(rng.integers(0, 50))
        uses[t] = [(x, s * 0.8) for x, s in uses[t]] + [(e, 0.2)]
    rows = []
    for t, u in enumerate(uses):
        for e, split in u:
            eng = engines[e]
            shift = rng.normal(0, 0.35, 2)  # this tenant's prompts and answers on this engine
            for gw in eng["gateways"]:
                for status, sshare, osl_shift, e2e_shift in STATUSES:
                    mu = list(eng["mu"])
                    mu[0] += shift[0]
                    mu[1] += shift[1] + osl_shift
                    mu[4] += 0.5 * shift[1] + e2e_shift
                    sig = [eng["sig"][0] * 0.8, eng["sig"][1] * 0.8, *eng["sig"][2:]]
                    rows.append(
                        {
                            "tenant": f"t{t:02d}",
                            "engine": eng["engine"],
                            "model": eng["model"],
                            "gateway": gw,
                            "status": status,
                            "share": zipf[t] * split / len(eng["gateways"]) * sshare,
                            "mu": mu,
                            "sig": sig,
                        }
                    )
    cells = pd.DataFrame(rows)
    cells["share"] /= cells["share"].sum()
    cells["cell"] = np.arange(len(cells))
    groups = cells.groupby(["engine", "gateway", "status"], sort=True).ngroup()
    cells["grp"] = groups.to_numpy()
    cells["in_grp"] = cells["share"] / cells.groupby("grp")["share"].transform("sum")
    h = np.arange(24)
    shape = 0.45 + np.exp(-0.5 * ((h - 14) / 4.0) ** 2)
    rel = shape / shape.mean()
    levels = np.where(rel < 0.8, 0, np.where(rel > 1.2, 2, 1))
    return Fleet(cells, pd.DataFrame(engines), shape / shape.sum(), levels)


# ------------------------------------------------ distributions over the buckets (numpy)


def _expand(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(row index, b) for every b in [lo, hi] of every row."""
    k = hi - lo + 1
    idx = np.repeat(np.arange(len(lo)), k)
    start = np.repeat(np.cumsum(k) - k, k)
    return idx, lo[idx] + (np.arange(k.sum()) - start)


def _bucket_values(measure: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, ...]:
    """(ln lower end, ln upper end, vmax, mean value) of each bucket's probability interval;
    token counts are integers: the bucket holds the integers in [γ^b, γ^(b+1))."""
    lo_edge, hi_edge = np.exp(b * LN_G), np.exp((b + 1) * LN_G)
    token = np.isin(measure, TOKEN_MEASURES)
    lo_int, hi_int = np.ceil(lo_edge), np.ceil(hi_edge) - 1
    empty = token & (hi_int < lo_int)
    with np.errstate(divide="ignore", invalid="ignore"):
        ln_lo = np.where(token, np.log(np.maximum(lo_int - 0.5, 1e-300)), b * LN_G)
        ln_hi = np.where(token, np.log(np.maximum(hi_int + 0.5, 1e-300)), (b + 1) * LN_G)
    ln_hi = np.where(empty, ln_lo, ln_hi)
    # Logged latencies have microsecond resolution and token counts are integers, so vmax and
    # the per-request value summed into vsum are too (full-precision doubles compress worse).
    vmax = np.where(token, hi_int, np.round(np.exp((b + 0.8) * LN_G), 3))
    mean = np.where(token, np.floor((lo_int + hi_int) / 2), np.round(2 * hi_edge / (GAMMA + 1), 3))
    return ln_lo, ln_hi, vmax, mean


def _quantize(frame: pd.DataFrame, keys: list[str], order: list[str]) -> pd.DataFrame:
    """Drop buckets below TAIL, renormalise per `keys`, and add the cumulative shares c_lo,
    c_hi as exact multiples of 2^-50 (0 at each group's first bucket, 1 at its last), and a
    random offset `phi` per group."""
    frame = frame[frame["p"] > TAIL].sort_values(keys + order, kind="stable").reset_index(drop=True)
    g = frame.groupby(keys, sort=False).ngroup().to_numpy()
    total = np.bincount(g, weights=frame["p"].to_numpy())
    units = np.floor(frame["p"].to_numpy() / total[g] * UNIT).astype(np.int64)
    # The rounding remainder goes to each group's likeliest bucket: the units sum to 2^50.
    rest = np.int64(UNIT) - np.bincount(g, weights=units).astype(np.int64)
    top = frame.assign(_g=g, _u=units).groupby("_g")["_u"].idxmax().to_numpy()
    units[top] += rest
    cum = np.cumsum(units)
    first = np.r_[0, np.flatnonzero(np.diff(g)) + 1]
    before = np.repeat(np.r_[0, cum[first[1:] - 1]], np.diff(np.r_[first, len(g)]))
    c_hi = cum - before
    frame["c_hi"] = c_hi / UNIT
    frame["c_lo"] = (c_hi - units) / UNIT
    frame["phi"] = (g * 0.6180339887498949) % 1.0
    return frame.drop(columns="p")


def _mix(
    frame: pd.DataFrame, weight: np.ndarray, keys: list[str], extra: list[str]
) -> pd.DataFrame:
    """Σ weight × p per `keys` (the distribution of a group of cells, or of a day's levels)."""
    out = frame.assign(p=frame["p"].to_numpy() * weight)
    return out.groupby(keys, sort=False, as_index=False).agg(
        p=("p", "sum"), **{c: (c, "first") for c in extra}
    )


@dataclass
class Distributions:
    """Per kind and tier, the bucket distributions the generator draws rows from."""

    full: dict[str, pd.DataFrame] = field(default_factory=dict)
    nt: dict[str, pd.DataFrame] = field(default_factory=dict)
    day: dict[str, pd.DataFrame] = field(default_factory=dict)
    gap_mean: np.ndarray | None = None  # per cell: gaps per request that carries them


def _cell_arrays(fleet: Fleet) -> tuple[np.ndarray, np.ndarray]:
    return np.array(fleet.cells["mu"].tolist()), np.array(fleet.cells["sig"].tolist())


def _values(fleet: Fleet) -> pd.DataFrame:
    mu, sig = _cell_arrays(fleet)
    n = len(fleet.cells)
    cell = np.repeat(np.arange(n), 3 * 5)
    level = np.tile(np.repeat(np.arange(3), 5), n)
    measure = np.tile(np.arange(5), 3 * n)
    m = mu[cell, measure] + [
        LEVEL_SHIFT[x][lv] if x in LEVEL_SHIFT else 0.0
        for x, lv in zip(measure, level, strict=True)
    ]
    s = sig[cell, measure]
    lo = np.floor((m - SIGMAS * s) / LN_G).astype(np.int64)
    lo = np.where(np.isin(measure, TOKEN_MEASURES), np.maximum(lo, 0), lo)
    hi = np.floor((m + SIGMAS * s) / LN_G).astype(np.int64)
    idx, b = _expand(lo, hi)
    ln_lo, ln_hi, vmax, mean = _bucket_values(measure[idx], b)
    p = normal_mass(ln_lo, ln_hi, m[idx], s[idx])
    return pd.DataFrame(
        {
            "cell": cell[idx],
            "level": level[idx],
            "measure": measure[idx],
            "b": b,
            "p": p,
            "vmax": vmax,
            "vmid": mean,
        }
    )


def _bins(edges: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """ln-space [lo, hi) of each bin of integer edges (the last bin open)."""
    lo = np.array([max(e, 1) - 0.5 for e in edges], dtype=np.float64)
    hi = np.array([e - 0.5 for e in edges[1:]] + [1e300], dtype=np.float64)
    return np.log(lo), np.log(hi)


def _shapes(fleet: Fleet) -> pd.DataFrame:
    mu, sig = _cell_arrays(fleet)
    lo, hi = _bins(HALF_OCTAVE_EDGES)
    k = len(HALF_OCTAVE_EDGES)
    n = len(fleet.cells)
    cell = np.repeat(np.arange(n), k)
    bins = np.tile(np.arange(k), n)
    p_isl = normal_mass(lo[bins], hi[bins], mu[cell, 0], sig[cell, 0]).reshape(n, k)
    p_osl = normal_mass(lo[bins], hi[bins], mu[cell, 1], sig[cell, 1]).reshape(n, k)
    joint = p_isl[:, :, None] * p_osl[:, None, :]  # ISL and OSL independent within a cell
    c, i, o = np.meshgrid(np.arange(n), np.arange(k), np.arange(k), indexing="ij")
    return pd.DataFrame({"cell": c.ravel(), "ib": i.ravel(), "ob": o.ravel(), "p": joint.ravel()})


def _isl_mid() -> np.ndarray:
    edges = np.array(HALF_OCTAVE_EDGES, dtype=np.float64)
    upper = np.r_[edges[1:], edges[-1] * 1.5]
    return np.round(np.where(edges == 0, 8.0, np.sqrt(edges * upper)))  # an ISL: an integer


def _ttft(fleet: Fleet) -> pd.DataFrame:
    """TTFT per half-octave ISL bin: its median grows with the bin's ISL (slope 0.45 in ln)."""
    mu, sig = _cell_arrays(fleet)
    lo, hi = _bins(HALF_OCTAVE_EDGES)
    k = len(HALF_OCTAVE_EDGES)
    n = len(fleet.cells)
    cell = np.repeat(np.arange(n), 3 * k)
    level = np.tile(np.repeat(np.arange(3), k), n)
    ib = np.tile(np.arange(k), 3 * n)
    p_ib = normal_mass(lo[ib], hi[ib], mu[cell, 0], sig[cell, 0])
    keep = p_ib > TAIL
    cell, level, ib, p_ib = cell[keep], level[keep], ib[keep], p_ib[keep]
    mid = _isl_mid()
    m = mu[cell, 2] + np.array(LEVEL_SHIFT[2])[level] + SLOPE * (np.log(mid[ib]) - mu[cell, 0])
    s = np.sqrt(np.maximum(sig[cell, 2] ** 2 - (SLOPE * sig[cell, 0]) ** 2, TTFT_SIGMA_MIN**2))
    lo_b = np.floor((m - SIGMAS * s) / LN_G).astype(np.int64)
    hi_b = np.floor((m + SIGMAS * s) / LN_G).astype(np.int64)
    idx, b = _expand(lo_b, hi_b)
    p = p_ib[idx] * normal_mass(b * LN_G, (b + 1) * LN_G, m[idx], s[idx])
    x = mid[ib[idx]]
    y = np.round(2 * np.exp((b + 1) * LN_G) / (GAMMA + 1), 3)
    return pd.DataFrame(
        {
            "cell": cell[idx],
            "level": level[idx],
            "ib": ib[idx],
            "b": b,
            "p": p,
            "vmax": np.round(np.exp((b + 0.8) * LN_G), 3),
            "x": x,
            "y": y,
        }
    )


def _gaps(fleet: Fleet) -> tuple[pd.DataFrame, np.ndarray]:
    """Per-token gaps per output-position bin (gap k follows token k, so a request of o tokens
    has o - 1) and gap bucket; and each cell's gaps per request."""
    mu, sig = _cell_arrays(fleet)
    n = len(fleet.cells)
    q = (np.arange(200) + 0.5) / 200  # the OSL distribution at 200 quantiles
    from statistics import NormalDist

    z = np.array([NormalDist().inv_cdf(v) for v in q])
    osl = np.maximum(np.round(np.exp(mu[:, 1:2] + sig[:, 1:2] * z[None, :])), 1)  # n × 200
    edges = np.array(POSITION_EDGES, dtype=np.float64)
    upper = np.r_[edges[1:], np.inf]
    last = osl[:, :, None] - 1  # the last gap's position
    per_bin = np.clip(np.minimum(last, upper - 1) - edges + 1, 0, None).mean(axis=1)  # n × 13
    gap_mean = per_bin.sum(axis=1)
    k = len(POSITION_EDGES)
    cell = np.repeat(np.arange(n), 3 * k)
    level = np.tile(np.repeat(np.arange(3), k), n)
    pb = np.tile(np.arange(k), 3 * n)
    share = per_bin[cell, pb] / np.maximum(gap_mean[cell], 1e-300)
    keep = share > TAIL
    cell, level, pb, share = cell[keep], level[keep], pb[keep], share[keep]
    m = mu[cell, 3] + np.array(LEVEL_SHIFT[3])[level]
    s = np.full(len(m), GAP_SIGMA)  # one token's gap varies more than a request's mean ITL
    lo_b = np.floor((m - SIGMAS * s) / LN_G).astype(np.int64)
    hi_b = np.floor((m + SIGMAS * s) / LN_G).astype(np.int64)
    idx, b = _expand(lo_b, hi_b)
    p = share[idx] * normal_mass(b * LN_G, (b + 1) * LN_G, m[idx], s[idx])
    frame = pd.DataFrame(
        {
            "cell": cell[idx],
            "level": level[idx],
            "pb": pb[idx],
            "b": b,
            "p": p,
            "vmax": np.round(np.exp((b + 0.8) * LN_G), 3),
        }
    )
    return frame, gap_mean


KIND_KEYS = {  # bins that key a row beside the dimensions, in the rollup's order
    "values": ["measure", "b"],
    "shapes": ["ib", "ob"],
    "ttft": ["ib", "b"],
    "gaps": ["pb", "b"],
}
KIND_EXTRA = {
    "values": ["vmax", "vmid"],
    "shapes": [],
    "ttft": ["vmax", "x", "y"],
    "gaps": ["vmax"],
}
# Within a cell (or group) and load level, one distribution per: measure for values, the whole
# (ib, ob) grid for shapes, the whole (ib, b) grid for ttft, the (pb, b) grid for gaps.
KIND_GROUP = {"values": ["measure"], "shapes": [], "ttft": [], "gaps": []}


def distributions(fleet: Fleet) -> Distributions:
    """Every kind's bucket distributions per cell (full grain), per group of cells without
    tenant (hourly), and per group over a day's load levels (daily)."""
    d = Distributions()
    gaps, d.gap_mean = _gaps(fleet)
    raw = {"values": _values(fleet), "shapes": _shapes(fleet), "ttft": _ttft(fleet), "gaps": gaps}
    grp = fleet.cells["grp"].to_numpy()
    in_grp = fleet.cells["in_grp"].to_numpy()
    # The gaps of a group mix its cells by their gaps, not their requests.
    gap_w = fleet.cells["share"].to_numpy() * d.gap_mean
    gap_in_grp = gap_w / np.bincount(grp, weights=gap_w)[grp]
    share_lv = np.bincount(fleet.levels, weights=fleet.shape, minlength=3)  # a day's levels
    for kind, frame in raw.items():
        keys, extra, per = KIND_KEYS[kind], KIND_EXTRA[kind], KIND_GROUP[kind]
        has_level = "level" in frame.columns
        if not has_level:  # shapes: the same at every load level
            frame = frame.assign(level=0)
        d.full[kind] = _quantize(frame.copy(), ["cell", "level", *per], keys[len(per) :])
        weight = (gap_in_grp if kind == "gaps" else in_grp)[frame["cell"].to_numpy()]
        nt = _mix(
            frame.assign(grp=grp[frame["cell"].to_numpy()]), weight, ["grp", "level", *keys], extra
        )
        d.nt[kind] = _quantize(nt.copy(), ["grp", "level", *per], keys[len(per) :])
        lv_w = share_lv[nt["level"].to_numpy()] if has_level else np.ones(len(nt))
        day = _mix(nt, lv_w, ["grp", *keys], extra).assign(level=0)
        d.day[kind] = _quantize(day, ["grp", *per], keys[len(per) :])
    return d


# ------------------------------------------------------------ generation (SQL in DuckDB)


@dataclass
class Generated:
    """What the generator made and how long it took."""

    end: datetime
    days: int
    seconds: dict[str, float] = field(default_factory=dict)
    rows: dict[str, int] = field(default_factory=dict)
    requests: int = 0
    checks: dict[str, object] = field(default_factory=dict)


def _register(con: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame) -> None:
    con.register("_frame", frame)
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _frame")
    con.unregister("_frame")


def _counts(
    con: duckdb.DuckDBPyConnection,
    fleet: Fleet,
    gap_mean: np.ndarray,
    start: datetime,
    hours: int,
    scale: float,
    tz: str,
) -> None:
    """sim_counts: requests per (hour, cell), summing to each day's requests exactly; sim_full
    adds the gap counts and random offsets; sim_nt and sim_day: sums per group of cells."""
    cells = fleet.cells[["cell", "grp", "share"]].assign(gap_mean=gap_mean)
    _register(con, "sim_cells", cells)
    _register(
        con,
        "sim_shape",
        pd.DataFrame({"lh": np.arange(24), "f": fleet.shape, "level": fleet.levels}),
    )
    _register(con, "sim_week", pd.DataFrame({"dow": list(WEEKDAY), "wf": list(WEEKDAY.values())}))
    con.execute(
        "CREATE OR REPLACE TEMP TABLE sim_hours AS SELECT h AS hour, "
        "timezone(?, date_trunc('day', timezone(?, h))) AS day, hour(timezone(?, h)) AS lh, "
        "isodow(timezone(?, h)) AS dow FROM (SELECT ?::TIMESTAMPTZ + to_hours(i) AS h "
        "FROM range(?) t(i))",
        [tz, tz, tz, tz, start, hours],
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE sim_x AS SELECT h.hour, h.day, s.level, c.cell, c.grp, "
        "? * w.wf * s.f * c.share AS x, c.gap_mean FROM sim_hours h JOIN sim_shape s USING (lh) "
        "JOIN sim_week w USING (dow) CROSS JOIN sim_cells c",
        [PER_DAY * scale],
    )
    # Floors, then each day's remainder to its largest cell-hour: the day sums to round(Σ x).
    con.execute(
        "CREATE OR REPLACE TEMP TABLE sim_counts AS SELECT hour, day, level, cell, grp, "
        "(floor(x) + CASE WHEN rank = 1 THEN target - floors ELSE 0 END)::BIGINT AS n, gap_mean "
        "FROM (SELECT *, row_number() OVER (PARTITION BY day ORDER BY x DESC, cell) AS rank, "
        "round(sum(x) OVER (PARTITION BY day)) AS target, "
        "sum(floor(x)) OVER (PARTITION BY day) AS floors FROM sim_x)"
    )
    con.execute("DROP TABLE sim_x")
    # Random offsets per cell and hour (a hash, so a rerun makes the same file), and the
    # gaps: requests x GAP_SHARE x the cell's gaps per request.
    con.execute(
        "CREATE OR REPLACE TEMP TABLE sim_full AS SELECT hour, day, level, cell, grp, n, "
        "(hash(hour, cell, 1) % 1000003)::DOUBLE / 1000003 AS u, "
        f"floor(n * {GAP_SHARE} * gap_mean + (hash(hour, cell, 2) % 1000003)::DOUBLE / 1000003)"
        "::BIGINT AS m FROM sim_counts"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE sim_nt AS SELECT hour, day, any_value(level) AS level, "
        "grp, sum(n)::BIGINT AS n, sum(m)::BIGINT AS m, "
        "(hash(hour, grp, 3) % 1000003)::DOUBLE / 1000003 AS u FROM sim_full GROUP BY ALL"
    )
    con.execute(
        "CREATE OR REPLACE TEMP TABLE sim_day AS SELECT day, 0 AS level, grp, "
        "sum(n)::BIGINT AS n, sum(m)::BIGINT AS m, "
        "(hash(day, grp, 4) % 1000003)::DOUBLE / 1000003 AS u FROM sim_nt GROUP BY ALL"
    )


DIM_COLS = "model, engine, gateway, tenant, status"


def _dist_table(
    con: duckdb.DuckDBPyConnection, fleet: Fleet, name: str, frame: pd.DataFrame, key: str
) -> None:
    """A distribution with its cells' (or groups') dimension columns."""
    _register(con, "_dist", frame)
    dims = fleet.cells[["cell", "grp", "model", "engine", "gateway", "tenant", "status"]]
    if key == "grp":
        dims = dims.drop_duplicates("grp").drop(columns=["cell", "tenant"])
    _register(con, "_dims", dims)
    cols = "model, engine, gateway, status" + (", tenant" if key == "cell" else "")
    con.execute(
        f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT d.*, {cols} FROM _dist d "
        f"JOIN _dims USING ({key})"
    )
    con.execute("DROP TABLE _dist")
    con.execute("DROP TABLE _dims")


# What each kind's rows hold beyond the time, the dimensions and the keys, from the count `n`.
KIND_SELECT = {
    "values": "measure::SMALLINT, b::SMALLINT, n, vmax, n * vmid, n::DOUBLE",
    "shapes": "ib::SMALLINT, ob::SMALLINT, n, n::DOUBLE",
    "ttft": "ib::SMALLINT, b::SMALLINT, n, vmax, n * x, n * y, n * x * y, n * x * x, n::DOUBLE",
    "gaps": "pb::SMALLINT, b::SMALLINT, n, vmax, n::DOUBLE",
}
TIER_PREFIX = {"full": "rollup_", "nt": "rollup_nt_", "day": "rollup_day_"}
# Every rollup table's prefix: the tiers above and the two derived from the daily one.
ALL_PREFIXES = (*TIER_PREFIX.values(), "rollup_dme_", "rollup_dall_")


def _insert(
    con: duckdb.DuckDBPyConnection, tier: str, kind: str, lo: datetime, hi: datetime
) -> None:
    """One tier's rows of `kind` for the hours (days) in [lo, hi): each bucket's count is how
    many integers N x c crosses from c_lo to c_hi, with the cell-hour's random offset."""
    counts = {"full": "sim_full", "nt": "sim_nt", "day": "sim_day"}[tier]
    time_col = "day" if tier == "day" else "hour"
    key = "cell" if tier == "full" else "grp"
    total = "m" if kind == "gaps" else "n"
    dims = DIM_COLS if tier == "full" else DIM_COLS.replace("tenant, ", "")
    table = f"{TIER_PREFIX[tier]}{kind}"
    # Shapes do not change with load, and a day mixes its load levels: no level to match.
    level = "" if kind == "shapes" or tier == "day" else " AND p.level = c.level"
    con.execute(
        f"INSERT INTO {table} SELECT {time_col}, {dims}, {KIND_SELECT[kind]} FROM ("
        f"SELECT c.{time_col}, p.*, (floor(c.{total} * p.c_hi + (c.u + p.phi) % 1.0) "
        f"- floor(c.{total} * p.c_lo + (c.u + p.phi) % 1.0))::BIGINT AS n "
        f"FROM {counts} c JOIN dist_{tier}_{kind} p ON p.{key} = c.{key}{level} "
        f"WHERE c.{time_col} >= ? AND c.{time_col} < ?) WHERE n > 0 ORDER BY {time_col}",
        [lo, hi],
    )


def generate(path: Path, days: int, scale: float, tz: str, log=print) -> Generated:
    """Write the simulated year into a new, migrated database file at `path`."""
    end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
    start = end - timedelta(days=days)
    out = Generated(end=end, days=days)
    t0 = time.perf_counter()
    fleet = build_fleet()
    dist = distributions(fleet)
    out.seconds["distributions"] = time.perf_counter() - t0
    log(
        f"fleet: {len(fleet.cells)} cells (tenant, engine, gateway, status), "
        f"{fleet.cells['grp'].nunique()} without tenant; distributions in "
        f"{out.seconds['distributions']:.1f} s "
        f"({sum(len(f) for t in (dist.full, dist.nt, dist.day) for f in t.values()):,} buckets)"
    )
    with Database(path).open() as db:
        cur = db.cursor()
        for i, name in enumerate(fleet.engines["engine"]):
            profile = list(DEMO_PROFILES.values())[i % len(DEMO_PROFILES)]
            put_profile(cur, name, dict(profile), end)
    con = duckdb.connect(str(path))
    try:
        t1 = time.perf_counter()
        _counts(con, fleet, dist.gap_mean, start, days * 24, scale, tz)
        for tier, tables in (("full", dist.full), ("nt", dist.nt), ("day", dist.day)):
            for kind, frame in tables.items():
                _dist_table(
                    con, fleet, f"dist_{tier}_{kind}", frame, "cell" if tier == "full" else "grp"
                )
        out.seconds["counts"] = time.perf_counter() - t1
        out.requests = int(con.execute("SELECT sum(n) FROM sim_counts").fetchone()[0])
        spans = {
            "day": (start, days, timedelta(days=7)),
            "nt": (max(start, end - timedelta(days=NT_DAYS)), None, timedelta(days=1)),
            "full": (max(start, end - timedelta(days=FULL_DAYS)), None, timedelta(days=1)),
        }
        for tier, (lo, _, step) in spans.items():
            t2 = time.perf_counter()
            # The daily tier's keys are day starts: its first day may begin before `start`.
            at = lo - timedelta(days=1) if tier == "day" else lo
            while at < end:
                nxt = min(at + step, end)
                for kind in KIND_KEYS:
                    _insert(con, tier, kind, at, nxt)
                at = nxt
            out.seconds[tier] = time.perf_counter() - t2
            log(f"  {tier}: {out.seconds[tier]:.0f} s")
        con.execute(
            "INSERT INTO rollup_hours SELECT hour, day, 'sealed', NULL, hour >= ?, hour >= ?, "
            "true, get_current_timestamp() FROM sim_hours",
            [end - timedelta(days=FULL_DAYS), end - timedelta(days=NT_DAYS)],
        )
        out.checks = check(con)
        # The derived daily tiers (by model and engine; the whole fleet), as the app's
        # rebuilds keep them: from the daily rows, a week of days per statement.
        t4 = time.perf_counter()
        days_all = [
            r[0] for r in con.execute("SELECT DISTINCT day FROM sim_hours ORDER BY 1").fetchall()
        ]
        for i in range(0, len(days_all), 7):
            tiers.derive(con, days_all[i : i + 7])
        out.seconds["derived"] = time.perf_counter() - t4
        log(f"  derived: {out.seconds['derived']:.0f} s")
        t3 = time.perf_counter()
        con.execute("CHECKPOINT")
        out.seconds["checkpoint"] = time.perf_counter() - t3
        for prefix in ALL_PREFIXES:
            for kind in KIND_KEYS:
                table = f"{prefix}{kind}"
                out.rows[table] = int(con.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
        out.rows["rollup_hours"] = int(
            con.execute("SELECT count(*) FROM rollup_hours").fetchone()[0]
        )
    finally:
        con.close()
    out.seconds["total"] = time.perf_counter() - t0
    return out


def check(con: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """The generated rows are consistent: per tier, kind and hour (day), the rows count the
    requests (gaps) the counts say; n equals w; vmax lies in its bucket, and so does vsum / n
    for the latencies (a sample of 200,000 rows per table)."""
    out = {"hours_whose_counts_differ": 0, "rows_with_n_not_w": 0}
    out |= {"sampled_vmax_outside_bucket": 0, "sampled_vsum_outside_bucket": 0}
    counts = {"full": "sim_full", "nt": "sim_nt", "day": "sim_day"}
    for tier, prefix in TIER_PREFIX.items():
        key = "day" if tier == "day" else "hour"
        for kind in KIND_KEYS:
            total = "m" if kind == "gaps" else "n"
            where = "WHERE measure = 0" if kind == "values" else ""
            out["hours_whose_counts_differ"] += int(
                con.execute(
                    f"SELECT count(*) FROM (SELECT hour AS {key}, sum(n) AS s FROM {prefix}{kind} "
                    f"{where} GROUP BY 1) a JOIN (SELECT {key}, sum({total}) AS s "
                    f"FROM {counts[tier]} GROUP BY 1) b USING ({key}) WHERE a.s <> b.s"
                ).fetchone()[0]
            )
            out["rows_with_n_not_w"] += int(
                con.execute(f"SELECT count(*) FROM {prefix}{kind} WHERE n <> w").fetchone()[0]
            )
            if kind != "shapes":
                out["sampled_vmax_outside_bucket"] += int(
                    con.execute(
                        f"SELECT count(*) FROM (FROM {prefix}{kind} USING SAMPLE 200000 ROWS) "
                        f"WHERE {bucket_sql('vmax')} <> b"
                    ).fetchone()[0]
                )
        out["sampled_vsum_outside_bucket"] += int(
            con.execute(
                f"SELECT count(*) FROM (FROM {prefix}values USING SAMPLE 200000 ROWS) "
                f"WHERE measure >= 2 AND {bucket_sql('vsum / n')} <> b"
            ).fetchone()[0]
        )
    return out


def occupancy(con: duckdb.DuckDBPyConnection, table_prefix: str = "rollup_") -> list[tuple]:
    """Rows per (hour, dimensions) cell of the full-grain tables, by the cell's requests that
    hour: what real traffic occupies, to compare the demo's data with the simulated year."""
    band = (
        "CASE WHEN req < 100 THEN '<100' WHEN req < 1000 THEN '100-1k' "
        "WHEN req < 10000 THEN '1k-10k' WHEN req < 100000 THEN '10k-100k' ELSE '>=100k' END"
    )
    p = table_prefix
    per_kind = " UNION ALL ".join(
        f"SELECT '{k}' AS kind, hour, {DIM_COLS}, count(*) AS r FROM {p}{k} GROUP BY ALL"
        for k in KIND_KEYS
    )
    sql = (
        f"WITH req AS (SELECT hour, {DIM_COLS}, sum(n) AS req FROM {p}values "
        f"WHERE measure = 0 GROUP BY ALL), k AS ({per_kind}) "
        f"SELECT {band} AS band, kind, count(*) AS cells, round(avg(r), 1) AS rows_per_cell "
        "FROM k JOIN req USING (hour, model, engine, gateway, tenant, status) "
        "GROUP BY ALL ORDER BY min(req), kind"
    )
    return con.execute(sql).fetchall()


def demo_occupancy(rows: int = 2_000_000, days: int = 2) -> list[tuple]:
    """`occupancy` of the demo's traffic (`tokenshape demo`'s generator, every request kept,
    rolled up by the app itself): the calibration the simulated year's distributions follow."""
    from app.services import demo

    with tempfile.TemporaryDirectory(prefix="tokenshape-year-demo-") as tmp:
        path = Path(tmp) / "demo.duckdb"
        end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        with Database(path).open() as db:
            demo.seed(db, requests=rows, sample_rate=1.0, days=days, end=end)
        with duckdb.connect(str(path)) as con:
            return occupancy(con)


# ------------------------------------------------------------------- measurement (HTTP)

PAGES = ("/", "/shapes", "/latency", "/traffic", "/rightsizing", "/seasonal", "/reports", "/admin")
SKIP_API = ("/api/tokens", "/api/users", "/api/health", "/api/admin", "/api/performance")


@dataclass
class Window:
    """A window as the dashboard's URL and the API's parameters give it."""

    name: str
    page: dict[str, str]
    api: dict[str, str]


def windows(end: datetime) -> list[Window]:
    """The reference (24 h) and the windows of the bar, and a tenant filter over 180 days."""
    iso = lambda t: t.strftime("%Y-%m-%dT%H:%M")  # noqa: E731
    out = [
        Window("24h (reference)", {"window": "24h"}, {"start": iso(end - timedelta(days=1))}),
        Window("30d", {"window": "30d"}, {"start": iso(end - timedelta(days=30))}),
    ]
    start = end - timedelta(days=365)
    out.append(
        Window(
            "365d",
            {"window": "custom", "start": iso(start), "end": iso(end), "weeks": "8"},
            {"start": iso(start), "end": iso(end)},
        )
    )
    start = end - timedelta(days=180)
    out.append(
        Window(
            "180d, tenant t00",
            {"window": "custom", "start": iso(start), "end": iso(end), "tenant": "t00"},
            {"start": iso(start), "end": iso(end), "tenant": "t00"},
        )
    )
    return out


def _components(node, found: dict) -> None:
    if isinstance(node, list):
        for item in node:
            _components(item, found)
    elif isinstance(node, dict):
        props = node.get("props")
        if isinstance(props, dict):
            if isinstance(props.get("id"), str):
                found[props["id"]] = props
            for value in props.values():
                _components(value, found)


def _text(node, out: list[str]) -> None:
    if isinstance(node, str):
        out.append(node)
    elif isinstance(node, list):
        for item in node:
            _text(item, out)
    elif isinstance(node, dict):
        props = node.get("props")
        if isinstance(props, dict):
            _text(props.get("children"), out)


def _routing(path: str, search: str) -> dict:
    return {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [
            {"id": "_pages_content", "property": "children"},
            {"id": "_pages_store", "property": "data"},
        ],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": path},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "changedPropIds": ["_pages_location.pathname"],
        "state": [],
    }


def _outputs(output: str):
    if output.startswith(".."):
        return [
            {"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]}
            for o in output.strip(".").split("...")
        ]
    name, prop = output.rsplit(".", 1)
    return {"id": name, "property": prop}


def page_load(client: httpx.Client, deps: list, path: str, query: dict) -> dict:
    """One page's data over HTTP: the routing callback (the layout and its queries), then
    every callback the layout fires on load, one after another. Times in ms."""
    search = "?" + urlencode(query)
    t0 = time.perf_counter()
    answer = client.post("/_dash-update-component", json=_routing(path, search), timeout=600)
    layout_ms = (time.perf_counter() - t0) * 1000
    if answer.status_code != 200:
        raise RuntimeError(f"{path}: the layout answered {answer.status_code}: {answer.text[:300]}")
    layout = answer.json()["response"]["_pages_content"]["children"]
    found: dict = {}
    _components(layout, found)
    calls: dict[str, float] = {}
    for dep in deps:
        inputs = dep.get("inputs", [])
        if dep.get("prevent_initial_call") or dep.get("clientside_function") or not inputs:
            continue
        if not all(isinstance(i["id"], str) and i["id"] in found for i in inputs):
            continue
        payload = {
            "output": dep["output"],
            "outputs": _outputs(dep["output"]),
            "inputs": [{**i, "value": found[i["id"]].get(i["property"])} for i in inputs],
            "changedPropIds": [],
            "state": [
                {**s, "value": found.get(s["id"], {}).get(s["property"])}
                for s in dep.get("state", [])
                if isinstance(s["id"], str)
            ],
        }
        t1 = time.perf_counter()
        reply = client.post("/_dash-update-component", json=payload, timeout=600)
        calls[inputs[0]["id"]] = (time.perf_counter() - t1) * 1000
        if reply.status_code not in (200, 204):
            raise RuntimeError(f"{path}: callback {dep['output']} answered {reply.status_code}")
    words: list[str] = []
    _text(layout, words)
    notes = sorted(
        {w for w in words if "Answered from" in w or "not counted" in w or "rollups" in w}
    )
    return {
        "layout_ms": layout_ms,
        "callbacks_ms": calls,
        "total_ms": layout_ms + sum(calls.values()),
        "notes": notes,
        "empty": any("No requests in this window" in w or "No traffic yet" in w for w in words),
    }


def api_routes(client: httpx.Client, engine: str) -> list[tuple[str, bool]]:
    """(route, takes a window) for every GET route under /api that reads the data."""
    schema = client.get("/openapi.json").json()
    out = []
    for path, ops in schema["paths"].items():
        if not path.startswith("/api/") or "get" not in ops or path.startswith(SKIP_API):
            continue
        names = {p["name"] for p in ops["get"].get("parameters", [])}
        out.append((path.replace("{name}", engine), "start" in names))
    return out


def api_get(client: httpx.Client, route: str, params: dict) -> tuple[float, dict]:
    """One GET, its time in ms and its JSON."""
    t0 = time.perf_counter()
    reply = client.get(route, params=params, timeout=600)
    ms = (time.perf_counter() - t0) * 1000
    if reply.status_code != 200:
        raise RuntimeError(f"{route}: {reply.status_code}: {reply.text[:300]}")
    return ms, reply.json()


def _stats(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), max(values)


def reference_scans(path: Path, end: datetime) -> dict[str, float]:
    """Bare DuckDB over the file (no server): a count(*) and the scans a 30-day and a 365-day
    window's quantiles need at least, each the median of 5 runs, ms."""
    con = duckdb.connect(str(path), read_only=True)
    queries = {
        "count(*) of rollup_day_values": ("SELECT count(*) FROM rollup_day_values", []),
        "365 d: Σw, max per (measure, b) of rollup_day_values": (
            "SELECT measure, b, sum(w), max(vmax) FROM rollup_day_values WHERE hour >= ? "
            "GROUP BY ALL",
            [end - timedelta(days=366)],
        ),
        "30 d: the same over rollup_day_values": (
            "SELECT measure, b, sum(w), max(vmax) FROM rollup_day_values WHERE hour >= ? "
            "GROUP BY ALL",
            [end - timedelta(days=30)],
        ),
        "30 d: the same over rollup_nt_values (hourly)": (
            "SELECT measure, b, sum(w), max(vmax) FROM rollup_nt_values WHERE hour >= ? "
            "GROUP BY ALL",
            [end - timedelta(days=30)],
        ),
    }
    out = {}
    try:
        for name, (sql, params) in queries.items():
            con.execute(sql, params).fetchall()
            runs = []
            for _ in range(5):
                t0 = time.perf_counter()
                con.execute(sql, params).fetchall()
                runs.append((time.perf_counter() - t0) * 1000)
            out[name] = statistics.median(runs)
    finally:
        con.close()
    return out


def measure(path: Path, end: datetime, runs: int, tz: str, log=print) -> dict:
    """Serve the file and time every page and API route per window, alternating windows."""
    result: dict = {"reference_scans": reference_scans(path, end)}
    for name, ms in result["reference_scans"].items():
        log(f"  bare DuckDB, {name}: {ms:.0f} ms")
    port = free_port()
    logfile = open(path.with_suffix(".server.log"), "wb")  # noqa: SIM115
    t0 = time.perf_counter()
    proc = start_server(path, port, logfile, TOKENSHAPE_TZ=tz)
    result["server_start_s"] = time.perf_counter() - t0
    log(f"  server healthy after {result['server_start_s']:.1f} s")
    wins = windows(end)
    pages: dict = {}
    api: dict = {}
    first: dict = {}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            deps = client.get("/_dash-dependencies").json()
            engine = client.get("/api/engines").json()[0]["name"]
            routes = api_routes(client, engine)
            # The first visit of each page and window after start (cold: nothing kept, plans
            # not computed), then the timed ones (warm, as a second visit).
            for path_ in PAGES:
                for w in wins:
                    got = page_load(client, deps, path_, w.page)
                    first.setdefault(path_, {})[w.name] = got["total_ms"]
            for run in range(runs):
                for path_ in PAGES:
                    for w in wins:
                        got = page_load(client, deps, path_, w.page)
                        entry = pages.setdefault(path_, {}).setdefault(w.name, {"runs": []})
                        entry["runs"].append(got["total_ms"])
                        entry.setdefault("layout", []).append(got["layout_ms"])
                        for cb, ms in got["callbacks_ms"].items():
                            entry.setdefault("callbacks", {}).setdefault(cb, []).append(ms)
                        entry["notes"], entry["empty"] = got["notes"], got["empty"]
                for route, windowed in routes:
                    for w in wins:
                        params = w.api if windowed else {}
                        if run == 0:
                            api_get(client, route, params)  # warm
                        ms, body = api_get(client, route, params)
                        entry = api.setdefault(route, {}).setdefault(w.name, {"runs": []})
                        entry["runs"].append(ms)
                        entry["windowed"] = windowed
                        if isinstance(body, dict) and body.get("answered_from"):
                            entry["answered_from"] = body["answered_from"]
                log(f"  run {run + 1}/{runs} done")
    finally:
        stop_server(proc)
        logfile.close()
    result["pages"], result["api"], result["windows"] = pages, api, [w.name for w in wins]
    result["first"] = first
    return result


# ---------------------------------------------------- the dense worst case, extrapolated

GRID = np.array([1, 3, 10, 30, 100, 300, 1e3, 3e3, 1e4, 3e4, 1e5, 3e5, 1e6, 3e6, 1e7])


def occupancy_curve(tier: dict[str, pd.DataFrame], key: str, gap_mean: float) -> np.ndarray:
    """Expected rows per cell (all four kinds) at each request count of GRID, averaged over
    the fleet's cells at load level 1 (the daily tier's only level is 0): a bucket of
    probability p is occupied with probability min(1, N p), N its distribution's count."""
    out = np.zeros(len(GRID))
    for kind, frame in tier.items():
        level = frame[frame["level"] == (1 if (frame["level"] == 1).any() else 0)]
        p = (level["c_hi"] - level["c_lo"]).to_numpy()
        cells = level[key].nunique()
        scale = GAP_SHARE * gap_mean if kind == "gaps" else 1.0
        for i, n in enumerate(GRID):
            out[i] += np.minimum(1.0, n * scale * p).sum() / cells
    return out


def dense(dist: Distributions, bytes_per_row: float, scale: float = 1.0) -> dict[str, float]:
    """The issue's dense worst case: 20 engines x 10 models x 5 gateways x 50 tenants x 3
    statuses, every combination serving traffic (tenants Zipf-skewed, statuses 97/2/1%), at
    the average hour of 1 B requests/day; its rows from this fleet's occupancy per cell at the
    same request count (interpolated in log-log), its bytes at `bytes_per_row`."""
    gap_mean = float(np.mean(dist.gap_mean))
    zipf = 1.0 / np.arange(1, 51) ** 1.1
    zipf /= zipf.sum()
    status = np.array([s for _, s, _, _ in STATUSES])
    per_hour = PER_DAY * scale / 24
    out: dict[str, float] = {}
    for tier, frames, key, combos, per_time, shares in (
        ("full", dist.full, "cell", 20 * 10 * 5, per_hour, np.outer(zipf, status).ravel()),
        ("nt", dist.nt, "grp", 20 * 10 * 5, per_hour, status),
        ("day", dist.day, "grp", 20 * 10 * 5, per_hour * 24, status),
    ):
        curve = occupancy_curve(frames, key, gap_mean)
        n = per_time * shares / combos
        rows = combos * np.exp(np.interp(np.log(n), np.log(GRID), np.log(curve))).sum()
        out[f"{tier}_rows_per_{'day' if tier == 'day' else 'hour'}"] = rows
    out["full_rows_14d"] = out["full_rows_per_hour"] * 24 * FULL_DAYS
    out["nt_rows_90d"] = out["nt_rows_per_hour"] * 24 * NT_DAYS
    out["day_rows_365d"] = out["day_rows_per_day"] * 365
    total = out["full_rows_14d"] + out["nt_rows_90d"] + out["day_rows_365d"]
    out["rows"] = total
    out["bytes"] = total * bytes_per_row
    return out


# ------------------------------------------------------------------------- the report


def _row(name: str, per: dict, wins: list[str]) -> str:
    ref = statistics.median(per[wins[0]]["runs"])
    cells = []
    for w in wins:
        med, top = _stats(per[w]["runs"])
        cells.append(f"{med:,.0f} / {top:,.0f}" + (f" ({med / ref:.1f}x)" if w != wins[0] else ""))
    return f"| {name} | " + " | ".join(cells) + " |"


def report(gen: Generated | None, size: int, meas: dict | None, log=print) -> None:
    """The figures as Markdown tables (for docs/performance.md)."""
    if gen is not None:
        log(
            f"\nfile: {size / 1e9:.2f} GB after CHECKPOINT; {gen.requests:,} requests simulated "
            f"over {gen.days} days ending {gen.end:%Y-%m-%d %H:00} UTC"
        )
        log("generation: " + ", ".join(f"{k} {v:.0f} s" for k, v in gen.seconds.items()))
        log("| table | rows |\n|---|---:|")
        for table, n in gen.rows.items():
            log(f"| `{table}` | {n:,} |")
        log(f"| all rollup rows | {sum(v for k, v in gen.rows.items() if k != 'rollup_hours'):,} |")
        log(f"checks: {gen.checks}")
    if meas is None:
        return
    wins = meas["windows"]
    head = "| page | " + " | ".join(f"{w}: median / max ms" for w in wins) + " |"
    log("\n" + head + "\n|---|" + "---:|" * len(wins))
    for name, per in meas["pages"].items():
        log(_row(name, per, wins))
    log("\nfirst load after the server started (cold), ms:")
    log("| page | " + " | ".join(wins) + " |\n|---|" + "---:|" * len(wins))
    for name, per in meas.get("first", {}).items():
        log(f"| {name} | " + " | ".join(f"{per[w]:,.0f}" for w in wins) + " |")
    log("\n" + head.replace("page", "API route") + "\n|---|" + "---:|" * len(wins))
    for name, per in meas["api"].items():
        log(_row(name, per, wins))
    log("\nslowest callbacks per page and window (median ms):")
    for name, per in meas["pages"].items():
        for w in wins:
            parts = [f"layout {statistics.median(per[w]['layout']):,.0f}"] + [
                f"{cb} {statistics.median(v):,.0f}" for cb, v in per[w].get("callbacks", {}).items()
            ]
            note = "; EMPTY" if per[w].get("empty") else ""
            log(f"  {name} {w}: " + ", ".join(parts) + note)
    log("\nanswered_from (API) per window:")
    for name, per in meas["api"].items():
        for w in wins:
            if per[w].get("answered_from"):
                log(f"  {name} {w}: {per[w]['answered_from']}")
    log("\npage captions about tiers:")
    for name, per in meas["pages"].items():
        for w in wins:
            if per[w].get("notes"):
                log(f"  {name} {w}: {per[w]['notes']}")
    worst = {
        w: max(
            statistics.median(per[w]["runs"])
            for group in ("pages", "api")
            for per in meas[group].values()
        )
        for w in wins
    }
    log(f"\nslowest median per window: {', '.join(f'{w} {v:,.0f} ms' for w, v in worst.items())}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=365, help="days simulated (default 365)")
    parser.add_argument("--scale", type=float, default=1.0, help="times 1 B requests a day")
    parser.add_argument("--out", type=Path, help="the database file (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the file at the end")
    parser.add_argument("--reuse", action="store_true", help="measure an existing --out file")
    parser.add_argument("--tz", default="UTC", help="time zone of the daily tier's days")
    parser.add_argument("--runs", type=int, default=5, help="timed loads per page and window")
    parser.add_argument("--no-measure", action="store_true", help="generate only")
    parser.add_argument("--json", type=Path, help="write the figures here as JSON too")
    parser.add_argument(
        "--demo-occupancy",
        action="store_true",
        help="only print the rows per cell-hour of 2 days of demo traffic (2M rows), and exit",
    )
    args = parser.parse_args()
    if args.demo_occupancy:
        print("demo traffic, rows per full-grain cell-hour by the cell's requests that hour:")
        for row in demo_occupancy():
            print(f"  {row}")
        return
    tmp = None
    if args.out is None:
        tmp = tempfile.mkdtemp(prefix="tokenshape-year-", dir=os.environ.get("TMPDIR", "/tmp"))
        args.out = Path(tmp) / "year.duckdb"
    args.out.parent.mkdir(parents=True, exist_ok=True)
    free = shutil.disk_usage(args.out.parent).free
    # The full year's rows per tier (docs/performance.md) at its 18.6 bytes a row, and as much
    # again for DuckDB's temporary files while it sorts: refuse unless there is room for both.
    d = min(args.days, 365)
    rows = 1.30e6 * 24 * min(d, FULL_DAYS) + 2.72e5 * 24 * min(d, NT_DAYS) + 3.71e5 * d
    need = 2 * 18.6 * rows
    print(
        f"free space at {args.out.parent}: {free / 1e9:.0f} GB (needed about {need / 1e9:.0f} GB)"
    )
    if not args.reuse and free < need:
        raise SystemExit("not enough free disk space for this run")
    gen = None
    try:
        if not args.reuse:
            if args.out.exists():
                raise SystemExit(f"{args.out} exists: remove it, or pass --reuse to measure it")
            print(
                f"generating {args.days} days at {args.scale:g} x 1 B requests/day into {args.out}"
            )
            print(f"fleet: {FLEET_DOC}")
            gen = generate(args.out, args.days, args.scale, args.tz)
            with duckdb.connect(str(args.out)) as con:
                print("occupancy (rows per full-grain cell-hour, by the cell's requests):")
                for row in occupancy(con):
                    print(f"  {row}")
        end = gen.end if gen else datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
        if gen is None:
            with duckdb.connect(str(args.out), read_only=True) as con:
                end = con.execute(
                    "SELECT max(hour) + INTERVAL 1 HOUR FROM rollup_hours"
                ).fetchone()[0]
        size = args.out.stat().st_size
        meas = None if args.no_measure else measure(args.out, end, args.runs, args.tz)
        report(gen, size, meas)
        with duckdb.connect(str(args.out), read_only=True) as con:
            rows = sum(
                int(con.execute(f"SELECT count(*) FROM {p}{k}").fetchone()[0])
                for p in ALL_PREFIXES
                for k in KIND_KEYS
            )
        worst = dense(distributions(build_fleet()), size / rows, args.scale)
        print(
            f"\ndense worst case (every engine x model x gateway x tenant x status), at this "
            f"file's {size / rows:.1f} bytes per rollup row: "
            + ", ".join(f"{k} {v:,.0f}" for k, v in worst.items())
            + f" -> {worst['bytes'] / 1e9:,.0f} GB"
        )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "generated": gen.__dict__ if gen else None,
                        "size": size,
                        "measured": meas,
                        "dense": worst,
                    },
                    default=str,
                    indent=1,
                )
            )
    finally:
        if not args.keep:
            for target in (args.out, Path(f"{args.out}.wal"), args.out.with_suffix(".server.log")):
                target.unlink(missing_ok=True)
            if tmp:
                shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
