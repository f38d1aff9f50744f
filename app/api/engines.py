"""Engine profiles and their rightsizing recommendation: /api/engines/…"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from pydantic import BaseModel, Field

from app.api.params import Time, utc
from app.auth.bearer import require_scope
from app.server.deps import ClockDep, DbDep, FleetDep, SettingsDep
from app.server.errors import ErrorResponse
from app.services import profiles
from app.services.deploy import DEFAULT_NAMESPACE, deploy_documents
from app.services.economics import engine_money, fleet_money, money_dict
from app.services.profiles import NoProfile, load_profile
from app.services.rightsizing import (
    DEFAULT_WINDOW,
    recommend,
    recommendation_dict,
    seasonal,
    seasonal_dict,
    window_note,
)
from app.sizing.profile import EngineProfile

log = logging.getLogger("tokenshape.api")
router = APIRouter(tags=["engines"])
AdminDep = Depends(require_scope("admin"))
NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorResponse, "description": "The engine has no stored profile."}
}


class EngineProfileIn(EngineProfile):
    """A profile to store; `startup_log` (pasted engine log lines) sets the measured capacity."""

    startup_log: str | None = Field(
        None, description="vLLM or TensorRT-LLM startup log lines holding the KV cache size."
    )


class EngineOut(BaseModel):
    """A stored engine profile."""

    name: str
    profile: EngineProfile


def _profile_or_404(db, name: str) -> EngineProfile:
    try:
        return load_profile(db, name)
    except NoProfile as exc:
        raise HTTPException(404, detail=str(exc)) from None


@router.get("/api/engines", response_model=list[EngineOut], summary="List engine profiles")
def list_engines(db: DbDep) -> list[EngineOut]:
    """Every engine with a stored profile."""
    out = []
    for name, stored in profiles.stored_profiles(db).items():
        try:
            out.append(EngineOut(name=name, profile=EngineProfile.model_validate(stored)))
        except ValueError as exc:  # e.g. a catalog change: list the rest, say which to re-save
            log.warning(
                "engine %r has a profile that no longer validates (%s); re-save it", name, exc
            )
    return out


@router.get(
    "/api/engines/{name}",
    response_model=EngineOut,
    responses=NOT_FOUND,
    summary="One engine profile",
)
def get_engine(name: str, db: DbDep) -> EngineOut:
    """The stored profile; 404 when the engine has none."""
    return EngineOut(name=name, profile=_profile_or_404(db, name))


class VersionOut(BaseModel):
    """One recorded change of an engine's profile."""

    engine: str
    seq: int = Field(description="1, 2, … per engine: the order of its changes.")
    at: datetime
    author: str = Field(description='A user\'s name, "token GATEWAY/ID", "open mode" or "cli".')
    action: str = Field(description="create, edit, delete or restore.")
    summary: str = Field(description='What changed, in words ("max_input_len 4,096 → 8,192").')
    before: dict[str, Any] | None = Field(description="The profile before (none: created).")
    after: dict[str, Any] | None = Field(description="The profile after (none: deleted).")


def _version_out(v: Any) -> VersionOut:
    return VersionOut(
        engine=v.engine,
        seq=v.seq,
        at=v.at.astimezone(UTC),
        author=v.author,
        action=v.action,
        summary=v.summary,
        before=v.before,
        after=v.after,
    )


@router.put(
    "/api/engines/{name}",
    response_model=EngineOut,
    summary="Create or replace an engine profile (admin token)",
)
def put_engine(
    name: str,
    body: EngineProfileIn,
    db: DbDep,
    clock: ClockDep,
    token: Annotated[Any, AdminDep],
) -> EngineOut:
    """Store a profile; pasted startup log lines set `measured_kv_tokens`. The change is
    recorded in the engine's history (GET /api/engines/{name}/history)."""
    data = body.model_dump(exclude={"startup_log"}, exclude_none=True)
    author = profiles.token_author(token.gateway, token.id)
    try:
        profile = profiles.save_profile(db, name, data, body.startup_log, clock(), author=author)
    except ValueError as exc:
        raise HTTPException(422, detail=str(exc)) from None
    return EngineOut(name=name, profile=profile)


@router.delete(
    "/api/engines/{name}",
    status_code=204,
    responses=NOT_FOUND,
    summary="Delete an engine profile (admin token)",
)
def delete_engine(
    name: str, db: DbDep, clock: ClockDep, token: Annotated[Any, AdminDep]
) -> Response:
    """Delete the profile; the engine's requests stay, and the profile stays in its history:
    POST /api/engines/{name}/restore brings it back."""
    author = profiles.token_author(token.gateway, token.id)
    if not profiles.delete_profile(db, name, clock(), author):
        raise HTTPException(404, detail=f"engine {name!r} has no profile to delete")
    return Response(status_code=204)


@router.post(
    "/api/engines/{name}/restore",
    response_model=VersionOut,
    responses={
        404: {"model": ErrorResponse, "description": "The engine has no deleted profile."},
        409: {"model": ErrorResponse, "description": "The engine has a newer profile."},
    },
    summary="Restore a deleted engine profile (admin token)",
)
def restore_engine(
    name: str, db: DbDep, clock: ClockDep, token: Annotated[Any, AdminDep]
) -> VersionOut:
    """Store again the profile the engine's last change deleted, as it was; 409 when the
    engine has a profile again (it is never replaced)."""
    author = profiles.token_author(token.gateway, token.id)
    try:
        version = profiles.restore_profile(db, name, clock(), author)
    except profiles.RestoreConflict as exc:
        raise HTTPException(409, detail=str(exc)) from None
    except profiles.NoDeletedProfile as exc:
        raise HTTPException(404, detail=str(exc)) from None
    return _version_out(version)


