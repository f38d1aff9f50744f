"""Annotations on the timeline: notes people add and every profile change, /api/annotations."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, HTTPException, Query, Response
from pydantic import BaseModel, Field

from app.api.params import Time
from app.auth.bearer import require_scope
from app.server.deps import ClockDep, DbDep
from app.server.errors import ErrorResponse
from app.services import annotations as service
from app.services import profiles

router = APIRouter(tags=["annotations"])
AdminDep = Depends(require_scope("admin"))


class AnnotationOut(BaseModel):
    """A note or a profile change at a moment."""

    id: str = Field(description="A note's id (to delete it), or profile:ENGINE:SEQ.")
    kind: str = Field(description="note (added by someone) or profile (a profile change).")
    at: datetime
    text: str
    engine: str | None = Field(description="The engine it is about; none: the whole fleet.")
    author: str = Field(description='A user\'s name, "token GATEWAY/ID", "open mode" or "cli".')
    deletable: bool = Field(description="Notes can be deleted; profile changes are history.")


class NoteIn(BaseModel):
    """A note to add."""

    text: str = Field(description=f"One line, at most {service.MAX_TEXT} characters.")
    at: Time | None = Field(None, description="When it happened, ISO 8601 (default: now).")
    engine: str | None = Field(None, description="The engine it is about (default: none).")


@router.get(
    "/api/annotations",
    response_model=list[AnnotationOut],
    summary="Notes and profile changes in a window",
)
def list_annotations(
    db: DbDep,
    clock: ClockDep,
    start: Annotated[
        Time | None, Query(description="Window start, ISO 8601 (default: 30 days before end).")
    ] = None,
    end: Annotated[
        Time | None, Query(description="Window end, exclusive (default: none, so all after).")
    ] = None,
    engine: Annotated[
        str | None,
        Query(max_length=256, description="This engine's and the fleet-wide ones only."),
    ] = None,
    limit: Annotated[
        int, Query(ge=1, le=service.MAX_LIST, description="At most this many, the newest.")
    ] = 500,
) -> list[dict[str, Any]]:
    """The window's notes and profile changes, oldest first (a read token or a session)."""
    try:
        start, end = service.window(start, end, clock())
    except ValueError as exc:
        raise HTTPException(422, detail=f"invalid parameters: {exc}") from None
    return [a.as_dict() for a in service.between(db, start, end, engine or None, limit)]


@router.post(
    "/api/annotations",
    status_code=201,
    response_model=AnnotationOut,
    summary="Add a note (admin token)",
)
def post_annotation(
    body: NoteIn, db: DbDep, clock: ClockDep, token: Annotated[Any, AdminDep]
) -> dict[str, Any]:
    """Store a note; 422 naming the field when the text is empty, too long or not one line,
    or the time or engine is not one."""
    try:
        note = service.add_note(
            db,
            body.text,
            clock(),
            at=body.at,
            engine=body.engine,
            author=profiles.token_author(token.gateway, token.id),
        )
    except ValueError as exc:
        raise HTTPException(422, detail=str(exc)) from None
    return note.as_dict()


@router.delete(
    "/api/annotations/{note_id}",
    status_code=204,
    responses={
        404: {"model": ErrorResponse, "description": "No note has this id."},
        409: {"model": ErrorResponse, "description": "A profile change: history stays."},
    },
    summary="Delete a note (admin token)",
    dependencies=[AdminDep],
)
def delete_annotation(note_id: str, db: DbDep) -> Response:
    """Delete a note; profile changes cannot be deleted (they are the engine's history)."""
    if note_id.startswith("profile:"):
        raise HTTPException(
            409,
            detail=f"{note_id[:300]!r} is a profile change, which stays in the engine's "
            "history; to undo it, edit the profile or restore it (POST "
            "/api/engines/{name}/restore)",
        )
    if not service.delete_note(db, note_id):
        raise HTTPException(
            404,
            detail=f"no note has id {note_id[:300]!r}; GET /api/annotations lists them",
        )
    return Response(status_code=204)
