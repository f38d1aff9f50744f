"""The SLO ledger: goodput against each engine's latency targets, and why requests missed.

Joins the stored profiles (their targets through `app.sizing.slo.slo_for`, the fleet's for
requests with no engine or no profile), the goodput analytics (`app/analytics/goodput.py`,
exact on raw rows), the requests in flight (`app/analytics/load.py`) and the performance
model (`app/services/performance.py`) into JSON for GET /api/goodput, `tokenshape goodput`,
the Shapes page's SLO layer, the Latency page and the Overview.

Causes of misses, from what is measured (the thresholds are `QUEUE_FACTOR`, `LOAD_RISE`,
`MODEL_SLOW`):

- *queueing*: TTFT at the SLO percentile is at least QUEUE_FACTOR × the prefill the model
  predicts at the shape's median ISL (or, without a model, × the shape's own fast end, its
  10th percentile TTFT), or above the target while the predicted prefill is within it;
- *prefill*: TTFT near the predicted prefill, and the prefill alone above the target (long
  prompts); without a model: even the fastest tenth of the shape misses;
- *decode (engine)*: ITL above the target already at the lowest requests-in-flight level, or
  above MODEL_SLOW × the model's batch-1 ITL there;
- *decode under load*: ITL rising with the requests in flight (the busiest level's median at
  least LOAD_RISE × the quietest's);
- *output length*: E2E above its target with TTFT and ITL within theirs.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import pandas as pd
from pydantic import ValidationError

from app.analytics import goodput, load, windows
from app.analytics.filters import Filter
from app.analytics.rollups.missing import raw_only_note
from app.charts.style import bin_labels
from app.services.perfmodel import PerfModelError
from app.services.performance import Engine, prepare
from app.services.profiles import stored_profiles
from app.sizing.profile import EngineProfile
from app.sizing.slo import Fleet, Slo, slo_for
from app.storage.database import Database

QUEUE_FACTOR = 2.0
LOAD_RISE = 1.3
MODEL_SLOW = 1.5
MIN_LEVEL_REQUESTS = 5  # an in-flight level with fewer requests says nothing about its ITL
ATTRIBUTED = 8  # shapes per engine whose causes are worked out (most excess misses first)
KIND_LABELS = {
    "queueing": "queueing",
    "prefill": "prefill (long prompts)",
    "ttft": "slow first token",
    "decode-engine": "decode (the engine itself)",
    "decode-load": "decode under load",
    "decode": "slow decode",
    "output-length": "output length",
}
HOW_TO_SET = (
    "No latency target is set: give an engine slo_ttft_ms / slo_itl_ms (and optionally "
    "slo_e2e_ms, slo_percentile) in its profile (the Rightsizing page's editor or PUT "
    "/api/engines/{name}), or set fleet defaults with TOKENSHAPE_SLO_TTFT_MS, "
    "TOKENSHAPE_SLO_ITL_MS, TOKENSHAPE_SLO_E2E_MS and TOKENSHAPE_SLO_PERCENTILE."
)
RULE = (
    "Exact on raw rows, weighted by sampling. A request meets the SLO when every value with a "
    "target was measured and is within it; it missed when a measured value is above its "
    "target; a request missing a value that has a target (and nothing measured above one) is "
    "'not measured' and left out of goodput. ITL targets apply to requests of 2+ output "
    "tokens. goodput = good / (good + missed); the SLO is met when goodput ≥ percentile/100."
)


# -- targets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Ledger:
    """Whose targets apply: per engine with a valid profile, the fleet's for the rest."""

    engines: dict[str, Slo]
    default: Slo | None
    profiles: dict[str, EngineProfile]

    def any(self) -> bool:
        """Whether any target is set at all."""
        return bool(self.engines) or self.default is not None

    def targets(self) -> goodput.Targets:
        """The analytics' form of the targets."""
        return goodput.Targets(
            {n: _target(s) for n, s in self.engines.items()},
            _target(self.default) if self.default else None,
        )

    def slo_of(self, engine: str | None) -> Slo | None:
        """The targets a request of this engine is judged against."""
        if engine is not None and engine in self.engines:
            return self.engines[engine]
        if engine is not None and engine in self.profiles:
            return None  # its profile sets none, nor does the fleet
        return self.default