@router.get(
    "/api/engines/{name}/history",
    response_model=list[VersionOut],
    summary="An engine profile's recorded changes",
)
def get_history(
    name: str,
    db: DbDep,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many.")] = 100,
) -> list[VersionOut]:
    """Every recorded change of the engine's profile, newest first (empty when none)."""
    return [_version_out(v) for v in profiles.history(db, name, limit)]


@router.get(
    "/api/engines/{name}/recommendation",
    responses=NOT_FOUND,
    summary="Rightsizing for an engine",
)
def get_recommendation(
    name: str,
    db: DbDep,
    clock: ClockDep,
    settings: SettingsDep,
    fleet: FleetDep,
    start: Annotated[Time | None, Query(description="Window start (default: 7 days ago).")] = None,
    end: Annotated[Time | None, Query(description="Window end (default: now).")] = None,
    coverage: Annotated[
        float, Query(gt=0.5, lt=1, description="Share of requests to fit.")
    ] = 0.999,
    granularity: Annotated[
        int, Query(ge=1, le=65536, description="Round bounds up to this.")
    ] = 256,
) -> dict[str, Any]:
    """Observed vs current vs recommended bounds, memory, concurrency, replicas under the SLO,
    commands and what-ifs."""
    end = utc(end) or clock()
    start = utc(start) or end - DEFAULT_WINDOW
    if start >= end:
        raise HTTPException(422, detail="invalid parameters: start: must be before end")
    profile = _profile_or_404(db, name)
    try:
        r = recommend(
            db,
            name,
            start=start,
            end=end,
            coverage=coverage,
            granularity=granularity,
            profile=profile,
            tz=settings.tz,
            fleet=fleet,
        )
    except ValueError as exc:  # e.g. a granularity too coarse for the model's context
        raise HTTPException(422, detail=f"invalid parameters: {exc}") from None
    except Exception as exc:
        if not profiles.profile_caused(exc):
            raise  # not the profile's fault: a 500 from the error handler, traceback logged
        # The stored profile cannot be sized: say so, and how to fix it.
        raise HTTPException(422, detail=profiles.sizing_failure(name, exc)) from None
    return recommendation_dict(r) | {"raw_only_note": window_note(db, name, start, end, clock())}


@router.get(
    "/api/engines/{name}/seasonal",
    responses=NOT_FOUND,
    summary="Day/night engine plans for an engine",
)
def get_seasonal(
    name: str,
    db: DbDep,
    clock: ClockDep,
    settings: SettingsDep,
    fleet: FleetDep,
    weeks: Annotated[int, Query(ge=1, le=12, description="Whole weeks up to the last hour.")] = 4,
    headroom: Annotated[float, Query(ge=0, le=2, description="Spare capacity per hour.")] = 0.2,
    coverage: Annotated[
        float, Query(gt=0.5, lt=1, description="Share of requests to fit.")
    ] = 0.999,
    day_types: Annotated[
        bool, Query(description="Also plan weekdays and weekends separately.")
    ] = False,
    namespace: Annotated[
        str, Query(max_length=63, description="Kubernetes namespace of the deploy documents.")
    ] = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """Hourly demand in TOKENSHAPE_TZ, plans (a) static (b) hourly (c) best split, the verdict."""
    profile = _profile_or_404(db, name)
    now = clock()
    try:
        report = seasonal(
            db,
            name,
            now=now,
            tz=settings.tz,
            weeks=weeks,
            coverage=coverage,
            headroom=headroom,
            threshold=settings.seasonal_threshold,
            day_types=day_types,
            fleet=fleet,
        )
        out = seasonal_dict(report)
        out["money"] = money_dict(
            engine_money(db, name, now=now, tz=settings.tz, fleet=fleet, weeks=weeks, report=report)
        )
    except Exception as exc:
        if not profiles.profile_caused(exc):
            raise  # not the profile's fault: a 500 from the error handler, traceback logged
        # The stored profile cannot be sized: say so, and how to fix it.
        raise HTTPException(422, detail=profiles.sizing_failure(name, exc)) from None
    try:
        out["deploy"] = deploy_documents(report, profile, namespace=namespace)
    except ValueError as exc:
        raise HTTPException(422, detail=f"invalid parameters: namespace: {exc}") from None
    return out


@router.get("/api/money", summary="GPU-hours and money per engine and for the fleet")
def get_money(
    db: DbDep,
    clock: ClockDep,
    settings: SettingsDep,
    fleet: FleetDep,
    weeks: Annotated[int, Query(ge=1, le=12, description="Whole weeks up to the last hour.")] = 4,
) -> dict[str, Any]:
    """Each engine's plans (today, rebuilt, hourly, seasonal) per month, the best one within
    the SLO, what it saves, cost per million tokens, and the fleet's totals; an engine that
    cannot be sized has no plans and its `error` says why (the totals leave it out)."""
    now = clock()
    m = fleet_money(db, now=now, tz=settings.tz, fleet=fleet, weeks=weeks)
    # The plans' window, as `seasonal` takes it: whole weeks up to the last whole hour.
    end = now.astimezone(UTC).replace(minute=0, second=0, microsecond=0)
    return {
        "currency": m.currency,
        "weeks": weeks,
        "headline": m.headline(),
        "now_month": None if m.now_month is None else round(m.now_month, 2),
        "best_month": None if m.best_month is None else round(m.best_month, 2),
        "saves_month": None if m.saves_month is None else round(m.saves_month, 2),
        "gpu_hours_now_month": round(m.gpu_hours_now_month, 1),
        "gpu_hours_best_month": round(m.gpu_hours_best_month, 1),
        "engines": [money_dict(e) for e in m.engines],
        "raw_only_note": window_note(db, None, end - timedelta(weeks=weeks), end, now),
    }
