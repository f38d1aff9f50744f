"""Rightsizing an engine: its stored profile, its traffic (analytics) and the math (sizing).

The one place the dashboard, the JSON API, the CLI and the weekly email get a recommendation
from, so all four show the same numbers."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from app.analytics.engine_load import engine_load, rejected
from app.analytics.filters import Filter
from app.sizing.catalog import GIB
from app.sizing.logparse import parse_startup_log
from app.sizing.profile import EngineProfile
from app.sizing.recommend import DEFAULT_COVERAGE, DEFAULT_GRANULARITY, Traffic
from app.sizing.rightsize import Recommendation, proposed_bounds, rightsize
from app.storage.database import Database
from app.storage.engines import get_profile

DEFAULT_WINDOW = timedelta(days=7)


# A logged KV capacity describes one build: changing any of these makes it stale.
BUILD_FIELDS = (
    "model",
    "params",
    "layers",
    "kv_heads",
    "head_dim",
    "gpu",
    "gpu_memory_gib",
    "tensor_parallel",
    "pipeline_parallel",
    "weight_dtype",
    "kv_dtype",
    "memory_fraction",
    "framework",
    "max_num_tokens",
)


class NoProfile(LookupError):
    """The engine has no stored profile, or the stored one is no longer valid."""


def problem(exc: ValidationError) -> str:
    """The first validation error as 'field: message'."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "profile"
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def load_profile(db: Database, engine: str) -> EngineProfile:
    """The engine's stored profile; raises NoProfile naming the engine (and the bad field)."""
    stored = get_profile(db.cursor(), engine)
    if stored is None:
        raise NoProfile(
            f"engine {engine!r} has no profile: create one with PUT /api/engines/{engine} "
            "or on the Rightsizing page"
        )
    try:
        return EngineProfile.model_validate(stored)
    except ValidationError as exc:
        raise NoProfile(
            f"engine {engine!r} has a stored profile that is no longer valid ({problem(exc)}); "
            "save it again"
        ) from None


def edited_profile(
    previous: dict[str, Any] | None, data: dict[str, Any], startup_log: str | None
) -> EngineProfile:
    """A profile from edited fields: a pasted log sets the measured capacity; a changed build
    drops a stale one. Raises ValueError naming the field."""
    if startup_log:
        measured = parse_startup_log(startup_log)
        if measured is None:
            raise ValueError(
                "startup_log: no KV cache size found; paste the line 'GPU KV cache size: N "
                "tokens' (vLLM) or '… max tokens in paged KV cache (N)' (TensorRT-LLM)"
            )
        data = {
            **data,
            "measured_kv_tokens": measured.kv_tokens,
            "measured_source": f"{measured.framework} startup log: {measured.line[:200]}",
        }
    elif previous and any(previous.get(f) != data.get(f) for f in BUILD_FIELDS):
        data = {k: v for k, v in data.items() if k not in ("measured_kv_tokens", "measured_source")}
    try:
        return EngineProfile.model_validate(data)
    except ValidationError as exc:
        raise ValueError(problem(exc)) from None


def recommend(
    db: Database,
    engine: str,
    *,
    start: datetime,
    end: datetime,
    coverage: float = DEFAULT_COVERAGE,
    granularity: int = DEFAULT_GRANULARITY,
    profile: EngineProfile | None = None,
) -> Recommendation:
    """The recommendation for an engine over [start, end)."""
    profile = profile or load_profile(db, engine)
    cur = db.cursor()
    flt = Filter(start=start, end=end, engines=(engine,))
    load = engine_load(cur, flt, coverage)
    traffic = Traffic(**load)
    if not traffic.requests:
        return rightsize(
            engine,
            profile,
            traffic,
            None,
            (None, None),
            coverage=coverage,
            granularity=granularity,
        )
    rec, notes = proposed_bounds(profile, traffic, granularity)
    counts = rejected(
        cur,
        flt,
        [(profile.max_input_len, profile.max_seq_len), (rec.max_input_len, rec.max_seq_len)],
    )
    return rightsize(
        engine,
        profile,
        traffic,
        rec,
        (counts[0], counts[1]),
        coverage=coverage,
        granularity=granularity,
        notes=notes,
    )


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value / GIB, 2)


def recommendation_dict(r: Recommendation) -> dict[str, Any]:
    """The recommendation as JSON: bounds, rejected counts, memory in GiB, commands, what-ifs."""

    def memory(m):
        if m is None:
            return None
        return {
            "gpus": m.gpus,
            "total_gib": _gib(m.total),
            "usable_gib": _gib(m.usable),
            "weights_gib": _gib(m.weights),
            "overhead_gib": _gib(m.overhead),
            "kv_cache_gib": _gib(max(m.kv_budget, 0)),
            "kv_bytes_per_token": m.kv_per_token,
            "kv_capacity_tokens": m.kv_capacity_tokens,
            "measured": m.measured,
        }

    return {
        "engine": r.engine,
        "status": r.status,
        "verdict": r.verdict,
        "coverage": r.coverage,
        "granularity": r.granularity,
        "requests": r.traffic.requests,
        "observed": r.traffic.quantiles,
        "current": asdict(r.current),
        "recommended": asdict(r.recommended) if r.recommended else None,
        "rejected": {"current": r.rejected_current, "recommended": r.rejected_recommended},
        "memory": {"now": memory(r.memory_now), "after": memory(r.memory_after)},
        "concurrency": {
            "now": asdict(r.capacity_now) if r.capacity_now else None,
            "after": asdict(r.capacity_after) if r.capacity_after else None,
        },
        "commands": r.commands,
        "what_if": [
            {
                "label": w.label,
                "possible": w.reason is None,
                "reason": w.reason,
                "caveat": w.caveat,
                "kv_capacity_tokens": w.memory.kv_capacity_tokens if w.memory else None,
                "concurrency": asdict(w.capacity) if w.capacity else None,
            }
            for w in r.whatifs
        ],
        "notes": r.notes,
    }