def _target(s: Slo) -> goodput.Target:
    return goodput.Target(s.ttft_ms, s.itl_ms, s.e2e_ms, s.percentile)


def ledger(db: Database, fleet: Fleet) -> Ledger:
    """The targets of every engine with a valid stored profile, and the fleet's default."""
    profiles: dict[str, EngineProfile] = {}
    for name, stored in stored_profiles(db).items():
        try:
            profiles[name] = EngineProfile.model_validate(stored)
        except ValidationError:  # an invalid stored profile: the fleet's targets apply
            continue
    own = {n: s for n, p in profiles.items() if (s := slo_for(p, fleet)) is not None}
    return Ledger(own, slo_for(None, fleet), profiles)


# -- the performance model, once per profile -------------------------------------------------


@lru_cache(maxsize=32)
def _prepared(profile_json: str) -> Engine | str:
    try:
        return prepare(EngineProfile.model_validate_json(profile_json))
    except (PerfModelError, ValueError, KeyError) as exc:
        return str(exc) or type(exc).__name__


def model_for(profile: EngineProfile | None) -> Engine | str:
    """The prepared performance model of a profile, or why there is none."""
    if profile is None:
        return "no engine profile"
    return _prepared(json.dumps(profile.model_dump(mode="json", exclude_none=True), sort_keys=True))


@dataclass(frozen=True)
class Predicted:
    """The model's prefill and batch-1 ITL at one shape, or why it has none."""

    prefill_ms: float | None = None
    itl_ms: float | None = None
    why_not: str | None = None


def predicted(model: Engine | str, isl: int, osl: int) -> Predicted:
    """Engine.step(isl, osl, 1) as numbers, or the model's refusal in words."""
    if isinstance(model, str):
        return Predicted(why_not=model)
    try:
        step = model.step(max(isl, 1), max(osl, 1), 1)
    except PerfModelError as exc:
        return Predicted(why_not=str(exc))
    if not (math.isfinite(step.prefill_ms) and math.isfinite(step.itl_ms)):
        return Predicted(why_not="the model gives no finite prediction at this shape")
    return Predicted(step.prefill_ms, step.itl_ms)


# -- words -----------------------------------------------------------------------------------


def ms(value: float | None) -> str:
    """180 ms, 2.3 s, 0.8 ms."""
    if value is None or not math.isfinite(value):
        return "–"
    if value >= 1000:
        return f"{value / 1000:,.1f} s"
    return f"{value:,.0f} ms" if value >= 10 else f"{value:.1f} ms"


def tokens(value: float | None) -> str:
    """4k, 1.3k, 512."""
    if value is None or not math.isfinite(value):
        return "–"
    v = round(value)
    return f"{v / 1000:.1f}k".replace(".0k", "k") if v >= 1000 else str(v)


@dataclass(frozen=True)
class Level:
    """ITL at one requests-in-flight level of an engine."""

    lo: int
    hi: int
    requests: int
    itl_p50: float
    itl_p90: float

    @property
    def label(self) -> str:
        """'1', '3–4'."""
        return str(self.lo) if self.lo == self.hi else f"{self.lo}–{self.hi}"


@dataclass
class Cause:
    """One cause of a shape's misses: its kind, words with numbers, and the misses it covers."""

    kind: str
    words: str
    missed: float

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "kind": self.kind,
            "label": KIND_LABELS[self.kind],
            "words": self.words,
            "missed": round(self.missed, 3),
        }


def _pname(s: Slo) -> str:
    return f"p{s.percentile:g}"


