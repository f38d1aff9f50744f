"""Benchmark vs production for one engine: the two ISL × OSL shapes on the same bins, their
total variation distance, TTFT and ITL per cell side by side, goodput of each side against the
engine's SLO, and the performance model's prediction for the production load next to both.

Production is the engine's requests from every gateway but the benchmark's, in the production
window (the last 7 days by default); the benchmark is the benchmark gateway's rows (all of them
by default), matched to the engine by its name, else by its model, else by the gateway alone,
and the comparison says which. Both sides count requests with status ok: a benchmark's failed
requests carry no token counts (ingest/formats/benchmarks.py), so errors are counted apart.
Exact, from raw rows (the heat maps read the rollups where they can, which count the same).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from app.analytics import compare as analytics
from app.analytics import goodput, mix, sampling, shapes, windows
from app.analytics.filters import Filter
from app.analytics.rollups.missing import raw_only_note
from app.analytics.shapes import HeatMap
from app.charts.style import bin_labels
from app.services import slo
from app.services.perfmodel import PerfModelError
from app.services.performance import PUBLISHED_ERROR, engine_performance
from app.services.profiles import NoProfile, load_profile
from app.sizing.slo import Fleet, Slo
from app.storage.database import Database

DEFAULT_WINDOW = timedelta(days=7)
MIN_SAMPLES = 20  # rows with a value on each side before a cell's ratio is shown
MATCH_TVD = 0.10  # total variation distance at or under which the shapes match
BINS = ("log2", "log2half")
SIDES = ("production", "benchmark")
MEASURES = ("ttft", "itl")
QUANTILES = ("p50", "p90", "p99")
IMPORT_HOW = (
    "import the benchmark with `tokenshape import profile_export.jsonl --format aiperf "
    "--gateway {gateway}` (GenAI-Perf: `--format genai-perf`)"
)


class CompareError(ValueError):
    """The comparison cannot be made as asked: `param` names the parameter to change, the
    message says why and what to do."""

    def __init__(self, param: str, message: str):
        super().__init__(message)
        self.param = param


# -- pure parts ------------------------------------------------------------------------------


def shares(counts: np.ndarray) -> np.ndarray:
    """Each cell's share of the total (all zeros for an empty map)."""
    total = float(counts.sum())
    return counts / total if total > 0 else np.zeros(counts.shape, dtype=float)


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    """Total variation distance between two heat maps on the same bins: half the summed
    absolute differences of their shares (0: the same shape, 1: no cell in common)."""
    if a.shape != b.shape:
        raise ValueError(f"heat maps on different bins: {a.shape} and {b.shape}")
    return float(0.5 * np.abs(shares(a) - shares(b)).sum())


def cell_label(edges: tuple[int, ...], i: int, j: int) -> str:
    """'ISL 256–512 × OSL 128–256'."""
    labels = bin_labels(edges)
    return f"ISL {labels[i]} × OSL {labels[j]}"


def shape_words(
    distance: float,
    production: np.ndarray,
    benchmark: np.ndarray,
    edges: tuple[int, ...],
    threshold: float = MATCH_TVD,
) -> str:
    """The verdict on the shapes in one sentence: a match within the TVD, or where the
    benchmark puts too many and too few requests (the cells that differ most)."""
    if distance <= threshold:
        return (
            f"The benchmark's shape matches production within TVD {distance:.2f} "
            f"(a match is {threshold:.2f} or less)."
        )
    p, q = shares(production), shares(benchmark)
    diff = q - p
    over = np.unravel_index(int(np.argmax(diff)), diff.shape)
    under = np.unravel_index(int(np.argmin(diff)), diff.shape)
    parts = []
    if diff[over] > 0:
        i, j = int(over[0]), int(over[1])
        parts.append(
            f"it puts {q[over]:.1%} of its requests at {cell_label(edges, i, j)}, where "
            f"production has {p[over]:.1%}"
        )
    if diff[under] < 0:
        i, j = int(under[0]), int(under[1])
        parts.append(
            f"{q[under]:.1%} at {cell_label(edges, i, j)}, where production has {p[under]:.1%}"
        )
    return (
        f"The benchmark's shape does not match production: TVD {distance:.2f} (a match is "
        f"{threshold:.2f} or less); " + ", and ".join(parts) + "."
    )


