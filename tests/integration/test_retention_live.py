"""Retention while ingest goes on: a prune of a large table on a serving server."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pyarrow.compute as pc

from app.storage import retention, rollups
from app.storage.batches import Batch
from app.storage.write.store import RequestStore
from tests.support.database import open_migrated
from tests.support.records import record
from tests.support.server import serve


def _fresh(n: int, prefix: str, now: datetime) -> list[dict]:
    """n records started a minute ago: new hours (a write into an old hour holds that hour
    back from the prune until its rebuild)."""
    started = (now - timedelta(minutes=1)).isoformat()
    return [record(i, prefix, started_at=started) for i in range(n)]


def test_ingest_answers_200_while_a_prune_deletes_a_large_table(settings):
    """The mover's inserts and the prune's deletes commit side by side (optimistic
    concurrency): no conflict reaches a client, no acknowledged row is lost."""
    from app.services.demo import generate

    now = datetime.now(UTC)
    with open_migrated(settings.db) as db:
        store = RequestStore(db.new_cursor())
        # 1.2M rows received over the last 60 days: 200,000 generated once, stored six times
        # under six request-id prefixes (generating is the slow part, not what is tested).
        base = generate(200_000, days=60, seed=1, end=now)
        column = base.schema.get_field_index("request_id")
        field = base.schema.field(column)
        for k in range(6):
            ids = pc.binary_join_element_wise(f"old{k}-", base.column(column), "")
            rows = base.set_column(column, field, ids.cast(field.type))
            store.write([Batch(f"old{k}", "demo", now, rows)])
        # Their rollups built, as the mover has long since for rows this old: retention takes
        # only clean hours.
        rollups.rebuild_all(store.con)
        store.con.close()
        old = db.cursor().execute("SELECT count(*) FROM requests").fetchone()[0]
        due = retention.count_due(db.cursor(), "requests", now - timedelta(days=7))
    assert due > 900_000
    # The app's clock is pinned to `now`, so the prune's cut-off is the one counted above.
    gen = serve(settings.model_copy(update={"retention_days": 7}), clock=lambda: now)
    live = next(gen)
    try:
        token = live.token()
        codes: list[int] = []
        done = threading.Event()
        pruned: list[retention.PruneResult] = []

        def prune() -> None:
            try:
                pruned.append(live.app.state.runtime.retention.prune_now())
            finally:
                done.set()

        with live.client(token) as c:
            assert c.post("/v1/requests", json=_fresh(200, "new-first", now)).status_code == 200
            thread = threading.Thread(target=prune)
            thread.start()
            k = 0
            while not done.is_set() or k < 5:  # during the prune, then a few more
                r = c.post("/v1/requests", json=_fresh(200, f"new{k}", now))
                codes.append(r.status_code)
                k += 1
            thread.join()
        assert set(codes) == {200} and pruned
        assert pruned[0].deleted["requests"] == due
        live.settle()
        assert live.scalar("SELECT count(*) FROM requests WHERE request_id LIKE 'new%'") == 200 * (
            k + 1
        )
        assert live.scalar("SELECT count(*) FROM requests") == old - due + 200 * (k + 1)
        assert live.scalar("SELECT min(received_at) FROM requests") >= now - timedelta(days=7)
        assert live.app.state.runtime.writer.state()["last_move_error"] is None
    finally:
        gen.close()