def ttft_cause(s: Slo, row: Any, pred: Predicted, missed: float) -> Cause:
    """Queueing or prefill for a shape's TTFT misses (`row`: a by_cell/engine_stats row)."""
    target = float(s.ttft_ms or 0)
    p, low, isl = row.ttft_pq, row.ttft_low, row.isl_p50
    at = f"at ISL {tokens(isl)}"
    head = f"TTFT {_pname(s)} {ms(p)}"
    if pred.prefill_ms is not None:
        pre = pred.prefill_ms
        if p >= QUEUE_FACTOR * pre:
            words = f"{head} vs {ms(pre)} predicted prefill {at}: queueing"
            if pre > target:
                words += f" (the prefill alone is also above the {ms(target)} target)"
            return Cause("queueing", words, missed)
        if pre > target:
            return Cause(
                "prefill",
                f"{head}, near the {ms(pre)} predicted prefill {at}, which alone exceeds the "
                f"{ms(target)} target: prefill (long prompts)",
                missed,
            )
        return Cause(
            "queueing",
            f"{head} vs {ms(pre)} predicted prefill {at}: {ms(p - pre)} of waiting puts it past "
            f"the {ms(target)} target: queueing",
            missed,
        )
    alone = f"from the data alone ({pred.why_not})"
    if low > target:
        return Cause(
            "prefill",
            f"even the fastest tenth of these requests wait {ms(low)} for a first token {at}, "
            f"above the {ms(target)} target: prefill (long prompts), {alone}",
            missed,
        )
    if p >= QUEUE_FACTOR * low:
        return Cause(
            "queueing",
            f"{head} vs {ms(low)} for the fastest tenth of the same shape {at}: queueing, {alone}",
            missed,
        )
    return Cause(
        "ttft",
        f"{head} above the {ms(target)} target, close to the shape's fastest ({ms(low)}) {at}: "
        f"slow prefill or steady queueing, not told apart {alone}",
        missed,
    )


def _itl_at_level(model: Engine | str, row: Any, level: Level) -> tuple[float, int] | None:
    """The model's ITL at a level's requests in flight per replica (the profile's replicas
    share the engine's load), and that batch; None without a model."""
    if isinstance(model, str):
        return None
    batch = max(1, round((level.lo + level.hi) / 2 / (model.profile.replicas or 1)))
    isl = round(row.isl_p50) if math.isfinite(row.isl_p50) else 1
    osl = round(row.osl_p50) if math.isfinite(row.osl_p50) else 1
    try:
        itl = model.step(max(isl, 1), max(osl, 1), batch).itl_ms
    except PerfModelError:
        return None
    return (itl, batch) if math.isfinite(itl) else None


def itl_cause(
    s: Slo,
    row: Any,
    pred: Predicted,
    levels: list[Level],
    engine: str | None,
    missed: float,
    model: Engine | str = "no model",
) -> Cause:
    """Decode on the engine itself, or decode under load, for a shape's ITL misses."""
    target = float(s.itl_ms or 0)
    head = f"ITL {_pname(s)} {ms(row.itl_pq)} vs the {ms(target)} target"
    on = f" on {engine}" if engine else ""
    model_words = (
        f"{ms(pred.itl_ms)} predicted at batch 1"
        if pred.itl_ms is not None
        else f"no model ({pred.why_not})"
    )
    if not levels:
        return Cause(
            "decode",
            f"{head}; no in-flight levels (requests without E2E times), so load and the engine "
            f"cannot be told apart ({model_words})",
            missed,
        )
    quiet, busy = levels[0], levels[-1]
    rise = busy.itl_p50 / quiet.itl_p50 if quiet.itl_p50 > 0 else math.inf
    quiet_words = f"ITL p50 {ms(quiet.itl_p50)} at {quiet.label} in flight{on}"
    if quiet.itl_p90 > target:
        return Cause(
            "decode-engine",
            f"{head}; already {ms(quiet.itl_p90)} at p90 with {quiet.label} in flight{on} "
            f"({model_words}): the engine itself decodes slowly, not load",
            missed,
        )
    if len(levels) > 1 and rise >= LOAD_RISE:
        return Cause(
            "decode-load",
            f"{head}; {quiet_words} rises to {ms(busy.itl_p50)} at {busy.label} in flight "
            f"(×{rise:.1f}; {model_words}): decode under load",
            missed,
        )
    # Against the model at the quiet level's own batch (per replica), not at batch 1: a busy
    # engine's quietest level still decodes many requests at once.
    at_level = _itl_at_level(model, row, quiet)
    expected, expected_words = pred.itl_ms, model_words
    if at_level is not None:
        expected = at_level[0]
        expected_words = f"{ms(at_level[0])} predicted at batch {at_level[1]} per replica"
    if expected is not None and quiet.itl_p50 > MODEL_SLOW * expected:
        return Cause(
            "decode-engine",
            f"{head}; {quiet_words} vs {expected_words}: the engine decodes slower than the "
            "model expects, at every load",
            missed,
        )
    return Cause(
        "decode",
        f"{head}; {quiet_words}, about the same at {busy.label} in flight ({model_words}): "
        "the slow tail is not explained by load",
        missed,
    )


