"""Tokens served and the time spent on them, for costs per million tokens."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import duckdb

from app.analytics.filters import WEIGHT, Filter
from app.storage.rows import first_row


@dataclass(frozen=True)
class Tokens:
    """Weighted totals over a window: requests, input and output tokens, and seconds spent
    before the first token (prefill and its queue) and after it (decode), where measured."""

    requests: float
    input_tokens: float
    output_tokens: float
    ttft_s: float
    decode_s: float
    first: datetime | None = None  # the window's first request


def token_totals(cur: duckdb.DuckDBPyConnection, flt: Filter) -> Tokens:
    """The window's weighted token and time totals (sampled rows count 1/p)."""
    where, params = flt.where()
    row = first_row(
        cur,
        f"SELECT coalesce(sum({WEIGHT}), 0), coalesce(sum({WEIGHT} * isl), 0), "
        f"coalesce(sum({WEIGHT} * osl), 0), "
        f"coalesce(sum({WEIGHT} * ttft_ms) FILTER (WHERE e2e_ms IS NOT NULL), 0) / 1000.0, "
        f"coalesce(sum({WEIGHT} * greatest(e2e_ms - coalesce(ttft_ms, 0), 0)), 0) / 1000.0, "
        f"min(started_at) FROM requests WHERE {where}",
        params,
    )
    assert row is not None
    n, isl, osl, ttft_s, decode_s, first = row
    return Tokens(float(n), float(isl), float(osl), float(ttft_s), float(decode_s), first)