def _num(value: Any, digits: int = 3) -> float | None:
    if value is None:
        return None
    v = float(value)
    return round(v, digits) if math.isfinite(v) else None


def join_cells(
    production: pd.DataFrame,
    benchmark: pd.DataFrame,
    prod_map: np.ndarray,
    bench_map: np.ndarray,
    edges: tuple[int, ...],
    min_samples: int = MIN_SAMPLES,
) -> pd.DataFrame:
    """Both sides' cells in one frame: a row per cell either side has requests in, with each
    side's requests and share (from its heat map), rows measured, quantiles and goodput
    (columns prefixed `production_`, `benchmark_`), and `ratio_<measure>_<q>` = benchmark ÷
    production where both sides have at least `min_samples` rows measuring it (else NaN).
    The cells production sends most first."""
    p_share, b_share = shares(prod_map), shares(bench_map)
    occupied = sorted(
        {(int(i), int(j)) for i, j in zip(*np.nonzero(prod_map), strict=True)}
        | {(int(i), int(j)) for i, j in zip(*np.nonzero(bench_map), strict=True)}
    )
    base = pd.DataFrame(occupied, columns=["i", "j"], dtype="int64")
    base["isl_from"] = [edges[i] for i in base["i"]]
    base["osl_from"] = [edges[j] for j in base["j"]]
    base["shape"] = [cell_label(edges, i, j) for i, j in occupied]
    for side, frame, counts, share in (
        ("production", production, prod_map, p_share),
        ("benchmark", benchmark, bench_map, b_share),
    ):
        base[f"{side}_requests"] = [int(counts[i, j]) for i, j in occupied]
        base[f"{side}_share"] = [float(share[i, j]) for i, j in occupied]
        values = frame.drop(columns=["requests"], errors="ignore").rename(
            columns={c: f"{side}_{c}" for c in frame.columns if c not in ("i", "j")}
        )
        base = base.merge(values, on=["i", "j"], how="left")
        for c in ("ttft_n", "itl_n"):
            base[f"{side}_{c}"] = base[f"{side}_{c}"].fillna(0).astype("int64")
    for m in MEASURES:
        enough = (base[f"production_{m}_n"] >= min_samples) & (
            base[f"benchmark_{m}_n"] >= min_samples
        )
        for q in QUANTILES:
            p, b = base[f"production_{m}_{q}"], base[f"benchmark_{m}_{q}"]
            ratio = b / p.where(p > 0)
            base[f"ratio_{m}_{q}"] = ratio.where(enough)
    return base.sort_values(
        ["production_requests", "benchmark_requests", "i", "j"],
        ascending=[False, False, True, True],
        ignore_index=True,
    )


@dataclass(frozen=True)
class Headline:
    """One measure's ratio over the cells compared: the production-weighted geometric mean of
    benchmark ÷ production at p50 and p90, the cells and the share of production they hold."""

    measure: str
    cells: int
    production_share: float
    p50: float | None
    p90: float | None

    def words(self, min_samples: int) -> str:
        """'TTFT: the benchmark is 0.62× production at p50 and 0.55× at p90, over 12 cells
        holding 85% of production's requests'."""
        name = self.measure.upper()
        if not self.cells:
            return (
                f"{name}: no cell has {min_samples} or more measured requests on both sides, "
                "so no ratio is shown"
            )
        return (
            f"{name}: the benchmark is {self.p50:.2f}× production at p50 and {self.p90:.2f}× "
            f"at p90, over {self.cells} cells holding {self.production_share:.0%} of "
            "production's requests"
        )