def e2e_cause(s: Slo, row: Any, missed: float) -> Cause:
    """Output length (or TTFT) for a shape's E2E misses."""
    decode = row.itl_p50 * max(row.osl_p50 - 1, 0) if math.isfinite(row.itl_p50) else math.nan
    osl = tokens(row.osl_p50)
    words = f"E2E {_pname(s)} {ms(row.e2e_pq)} vs the {ms(s.e2e_ms)} target at OSL {osl}"
    if math.isfinite(decode):
        words += (
            f" (decode ≈ ITL p50 {ms(row.itl_p50)} × {tokens(row.osl_p50)} tokens = {ms(decode)})"
        )
    return Cause("output-length", words + ": output length", missed)


def causes(
    s: Slo,
    row: Any,
    model: Engine | str,
    levels: list[Level],
    engine: str | None,
) -> list[Cause]:
    """The causes of one shape's (or engine's) misses, the most misses first."""
    found: list[Cause] = []
    pred: Predicted | None = None

    def pred_() -> Predicted:
        nonlocal pred
        if pred is None:
            isl = round(row.isl_p50) if math.isfinite(row.isl_p50) else 1
            osl = round(row.osl_p50) if math.isfinite(row.osl_p50) else 1
            pred = predicted(model, isl, osl)
        return pred

    # A measure is a cause when its misses alone exceed what the percentile allows; when none
    # does (misses spread over measures), the measure with the most misses is.
    allowed = (1 - (row.target if math.isfinite(row.target) else 1.0)) * (row.good + row.missed)
    measures = [
        (m, n)
        for m, n, t, q in (
            ("ttft", row.miss_ttft, s.ttft_ms, row.ttft_pq),
            ("itl", row.miss_itl, s.itl_ms, row.itl_pq),
            ("e2e", row.miss_e2e, s.e2e_ms, row.e2e_pq),
        )
        if t is not None and n > 0 and math.isfinite(q)
    ]
    chosen = [m for m, n in measures if n > allowed] or [
        max(measures, key=lambda mn: mn[1])[0] for _ in measures[:1]
    ]
    if "ttft" in chosen:
        found.append(ttft_cause(s, row, pred_(), row.miss_ttft))
    if "itl" in chosen:
        found.append(itl_cause(s, row, pred_(), levels, engine, row.miss_itl, model))
    if "e2e" in chosen:
        found.append(e2e_cause(s, row, row.miss_e2e))
    return sorted(found, key=lambda c: -c.missed)


def _levels(frame: pd.DataFrame) -> dict[str | None, list[Level]]:
    out: dict[str | None, list[Level]] = {}
    for r in frame.itertuples(index=False):
        if r.requests < MIN_LEVEL_REQUESTS or not math.isfinite(r.itl_p50):
            continue
        engine = r.engine if isinstance(r.engine, str) else None
        out.setdefault(engine, []).append(
            Level(int(r.inflight_lo), int(r.inflight_hi), int(r.requests), r.itl_p50, r.itl_p90)
        )
    return out


# -- the report ------------------------------------------------------------------------------


def _num(value: Any, digits: int = 4) -> float | None:
    if value is None:
        return None
    v = float(value)
    return round(v, digits) if math.isfinite(v) else None


def _counts(r: Any) -> dict[str, Any]:
    target = _num(r.target)
    good = _num(r.goodput)
    return {
        "requests": _num(r.requests, 3),
        "good": _num(r.good, 3),
        "missed": _num(r.missed, 3),
        "not_measured": _num(r.not_measured, 3),
        "no_slo": _num(r.no_slo, 3),
        "goodput": good,
        "target": target,
        "met": None if good is None or target is None else good >= target - 1e-12,
    }


