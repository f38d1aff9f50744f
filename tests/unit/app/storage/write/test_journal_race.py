"""The confirm step against a move that commits between its two looks (deterministic)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.storage.batches import Batch
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.journal import Journal
from app.storage.write.store import RequestStore
from tests.support.records import request_rows


def test_a_move_committing_mid_check_never_lets_a_duplicate_in(fresh_db, tmp_path):
    now = datetime.now(UTC)
    with fresh_db(tmp_path / "r.duckdb") as db:
        store = RequestStore(db.new_cursor(), journal=Journal(tmp_path / "r.j", REQUESTS_SCHEMA))
        store.write([Batch("g", "t", now, request_rows(["a"]))])
        mover = db.new_cursor()
        looks = {"n": 0}

        def then_move(look):
            def wrapped(cand):
                seen = look(cand)
                looks["n"] += 1
                if looks["n"] == 1:  # between the two looks the mover commits and forgets
                    store.move(mover)
                return seen

            return wrapped

        store._journaled = then_move(store._journaled)
        store._stored = then_move(store._stored)
        (r,) = store.write([Batch("g", "t", now, request_rows(["a"]))])
        assert (r.accepted, r.duplicates) == (0, 1)
        assert db.cursor().execute("SELECT count(*) FROM requests").fetchall()[0][0] == 1