def headline(cells: pd.DataFrame, measure: str) -> Headline:
    """The Headline of `measure` ("ttft" or "itl") over a join_cells frame."""
    both = cells[cells[f"ratio_{measure}_p50"].notna() & cells[f"ratio_{measure}_p90"].notna()]
    both = both[(both[f"ratio_{measure}_p50"] > 0) & (both[f"ratio_{measure}_p90"] > 0)]
    if not len(both):
        return Headline(measure, 0, 0.0, None, None)
    weights = both["production_requests"].to_numpy(dtype=float)
    if weights.sum() <= 0:
        weights = np.ones(len(both))

    def geo(column: str) -> float:
        return float(
            np.exp(np.average(np.log(both[column].to_numpy(dtype=float)), weights=weights))
        )

    return Headline(
        measure,
        len(both),
        float(both["production_share"].sum()),
        geo(f"ratio_{measure}_p50"),
        geo(f"ratio_{measure}_p90"),
    )


def goodput_totals(cells: pd.DataFrame) -> dict[str, Any]:
    """Goodput over a pooled goodput.by_cell frame: requests judged and not, goodput against
    the target share, and whether it is met."""
    good, missed = float(cells["good"].sum()), float(cells["missed"].sum())
    judged = good + missed
    target = (
        float((cells["target"].fillna(0) * (cells["good"] + cells["missed"])).sum()) / judged
        if judged
        else None
    )
    share = good / judged if judged else None
    return {
        "requests": _num(cells["requests"].sum()),
        "good": _num(good),
        "missed": _num(missed),
        "not_measured": _num(cells["not_measured"].sum()),
        "goodput": _num(share, 4),
        "target": _num(target, 4),
        "met": None if share is None or target is None else share >= target - 1e-12,
    }


# -- the comparison --------------------------------------------------------------------------


@dataclass
class Side:
    """What one side holds: its filter and window, gateways, how it was matched, its heat map,
    per-cell latency and goodput, overall quantiles and means, sampling and raw-only note."""

    name: str
    flt: Filter
    start: datetime | None  # the window asked, or the rows' own span when open
    end: datetime | None
    gateways: tuple[str, ...]
    match: str  # engine, model or gateway
    match_words: str
    heatmap: HeatMap
    cells: pd.DataFrame  # analytics.cell_latency
    goodput_cells: pd.DataFrame | None  # goodput.by_cell, pooled; None without an SLO
    stats: analytics.SideStats
    quantiles: dict[str, dict[str, float | None]]  # ttft_ms, itl_ms -> p50, p90, p99
    sampling: sampling.SampleInfo
    in_flight: float | None  # production: in its busiest hour; the benchmark: over its run
    in_flight_words: str
    raw_only_note: str | None = None

    @property
    def goodput(self) -> dict[str, Any] | None:
        """Goodput against the engine's SLO, None without one."""
        if self.goodput_cells is None:
            return None
        return goodput_totals(self.goodput_cells)


@dataclass
class Comparison:
    """Benchmark vs production for one engine."""

    engine: str
    bins: str
    edges: tuple[int, ...]
    production: Side
    benchmark: Side
    distance: float
    threshold: float
    shape_words: str
    min_samples: int
    cells: pd.DataFrame  # join_cells
    slo: Slo | None
    prediction: dict[str, Any] | None  # engine_performance's model and calibrated figures
    prediction_why_not: str | None
    notes: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        """Whether the benchmark's shape matches production's."""
        return self.distance <= self.threshold

    def headlines(self) -> list[Headline]:
        """TTFT's and ITL's ratio over the cells compared."""
        return [headline(self.cells, m) for m in MEASURES]


def _when(t: datetime | None) -> str:
    return t.strftime("%Y-%m-%d %H:%M UTC") if t else "open"