def _excess(r: Any) -> float:
    """Misses beyond what the percentile allows (the shapes that cost attainment most)."""
    judged = r.good + r.missed
    target = r.target if math.isfinite(r.target) else 1.0
    return float(r.missed - (1 - target) * judged)


@dataclass
class Shape:
    """One ISL × OSL cell of one engine that misses its SLO, and why."""

    engine: str | None
    isl_label: str
    osl_label: str
    row: Any
    causes: list[Cause] = field(default_factory=list)

    @property
    def label(self) -> str:
        """'ISL 4k–8k × OSL 256–512'."""
        return f"ISL {self.isl_label} × OSL {self.osl_label}"

    def words(self) -> str:
        """One line: where, how far from the target, the causes."""
        r = self.row
        head = (
            f"{self.engine or 'no engine'} · {self.label}: {r.goodput:.1%} good vs "
            f"{r.target:.0%} target, {r.missed:,.0f} missed"
        )
        return head + ("; " + "; ".join(c.words for c in self.causes) if self.causes else "")

    def as_dict(self) -> dict[str, Any]:
        """The JSON form."""
        return {
            "engine": self.engine,
            "isl_from": int(self.row.isl_from),
            "osl_from": int(self.row.osl_from),
            "shape": self.label,
            **_counts(self.row),
            "excess_missed": _num(_excess(self.row), 3),
            "ttft_pq_ms": _num(self.row.ttft_pq, 2),
            "itl_pq_ms": _num(self.row.itl_pq, 3),
            "isl_p50": _num(self.row.isl_p50, 1),
            "osl_p50": _num(self.row.osl_p50, 1),
            "causes": [c.as_dict() for c in self.causes],
            "words": self.words(),
        }


@dataclass
class Report:
    """Everything the SLO ledger shows for one filter."""

    ledger: Ledger
    bucket: str
    bins: str
    edges: tuple[int, ...]
    totals: dict[str, Any]
    over_time: pd.DataFrame
    cells: pd.DataFrame  # pooled over engines: the heat map's layer
    tenants: pd.DataFrame
    engines: pd.DataFrame
    misses: list[Shape]
    engine_causes: dict[str | None, list[dict[str, Any]]]
    sampled: bool
    # What the raw rows cannot count (hours sealed by retention or imported), in words.
    raw_only_note: str | None = None

    def cell_cause(self) -> dict[tuple[int, int], str]:
        """The likely cause per (ISL bin, OSL bin): the shape that misses most there."""
        out: dict[tuple[int, int], str] = {}
        for shape in self.misses:
            key = (int(shape.row.i), int(shape.row.j))
            if key not in out and shape.causes:
                out[key] = f"{shape.engine or 'no engine'}: {KIND_LABELS[shape.causes[0].kind]}"
        return out


def _shapes(
    per_engine: pd.DataFrame, edges: tuple[int, ...], led: Ledger, levels_of
) -> list[Shape]:
    labels = bin_labels(edges)
    missing = per_engine[
        (per_engine["missed"] > 0) & (per_engine["goodput"] < per_engine["target"])
    ]
    order = sorted(missing.itertuples(index=False), key=lambda r: -_excess(r))
    taken: dict[str | None, int] = {}
    out: list[Shape] = []
    for r in order:  # the most excess misses first, at most ATTRIBUTED shapes per engine
        engine = r.engine if isinstance(r.engine, str) else None
        taken[engine] = taken.get(engine, 0) + 1
        if taken[engine] > ATTRIBUTED:
            continue
        s = led.slo_of(engine)
        found = Shape(engine, labels[r.i], labels[r.j], r)
        if s is not None:
            model = model_for(led.profiles.get(engine)) if engine else "no engine named"
            found.causes = causes(s, r, model, levels_of(engine), engine)
        out.append(found)
    return out


