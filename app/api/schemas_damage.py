"""What /api/health says about damaged files moved to the quarantine folder."""

from __future__ import annotations

from pydantic import BaseModel, Field


class DamageOut(BaseModel):
    """One quarantined file no operator has acknowledged yet."""

    name: str = Field(description="The file's name in the quarantine folder.")
    kind: str = Field(description="What it was: journal segment, …")
    original: str = Field(description="Where it was found.")
    problem: str = Field(description="What was wrong with it, in words.")
    recovered_rows: int = Field(description="Rows read back from it and stored.")
    lost_rows: int | None = Field(description="Rows lost to the damage; null: not countable.")
    at: str = Field(description="When it was quarantined (ISO 8601, UTC).")