def _between(start: datetime | None, end: datetime | None) -> str:
    """'from A to B', 'since A', 'before B' or 'at any time'."""
    if start and end:
        return f"from {_when(start)} to {_when(end)}"
    if start:
        return f"since {_when(start)}"
    return f"before {_when(end)}" if end else "at any time"


def _normal(model: str) -> str:
    """A model name without its organisation and case: meta-llama/Llama-3.1-8B → llama-3.1-8b."""
    return model.rsplit("/", 1)[-1].lower()


def _benchmark_rows(
    db: Database, gateway: str, start: datetime | None, end: datetime | None
) -> analytics.GatewayRows:
    """The benchmark gateway's rows in its window; CompareError when it holds none there."""
    cur = db.cursor()
    rows = analytics.gateway_rows(cur, gateway, start, end)
    if not rows.rows:
        everything = analytics.gateway_rows(cur, gateway) if (start or end) else rows
        if not everything.rows:
            raise CompareError(
                "benchmark",
                f"no rows for gateway {gateway!r}: " + IMPORT_HOW.format(gateway=gateway),
            )
        raise CompareError(
            "bench_start" if start else "bench_end",
            f"gateway {gateway!r} has no rows {_between(start, end)}; its "
            f"{everything.rows:,} rows run from {_when(everything.first)} to "
            f"{_when(everything.last)}: widen bench_start and bench_end, or leave them out",
        )
    return rows


def _benchmark_filter(
    rows: analytics.GatewayRows,
    engine: str,
    start: datetime | None,
    end: datetime | None,
    production_models: list[str],
) -> tuple[Filter, str, str]:
    """The benchmark side's filter, how it was matched (engine, model or gateway) and that in
    words."""
    gateway = rows.gateway
    if engine in rows.engines:
        n = rows.engines[engine]
        words = (
            f"the rows of gateway {gateway} that name engine {engine} ({n:,} of its "
            f"{rows.rows:,} rows)"
        )
        return (
            Filter(start=start, end=end, engines=(engine,), gateways=(gateway,), statuses=("ok",)),
            "engine",
            words,
        )
    wanted = {_normal(m) for m in production_models}
    models = tuple(m for m in rows.models if _normal(m) in wanted)
    if models:
        n = sum(rows.models[m] for m in models)
        words = (
            f"the rows of gateway {gateway} for model {', '.join(models)} ({n:,} of its "
            f"{rows.rows:,} rows), matched by model: they name no engine {engine}"
        )
        return (
            Filter(start=start, end=end, models=models, gateways=(gateway,), statuses=("ok",)),
            "model",
            words,
        )
    named = ", ".join(list(rows.models)[:3])
    words = (
        f"all {rows.rows:,} rows of gateway {gateway}, matched by the gateway alone: they name "
        f"neither engine {engine} nor a model of it (they name {named})"
    )
    return Filter(start=start, end=end, gateways=(gateway,), statuses=("ok",)), "gateway", words


def _side(
    db: Database,
    name: str,
    flt: Filter,
    gateways: tuple[str, ...],
    match: str,
    match_words: str,
    bins: str,
    targets: goodput.Targets | None,
) -> Side:
    cur = db.cursor()
    hm = shapes.heatmap(cur, flt, bins=bins)
    edges = hm.isl_edges
    cells = analytics.cell_latency(cur, flt, edges)
    judged = None
    if targets is not None:
        _, judged = goodput.by_cell(cur, flt, targets, bins=bins, per_engine=False, quantiles=False)
    found = shapes.quantiles(cur, flt, exact=True)  # exact, as the per-cell quantiles
    quantiles = {m: {q: found[m][q] for q in QUANTILES} for m in ("ttft_ms", "itl_ms")}
    first, last, _ = windows.span(cur, flt)
    stats = analytics.side_stats(cur, flt)
    if name == "production":  # a window of days: its busiest hour is the load to size for
        in_flight = mix.peak_hour_in_flight(cur, flt)
        how = "mean requests in flight in the window's busiest hour"
    else:  # a run of minutes, all of it under the load it was set to
        in_flight, how = stats.in_flight, "mean requests in flight over the run"
    return Side(
        name,
        flt,
        first,
        last,
        gateways,
        match,
        match_words,
        hm,
        cells,
        judged,
        stats,
        quantiles,
        sampling.sampling(cur, flt),
        in_flight,
        how,
        raw_only_note(cur, flt, reader="the per-cell latencies and goodput read"),
    )