def _engine_causes(misses: list[Shape]) -> dict[str | None, list[dict[str, Any]]]:
    """Per engine, its shapes' causes summed by kind, each with the largest shape's words."""
    out: dict[str | None, dict[str, dict[str, Any]]] = {}
    for shape in misses:
        kinds = out.setdefault(shape.engine, {})
        for c in shape.causes:
            entry = kinds.setdefault(
                c.kind,
                {"kind": c.kind, "label": KIND_LABELS[c.kind], "missed": 0.0, "example": None},
            )
            entry["missed"] += c.missed
            if entry["example"] is None:
                entry["example"] = f"{shape.label}: {c.words}"
    return {
        engine: sorted(
            ({**v, "missed": round(v["missed"], 3)} for v in kinds.values()),
            key=lambda v: -v["missed"],
        )
        for engine, kinds in out.items()
    }


def report(
    db: Database,
    flt: Filter,
    fleet: Fleet,
    *,
    tz: str = "UTC",
    bins: str = "log2",
    bucket: str | None = None,
    attribute: bool = True,
) -> Report | None:
    """The ledger of a filter's requests; None when no target is set anywhere."""
    led = ledger(db, fleet)
    if not led.any():
        return None
    targets = led.targets()
    cur = db.cursor()
    start, end, _ = windows.span(cur, flt)
    bucket = bucket or windows.bucket_for(start, end)
    series = goodput.over_time(cur, flt, targets, bucket, tz)
    edges, pooled = goodput.by_cell(cur, flt, targets, bins=bins, per_engine=False, quantiles=False)
    tenants = goodput.by_dimension(cur, flt, targets, "tenant")
    engines = goodput.engine_stats(cur, flt, targets)
    total = _totals(series)
    misses: list[Shape] = []
    if attribute and total["missed"]:
        _, per_engine = goodput.by_cell(cur, flt, targets, bins=bins, per_engine=True)
        cache: dict[str, dict[str | None, list[Level]]] = {}

        def levels_of(engine: str | None) -> list[Level]:
            if "all" not in cache:  # one sweep of the window, only when an ITL miss asks
                cache["all"] = _levels(load.latency_by_inflight(cur, flt, per_engine=True))
            return cache["all"].get(engine, [])

        misses = _shapes(per_engine, edges, led, levels_of)
    sampled = (
        bool(len(series))
        and abs(float((series["requests"] + series["no_slo"]).sum()) - float(series["rows"].sum()))
        > 1e-6
    )
    return Report(
        led,
        bucket,
        bins,
        edges,
        total,
        series,
        pooled,
        tenants,
        engines,
        misses,
        _engine_causes(misses),
        sampled,
        raw_only_note(cur, flt, reader="goodput reads"),
    )


def _totals(series: pd.DataFrame) -> dict[str, Any]:
    sums = {
        c: float(series[c].sum()) for c in ("requests", "good", "missed", "not_measured", "no_slo")
    }
    judged = sums["good"] + sums["missed"]
    weights = (series["target"].fillna(0) * (series["good"] + series["missed"])).sum()
    target = float(weights / judged) if judged else math.nan
    good = sums["good"] / judged if judged else math.nan
    return _counts(SimpleNamespace(**sums, goodput=good, target=target))


def _engine_words(engine: str | None, s: Slo | None, r: Any, kinds: list[dict[str, Any]]) -> str:
    name = engine or "requests with no engine"
    if s is None:
        return f"{name}: no SLO set"
    judged = r.good + r.missed
    if judged <= 0:
        return f"{name}: {s.words()}; no request measured every targeted value"
    met = r.goodput >= r.target - 1e-12
    words = f"{name}: {r.goodput:.1%} of requests within {s.words()} (needs {r.target:.0%}): " + (
        "met" if met else "missed"
    )
    if not met and kinds:
        missed = sum(k["missed"] for k in kinds) or 1.0
        top = kinds[0]
        share = top["missed"] / missed
        words += (
            f"; mostly {top['label']} ({share:.0%} of attributed misses), e.g. {top['example']}"
        )
    if r.not_measured > 0:
        words += f"; {r.not_measured:,.0f} requests not measured"
    return words


