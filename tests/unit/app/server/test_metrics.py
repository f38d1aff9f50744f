"""Metrics (app/server/metrics) without a server: one registry per app, the writer's observer."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from app.config import Settings
from app.main import create_app
from app.server.metrics import Metrics
from app.storage.batches import Batch, WriteResult
from app.storage.database import Database
from app.storage.write.writer import Writer
from ingest.records import RecordIn, to_rows


def test_each_app_counts_on_its_own_registry(tmp_path):
    one = create_app(Settings(db=tmp_path / "a.duckdb", _env_file=None))
    two = create_app(Settings(db=tmp_path / "b.duckdb", _env_file=None))
    b = Batch("gw", "native", datetime.now(UTC), None)
    one.state.runtime.metrics.flushed(
        0.01, [b], [WriteResult(accepted=4, duplicates=0, rejected=0)]
    )
    labels = {"gateway": "gw", "format": "native", "outcome": "accepted"}
    assert (
        one.state.runtime.metrics.registry.get_sample_value(
            "tokenshape_ingest_records_total", labels
        )
        == 4
    )
    assert (
        two.state.runtime.metrics.registry.get_sample_value(
            "tokenshape_ingest_records_total", labels
        )
        is None
    )


def _batch(ids: list[str], *, broken: bool = False) -> Batch:
    now = datetime.now(UTC)
    recs = [RecordIn(model="m", isl=1, osl=1, request_id=i) for i in ids]
    rows, _ = to_rows(recs, list(range(len(ids))), gateway="g", received_at=now)
    # Without its `model` column the batch cannot be stored: the whole flush fails.
    return Batch("g", "native", now, rows.drop_columns(["model"]) if broken else rows)


class Exploding:
    """An observer that fails every time it is told something."""

    def flushed(self, *args) -> None:
        raise RuntimeError("observer bug")

    def flush_failed(self, *args) -> None:
        raise RuntimeError("observer bug")


def test_writer_reports_flushes_and_failures_to_its_observer(fresh_db, tmp_path):
    async def run(db: Database, observer, tag: str) -> tuple[WriteResult, str, WriteResult]:
        writer = Writer(db, flush_ms=0, observer=observer)
        await writer.start()
        try:
            stored = await writer.submit(_batch(["a", "b"]))
            try:
                await writer.submit(_batch(["c"], broken=True))
                failure = "none"
            except Exception as exc:
                failure = type(exc).__name__
            later = await writer.submit(_batch([tag]))  # the writer still runs
        finally:
            await writer.stop()
        return stored, failure, later

    with fresh_db(tmp_path / "w.duckdb") as db:
        metrics = Metrics(db, lambda: None)
        stored, failure, later = asyncio.run(run(db, metrics, "d"))
        assert (stored.accepted, later.accepted) == (2, 1)
        assert failure not in ("none", "WriterStopped")
        get = metrics.registry.get_sample_value
        labels = {"gateway": "g", "format": "native", "outcome": "accepted"}
        assert get("tokenshape_ingest_records_total", labels) == 3
        assert get("tokenshape_writer_flush_seconds_count") == 2
        assert get("tokenshape_writer_flush_failures_total") == 1
        # An observer that raises is logged and ignored: waiters get answers, the writer runs on.
        stored, failure, later = asyncio.run(run(db, Exploding(), "e"))
        assert (stored.duplicates, later.accepted) == (2, 1)
        assert failure not in ("none", "WriterStopped")