def _prediction(
    db: Database, engine: str, start: datetime, end: datetime
) -> tuple[dict[str, Any] | None, str | None]:
    """The model's figures for the engine's production mix and busiest hour, or why none."""
    try:
        profile = load_profile(db, engine)
    except NoProfile as exc:
        return None, str(exc)
    try:
        out = engine_performance(db, engine, profile, start=start, end=end)
    except (PerfModelError, LookupError, ValueError) as exc:
        return None, str(exc) or type(exc).__name__
    return out, None


def compare(
    db: Database,
    engine: str,
    benchmark: str,
    *,
    now: datetime,
    fleet: Fleet = Fleet(),
    start: datetime | None = None,
    end: datetime | None = None,
    bench_start: datetime | None = None,
    bench_end: datetime | None = None,
    bins: str = "log2",
    min_samples: int = MIN_SAMPLES,
    threshold: float = MATCH_TVD,
    open_start: bool = False,
) -> Comparison:
    """Benchmark gateway `benchmark` against engine `engine`'s production over [start, end)
    (default: the 7 days before `now`; `open_start`: no start at all) and the benchmark's
    [bench_start, bench_end) (default: all its rows). CompareError names what to change."""
    if not engine:
        raise CompareError("engine", "give the engine to compare (as its requests name it)")
    if not benchmark:
        raise CompareError(
            "benchmark", "give the gateway the benchmark was imported under, e.g. aiperf-replay"
        )
    if bins not in BINS:
        raise CompareError("bins", f"{bins!r}: choose log2 or log2half")
    end = end or now
    try:
        start = None if open_start else (start or end - DEFAULT_WINDOW)
    except OverflowError:  # an end in the first week of year 1
        raise CompareError("end", "too early: give a time after 2000-01-01") from None
    if start is not None and start >= end:
        raise CompareError(
            "start", f"must be before end (got {start.isoformat()} and {end.isoformat()})"
        )
    if bench_start is not None and bench_end is not None and bench_start >= bench_end:
        raise CompareError(
            "bench_start",
            f"must be before bench_end (got {bench_start.isoformat()} and {bench_end.isoformat()})",
        )
    cur = db.cursor()
    bench_rows = _benchmark_rows(db, benchmark, bench_start, bench_end)
    gateways = tuple(
        g for g in analytics.engine_gateways(cur, engine, start, end) if g != benchmark
    )
    window = _between(start, end)
    if not gateways:
        raise CompareError("engine", _no_production(db, engine, benchmark, window))
    prod_flt = Filter(start=start, end=end, engines=(engine,), gateways=gateways, statuses=("ok",))
    models = analytics.engine_models(cur, prod_flt)
    bench_flt, match, match_words = _benchmark_filter(
        bench_rows, engine, bench_start, bench_end, models
    )
    led = slo.ledger(db, fleet)
    target = led.slo_of(engine)
    targets = (
        goodput.Targets(
            {}, goodput.Target(target.ttft_ms, target.itl_ms, target.e2e_ms, target.percentile)
        )
        if target is not None
        else None
    )
    prod_words = f"engine {engine}'s requests through {', '.join(gateways)} {window}"
    production = _side(db, "production", prod_flt, gateways, "engine", prod_words, bins, targets)
    if production.heatmap.total == 0:
        raise CompareError(
            "engine",
            f"engine {engine!r} has no requests with status ok {window} outside gateway "
            f"{benchmark!r}: widen start and end",
        )
    bench = _side(db, "benchmark", bench_flt, (benchmark,), match, match_words, bins, targets)
    if bench.heatmap.total == 0:
        raise CompareError(
            "benchmark",
            f"gateway {benchmark!r} holds no request with status ok "
            f"({bench.stats.not_ok:,.0f} failed or cancelled): nothing to compare; import a "
            "run whose requests succeeded",
        )
    edges = production.heatmap.isl_edges
    distance = tvd(production.heatmap.counts, bench.heatmap.counts)
    words = shape_words(distance, production.heatmap.counts, bench.heatmap.counts, edges, threshold)
    cells = join_cells(
        _with_goodput(production),
        _with_goodput(bench),
        production.heatmap.counts,
        bench.heatmap.counts,
        edges,
        min_samples,
    )
    pred_start = start or production.start or end - DEFAULT_WINDOW
    prediction, why_not = _prediction(db, engine, pred_start, end)
    notes = _notes(production, bench, prediction, engine)
    return Comparison(
        engine,
        bins,
        edges,
        production,
        bench,
        distance,
        threshold,
        words,
        min_samples,
        cells,
        target,
        prediction,
        why_not,
        notes,
    )


