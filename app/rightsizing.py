"""Rightsizing an engine: its stored profile, its traffic (analytics) and the math (sizing).

The one place the dashboard, the JSON API, the CLI and the weekly email get a recommendation
from, so all four show the same numbers."""

from __future__ import annotations

from datetime import datetime, timedelta

from app.analytics.engine_load import engine_load, rejected
from app.analytics.filters import Filter
from app.sizing.profile import EngineProfile
from app.sizing.recommend import DEFAULT_COVERAGE, DEFAULT_GRANULARITY, Traffic
from app.sizing.rightsize import Recommendation, proposed_bounds, rightsize
from app.storage.database import Database
from app.storage.engines import get_profile

DEFAULT_WINDOW = timedelta(days=7)


class NoProfile(LookupError):
    """The engine has no stored profile."""


def load_profile(db: Database, engine: str) -> EngineProfile:
    """The engine's stored profile; raises NoProfile naming the engine."""
    stored = get_profile(db.cursor(), engine)
    if stored is None:
        raise NoProfile(
            f"engine {engine!r} has no profile: create one with PUT /api/engines/{engine} "
            "or on the Rightsizing page"
        )
    return EngineProfile.model_validate(stored)


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
        return rightsize(engine, profile, traffic, None, (None, None), coverage=coverage)
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
