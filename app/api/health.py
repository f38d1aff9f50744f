"""GET /api/health: is the database readable and the writer running."""

from __future__ import annotations

from typing import Annotated

import duckdb
from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import JSONResponse

from app import __version__
from app.api.schemas import (
    DatabaseHealth,
    Health,
    LakePushHealth,
    ReportsHealth,
    WriterHealth,
)
from app.api.schemas_damage import DamageOut
from app.auth import principal
from app.auth.bearer import require_scope
from app.server import runtime
from app.server.deps import ClockDep, DbDep, WriterDep
from app.services import damage as damage_service
from app.services import report_runs, status

router = APIRouter(tags=["health"])


def _problem(database: DatabaseHealth, writer: WriterHealth) -> str | None:
    """What is wrong, if anything: a degraded server answers 503 so monitors notice."""
    if not database.ok:
        return f"the database cannot be read: {database.error}"
    if not writer.running:
        return "the writer is not running: ingest answers 503; restart the server"
    # A failing disk shows here first: ingest answers 503 (retryable) until the next write
    # or move succeeds, which clears the error again.
    if writer.last_error is not None:
        return (
            f"the last write failed ({writer.last_error}): ingest answers 503 until writes "
            "succeed again; check the disk holding the database"
        )
    if writer.last_move_error is not None:
        return (
            f"acknowledged rows cannot be moved into the database ({writer.last_move_error}); "
            f"{writer.journal_rows:,} wait safely in the journal; check the disk holding the "
            "database"
        )
    return None


@router.get("/api/health", response_model=Health, responses={503: {"model": Health}})
def health(request: Request, db: DbDep, writer: WriterDep, clock: ClockDep) -> JSONResponse:
    """Database and writer state; 503 when either is down."""
    try:
        counts = status.counts(db)
        database = DatabaseHealth(
            ok=True,
            # Open to load balancers; where the file lives is for those who may read.
            path=str(db.path) if principal.current() is not None else "(log in to see)",
            revision=db.revision,
            requests=counts.requests,
            rejects=counts.rejects,
            rollup_hours=counts.rollup_hours,
            stale_rollup_hours=counts.stale_rollup_hours,
            rollup_tiers=counts.rollup_tiers,
        )
    except (duckdb.Error, RuntimeError) as exc:
        database = DatabaseHealth(
            ok=False,
            # Open to load balancers; where the file lives is for those who may read.
            path=str(db.path) if principal.current() is not None else "(log in to see)",
            revision=db.revision,
            requests=0,
            rejects=0,
            error=str(exc),
        )
    state = WriterHealth(**writer.state())
    scheduler = runtime.of(request).report_scheduler
    reports = ReportsHealth(
        scheduled=scheduler is not None,
        next_run=scheduler.next.isoformat() if scheduler and scheduler.next else None,
    )
    if database.ok:
        last = status.last_report(db)
        if last:
            reports.last_week = last["week"]
            reports.last_status = last["status"]
            reports.last_error = last["error"]
        reports.in_doubt = [d["week"] for d in report_runs.in_doubt(db, clock())]
    push = runtime.of(request).lake_push
    lake_push = None
    if push is not None:
        lake_push = LakePushHealth(**push.state())
        if principal.current() is None:  # where it pushes is for those who may read
            lake_push.url = "(log in to see)"
            if lake_push.last_error:
                where = push.url.rstrip("/")
                lake_push.last_error = lake_push.last_error.replace(where, "the central node")
    problem = _problem(database, state)
    ok = problem is None
    damaged = [DamageOut(**d.__dict__) for d in damage_service.open_damage(db)]
    if ok and reports.in_doubt:
        problem = (
            f"the weekly email of {', '.join(reports.in_doubt)} may have been sent (the SMTP "
            "server gave no answer after DATA): it is not resent by itself; check the inbox, "
            "then resend it on the Reports page if it did not arrive"
        )
    if ok and damaged:
        # Still serving (200: a load balancer keeps the node), but an operator must look.
        problem = (
            f"{len(damaged)} damaged file(s) were moved to the quarantine folder: "
            f"{damaged[0].problem}; read what was lost in `damage`, then acknowledge with "
            "POST /api/health/acknowledge or `tokenshape quarantine ack`"
        )
    body = Health(
        status=("warning" if damaged or reports.in_doubt else "ok") if ok else "degraded",
        damage=damaged,
        problem=problem,
        version=__version__,
        database=database,
        writer=state,
        reports=reports,
        lake_push=lake_push,
    )
    return JSONResponse(body.model_dump(), status_code=200 if ok else 503)


@router.post(
    "/api/health/acknowledge",
    dependencies=[Depends(require_scope("admin"))],
    responses={
        401: {"description": "No token."},
        403: {"description": "Not an admin token."},
        404: {"description": "No unacknowledged quarantined file has that name."},
    },
)
def acknowledge(
    db: DbDep,
    name: Annotated[
        str | None, Query(description="One quarantined file's name; all when omitted.")
    ] = None,
) -> dict[str, int]:
    """Acknowledge damaged files listed by /api/health (the files stay in the quarantine
    folder); 404 when `name` matches none."""
    done = damage_service.acknowledge(db, name)
    if name is not None and not done:
        raise HTTPException(404, f"no unacknowledged quarantined file named {name!r}")
    return {"acknowledged": done}