def _no_production(db: Database, engine: str, benchmark: str, window: str) -> str:
    """Why the engine has no production side, and what to change."""
    cur = db.cursor()
    first, last, count = windows.span(cur, Filter(engines=(engine,)))
    if not count:
        seen = ", ".join(analytics.engine_names(cur)[:8]) or "none yet"
        return (
            f"no request names engine {engine!r}; give the engine as its requests name it "
            f"(engines seen: {seen})"
        )
    others = [g for g in analytics.engine_gateways(cur, engine, None, None) if g != benchmark]
    if not others:
        return (
            f"engine {engine!r} has requests only through gateway {benchmark!r}, the benchmark's: "
            "production needs the engine's requests from another gateway"
        )
    return (
        f"engine {engine!r} has no production requests {window}; its requests run from "
        f"{_when(first)} to {_when(last)}: move start and end (the production window) there"
    )


def _with_goodput(side: Side) -> pd.DataFrame:
    """The side's per-cell latency with its per-cell goodput (NaN without an SLO)."""
    frame = side.cells.copy()
    if side.goodput_cells is None or not len(side.goodput_cells):
        frame["goodput"] = np.nan
        return frame
    judged = side.goodput_cells[["i", "j", "goodput"]]
    return frame.merge(judged, on=["i", "j"], how="left")


def _notes(
    production: Side, bench: Side, prediction: dict[str, Any] | None, engine: str
) -> list[str]:
    notes = [
        "Both sides count requests with status ok; failed and cancelled ones are counted apart "
        f"({production.stats.not_ok:,.0f} in production, {bench.stats.not_ok:,.0f} in the "
        "benchmark)."
    ]
    if bench.match == "engine" and prediction is not None:
        lo, hi = production.start, production.end
        if bench.start and lo and hi and lo <= bench.start < hi:
            notes.append(
                f"The benchmark's rows name engine {engine} inside the production window: the "
                "model's calibration reads every request of the engine there, theirs too."
            )
    for side in (production, bench):
        if side.sampling.sampled and (note := side.sampling.note()):
            notes.append(f"The {side.name} side is {note}.")
        if side.raw_only_note:
            notes.append(f"{side.name.capitalize()}: {side.raw_only_note}")
    return notes


# -- JSON ------------------------------------------------------------------------------------


