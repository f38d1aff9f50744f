"""Rows received at chosen moments, and which of them a prune left."""

from __future__ import annotations

from datetime import datetime, timedelta

import msgspec

from app.storage import rollups
from app.storage.batches import Batch, Reject
from app.storage.database import Database
from app.storage.write.store import RequestStore
from ingest.records import RecordIn, to_rows
from tests.support.records import record


def received_rows(prefix: str, n: int, received_at: datetime):
    """Arrow rows of n records (ids prefix-0..) received at one moment, started a minute before."""
    started = (received_at - timedelta(minutes=1)).isoformat()
    recs = [msgspec.convert(record(i, prefix, started_at=started), RecordIn) for i in range(n)]
    rows, bad = to_rows(recs, list(range(n)), gateway="gw", received_at=received_at)
    assert not bad
    return rows


def put(db: Database, prefix: str, n: int, received_at: datetime, rejects: int = 0) -> None:
    """n requests (ids prefix-0..) and `rejects` rejects received at one moment."""
    started = (received_at - timedelta(minutes=1)).isoformat()
    recs = [msgspec.convert(record(i, prefix, started_at=started), RecordIn) for i in range(n)]
    rows, bad = to_rows(recs, list(range(n)), gateway="gw", received_at=received_at)
    assert not bad
    quarantined = [Reject(i, "isl", f"{prefix} bad", None) for i in range(rejects)]
    con = db.new_cursor()
    try:
        RequestStore(con).write([Batch("gw", "test", received_at, rows, quarantined)])
        # As the mover would within a minute: retention takes only hours whose rollups are
        # built (a dirty hour waits for its rebuild).
        rollups.rebuild_all(con)
    finally:
        con.close()


def prefixes(db: Database, table: str = "requests") -> set[str]:
    """Which groups of rows are left, by request_id (or reject reason) prefix."""
    column, sep = ("request_id", "-") if table == "requests" else ("reason", " ")
    sql = f"SELECT DISTINCT split_part({column}, ?, 1) FROM {table}"
    return {r[0] for r in db.cursor().execute(sql, [sep]).fetchall()}
