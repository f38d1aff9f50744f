"""POST /api/admin/backup: a consistent copy of the live database, written beside it (admin)."""

from __future__ import annotations

import duckdb
from fastapi import APIRouter, Depends, HTTPException
from pydantic import BaseModel

from app.auth.bearer import require_scope
from app.server.deps import ClockDep, DbDep
from app.services import backups

router = APIRouter(tags=["admin"])


class BackupOut(BaseModel):
    """The backup file the server wrote."""

    path: str
    bytes: int
    requests: int
    seconds: float


@router.post(
    "/api/admin/backup",
    response_model=BackupOut,
    dependencies=[Depends(require_scope("admin"))],
    responses={409: {"description": "A backup is running already."}},
    summary="Back up the database while the server runs",
    description=(
        "Copies every table, as of one moment, into a new file in `backups/` beside the "
        "database (`COPY FROM DATABASE` in one transaction; ingest goes on meanwhile). Rows "
        "acknowledged in the last moments before it may still be in the journal and not in "
        "the copy. Needs an `admin` token. Restore: docs/operations.md."
    ),
)
def backup(db: DbDep, clock: ClockDep) -> BackupOut:
    """Write a backup and say where it is."""
    now = clock()
    target = backups.target_for(db, now)
    try:
        result = backups.backup(db, target)
    except (backups.BackupBusy, FileExistsError) as exc:
        raise HTTPException(409, detail=f"{exc}; try again in a few seconds") from None
    except (OSError, duckdb.Error) as exc:
        raise HTTPException(
            503,
            detail=f"the backup could not be written to {target.parent} ({exc}); check that "
            "the directory is writable and has room for a copy of the database",
        ) from None
    return BackupOut(
        path=str(result.path),
        bytes=result.bytes,
        requests=result.requests,
        seconds=round(result.seconds, 3),
    )
