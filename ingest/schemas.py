"""Response bodies of the ingest routes."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ItemError(BaseModel):
    """Why one item of a batch was rejected."""

    index: int | None = Field(
        description="0-based position of the item in the array; for NDJSON its 0-based line."
    )
    field: str | None = Field(description="The offending field, when one is to blame.")
    message: str


class IngestResponse(BaseModel):
    """Partial success: what was stored, what was already there, what was quarantined."""

    accepted: int
    duplicates: int
    rejected: int
    errors: list[ItemError] = Field(description="The first 100 item errors.")