def _side_dict(side: Side) -> dict[str, Any]:
    s = side.stats
    return {
        "window": {
            "start": side.flt.start.isoformat() if side.flt.start else None,
            "end": side.flt.end.isoformat() if side.flt.end else None,
        },
        "first": side.start.isoformat() if side.start else None,
        "last": side.end.isoformat() if side.end else None,
        "gateways": list(side.gateways),
        "match": side.match,
        "match_words": side.match_words,
        "requests": int(side.heatmap.total),
        "rows": s.rows,
        "not_ok": _num(s.not_ok),
        "counts": side.heatmap.counts.tolist(),
        "shares": [[round(v, 6) for v in row] for row in shares(side.heatmap.counts).tolist()],
        "latency": {
            m: {
                **{q: _num(side.quantiles[f"{m}_ms"][q]) for q in QUANTILES},
                "mean": _num(s.ttft_mean if m == "ttft" else s.itl_mean),
            }
            for m in MEASURES
        },
        "in_flight": _num(side.in_flight),
        "in_flight_words": side.in_flight_words,
        "goodput": side.goodput,
        "sampling": side.sampling.as_dict() if side.sampling.sampled else None,
        "raw_only_note": side.raw_only_note,
    }


def _cell_dict(r: Any) -> dict[str, Any]:
    def side(name: str) -> dict[str, Any]:
        return {
            "requests": int(getattr(r, f"{name}_requests")),
            "share": _num(getattr(r, f"{name}_share"), 6),
            "ttft_n": int(getattr(r, f"{name}_ttft_n")),
            "itl_n": int(getattr(r, f"{name}_itl_n")),
            **{
                f"{m}_{q}": _num(getattr(r, f"{name}_{m}_{q}")) for m in MEASURES for q in QUANTILES
            },
            "goodput": _num(getattr(r, f"{name}_goodput"), 4),
        }

    ratios = {
        f"{m}_{q}": _num(getattr(r, f"ratio_{m}_{q}"), 4) for m in MEASURES for q in QUANTILES
    }
    return {
        "isl_from": int(r.isl_from),
        "osl_from": int(r.osl_from),
        "shape": r.shape,
        "production": side("production"),
        "benchmark": side("benchmark"),
        "ratio": ratios if any(v is not None for v in ratios.values()) else None,
    }


def _prediction_dict(c: Comparison) -> dict[str, Any]:
    if c.prediction is None:
        return {"available": False, "why_not": c.prediction_why_not, "error": PUBLISHED_ERROR}
    raw, cal = c.prediction["model"], c.prediction["calibrated"]

    def figures(p: dict[str, Any]) -> dict[str, Any]:
        return {"ttft_ms": p["ttft_ms"], "itl_ms": p["itl_ms"], "e2e_ms": p["e2e_ms"]}

    return {
        "available": True,
        "why_not": None,
        "concurrency": raw["concurrency"],
        "concurrency_from": c.prediction["concurrency_from"],
        "observed_peak_in_flight": c.prediction["observed_peak_in_flight"],
        "mix": c.prediction["mix"],
        "model": figures(raw),
        "calibrated": figures(cal),
        "source": f"{raw['source']} ({raw['library']})",
        "error": PUBLISHED_ERROR,
    }


def comparison_dict(c: Comparison) -> dict[str, Any]:
    """The JSON form of GET /api/compare."""
    return {
        "engine": c.engine,
        "bins": c.bins,
        "isl_edges": list(c.edges),
        "osl_edges": list(c.edges),
        "production": _side_dict(c.production),
        "benchmark": _side_dict(c.benchmark),
        "shape": {
            "tvd": round(c.distance, 4),
            "threshold": c.threshold,
            "matches": c.matches,
            "words": c.shape_words,
        },
        "min_samples": c.min_samples,
        "headlines": [
            {
                "measure": h.measure,
                "cells": h.cells,
                "production_share": round(h.production_share, 4),
                "p50": _num(h.p50, 4),
                "p90": _num(h.p90, 4),
                "words": h.words(c.min_samples),
            }
            for h in c.headlines()
        ],
        "cells": [_cell_dict(r) for r in c.cells.itertuples(index=False)],
        "slo": c.slo.as_dict() if c.slo else None,
        "how_to_set": None if c.slo else slo.HOW_TO_SET,
        "prediction": _prediction_dict(c),
        "notes": c.notes,
    }
