"""What the ingest side hands to storage: valid rows as Arrow, invalid items as rejects."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
import pyarrow as pa

from app.storage.schema import REJECTS_SCHEMA

# The longest `rejects.reason` / `field` kept: messages may echo what was sent (a 100 KB
# `status` value would otherwise make a 100 KB reason); `raw` keeps the item itself, cut to
# TOKENSHAPE_REJECT_RAW_CHARS when stored.
MAX_REASON_CHARS = 1000
MAX_FIELD_CHARS = 200
TRUNCATED = "…(truncated)"


def _capped(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - len(TRUNCATED)] + TRUNCATED


@dataclass(frozen=True)
class Reject:
    """One item (or a whole payload, index None) that could not be stored, and why; the
    reason and field are capped here, the one place every route's rejects pass through."""

    index: int | None
    field: str | None
    reason: str
    raw: str | None = None

    def __post_init__(self) -> None:
        if len(self.reason) > MAX_REASON_CHARS:
            object.__setattr__(self, "reason", _capped(self.reason, MAX_REASON_CHARS))
        if self.field is not None and len(self.field) > MAX_FIELD_CHARS:
            object.__setattr__(self, "field", _capped(self.field, MAX_FIELD_CHARS))


@dataclass
class Batch:
    """One shipment from one gateway: the rows to insert and the items to quarantine."""

    gateway: str
    format: str
    received_at: datetime
    rows: pa.Table | None
    rejects: list[Reject] = field(default_factory=list)
    # The rows' dedupe key hashes (`keys.key_hashes`) when the parser already made them.
    hashes: np.ndarray | None = None

    @property
    def row_count(self) -> int:
        """Rows to insert plus rejects to record: what the writer's queue bound counts."""
        return (self.rows.num_rows if self.rows is not None else 0) + len(self.rejects)


@dataclass(frozen=True)
class WriteResult:
    """What one batch's commit did: new rows stored, rows already present, rejects kept."""

    accepted: int
    duplicates: int
    rejected: int


def rejects_table(batch: Batch, raw_chars: int) -> pa.Table:
    """The batch's rejects as rows of the `rejects` table, raw text cut to raw_chars."""
    n = len(batch.rejects)
    return pa.table(
        {
            "received_at": pa.array(
                [batch.received_at] * n, REJECTS_SCHEMA.field("received_at").type
            ),
            "gateway": [batch.gateway] * n,
            "format": [batch.format] * n,
            "item_index": pa.array([r.index for r in batch.rejects], pa.int32()),
            "field": [r.field for r in batch.rejects],
            "reason": [r.reason for r in batch.rejects],
            "raw": [None if r.raw is None else r.raw[:raw_chars] for r in batch.rejects],
        },
        schema=REJECTS_SCHEMA,
    )
