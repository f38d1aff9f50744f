"""Records mapped from another format, checked by exactly the native rules.

LiteLLM payloads and OTLP spans are first turned into native record dicts; this runs them
through the native parser and puts the native errors back in the source's terms (its item
indexes, its field names, its format prefix)."""

from __future__ import annotations

import json
from datetime import datetime

from app.storage.batches import Reject
from app.storage.schema import REQUESTS_SCHEMA
from ingest.formats.native import Parsed
from ingest.formats.native import parse as parse_native


def check(
    mapped: list[dict],
    origin: list[int],
    rejects: list[Reject],
    *,
    source_field: dict[str, str],
    prefix: str,
    items: int,
    gateway: str,
    received_at: datetime,
    max_items: int,
) -> Parsed:
    """Rows of the valid mapped records; rejects of the source and of the native rules."""
    if not mapped:
        return Parsed(REQUESTS_SCHEMA.empty_table(), rejects, items)
    native = parse_native(
        json.dumps(mapped).encode(),
        ndjson=False,
        gateway=gateway,
        received_at=received_at,
        max_items=max_items,
    )
    out = list(rejects)
    for r in native.rejects:
        field = source_field.get(r.field or "", r.field)
        message = f"{prefix}: {r.reason}"
        if r.field and field != r.field:
            message = f"{prefix}: {field} (as {r.field}): {r.reason}"
        where = origin[r.index] if r.index is not None else None
        out.append(Reject(where, field, message, r.raw))
    out.sort(key=lambda r: -1 if r.index is None else r.index)
    return Parsed(native.rows, out, items, native.hashes)
