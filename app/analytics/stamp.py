"""A cheap fingerprint of an engine's stored rows, so cached plans notice new data."""

from __future__ import annotations

import duckdb

from app.storage.rows import first_row


def data_stamp(cur: duckdb.DuckDBPyConnection, engine: str) -> tuple:
    """(rows, latest received_at) of the engine's requests: changes whenever rows arrive or
    retention deletes some."""
    row = first_row(
        cur, "SELECT count(*), max(received_at) FROM requests WHERE engine = ?", [engine]
    )
    return tuple(row or ())