def engine_rows(rep: Report) -> list[dict[str, Any]]:
    """Per engine: its SLO, counts, goodput against the target, met, causes and words."""
    out = []
    for r in rep.engines.itertuples(index=False):
        engine = r.engine if isinstance(r.engine, str) else None
        s = rep.ledger.slo_of(engine)
        kinds = rep.engine_causes.get(engine, [])
        out.append(
            {
                "engine": engine,
                "slo": s.as_dict() if s else None,
                **_counts(r),
                "ttft_pq_ms": _num(r.ttft_pq, 2),
                "itl_pq_ms": _num(r.itl_pq, 3),
                "causes": kinds,
                "words": _engine_words(engine, s, r, kinds),
            }
        )
    return out


def _records(frame: pd.DataFrame, keys: list[str]) -> list[dict[str, Any]]:
    out = []
    for r in frame.itertuples(index=False):
        item: dict[str, Any] = {}
        for k in keys:
            v = getattr(r, k)
            item[k] = v if isinstance(v, str) or v is None else (None if pd.isna(v) else v)
        out.append({**item, **_counts(r)})
    return out


def report_dict(rep: Report | None, flt: Filter) -> dict[str, Any]:
    """The JSON form of GET /api/goodput."""
    window = {
        "start": flt.start.isoformat() if flt.start else None,
        "end": flt.end.isoformat() if flt.end else None,
    }
    if rep is None:
        return {
            "exact": True,
            "rule": RULE,
            "window": window,
            "slo": {"default": None, "engines": {}},
            "set": False,
            "how_to_set": HOW_TO_SET,
            "totals": None,
            "bucket": None,
            "bins": None,
            "over_time": [],
            "by_cell": [],
            "by_tenant": [],
            "by_engine": [],
            "misses": [],
            "sampled": False,
            "raw_only_note": None,
        }
    causes_by_cell = rep.cell_cause()
    cells = []
    for r in rep.cells.itertuples(index=False):
        cells.append(
            {
                "isl_from": int(r.isl_from),
                "osl_from": int(r.osl_from),
                **_counts(r),
                "cause": causes_by_cell.get((int(r.i), int(r.j))),
            }
        )
    over_time = [
        {"t": r.t.isoformat(), **_counts(r)} for r in rep.over_time.itertuples(index=False)
    ]
    return {
        "exact": True,
        "rule": RULE,
        "window": window,
        "slo": {
            "default": rep.ledger.default.as_dict() if rep.ledger.default else None,
            "engines": {n: s.as_dict() for n, s in sorted(rep.ledger.engines.items())},
        },
        "set": True,
        "how_to_set": None,
        "totals": rep.totals,
        "bucket": rep.bucket,
        "bins": rep.bins,
        "over_time": over_time,
        "by_cell": cells,
        "by_tenant": _records(rep.tenants, ["tenant"]),
        "by_engine": engine_rows(rep),
        "misses": [m.as_dict() for m in rep.misses],
        "sampled": rep.sampled,
        "raw_only_note": rep.raw_only_note,
    }


# -- for the Overview ------------------------------------------------------------------------


def goodput_series(
    db: Database, flt: Filter, fleet: Fleet, *, tz: str = "UTC", bucket: str | None = None
) -> pd.DataFrame:
    """Goodput over time: columns t, requests (those with an SLO), good, not_measured, then
    missed, goodput and target (all weighted); empty when no target is set."""
    led = ledger(db, fleet)
    columns = ["t", "requests", "good", "not_measured", "missed", "goodput", "target"]
    if not led.any():
        return pd.DataFrame(columns=columns)
    cur = db.cursor()
    start, end, _ = windows.span(cur, flt)
    frame = goodput.over_time(cur, flt, led.targets(), bucket or windows.bucket_for(start, end), tz)
    return frame[columns]


def attainment(db: Database, flt: Filter, fleet: Fleet) -> dict[str | None, dict[str, Any]]:
    """Per engine (None: requests with no engine): goodput, target, met and words, causes
    included; empty when no target is set."""
    rep = report(db, flt, fleet)
    if rep is None:
        return {}
    return {
        row["engine"]: {
            "goodput": row["goodput"],
            "target": row["target"],
            "met": bool(row["met"]),
            "words": row["words"],
            "slo": row["slo"],
            "requests": row["requests"],
            "causes": row["causes"],
        }
        for row in engine_rows(rep)
        if row["slo"] is not None
    }
