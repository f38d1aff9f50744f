"""The single writer under load: concurrent shippers, group commit, saturation."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from app.storage.database import Database
from app.storage.write.writer import Writer
from tests.conftest import serve
from tests.fixtures import batch

ROOT = Path(__file__).resolve().parents[1]


def test_eight_concurrent_shippers_exact_counts(live):
    token = live.token("ingest")
    errors: list[str] = []
    per_shipper, size = 15, 40

    def ship(k: int) -> None:
        with live.client(token) as c:
            for b in range(per_shipper):
                # Every other batch overlaps the previous one: duplicates must be exact too.
                start = b * size - (size // 2 if b % 2 else 0)
                r = c.post("/v1/requests", json=batch(size, f"s{k}", start=max(start, 0)))
                if r.status_code != 200:
                    errors.append(f"{r.status_code} {r.text}")

    threads = [threading.Thread(target=ship, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    expected_per_shipper = per_shipper * size - (per_shipper // 2) * (size // 2)
    assert live.scalar("SELECT count(*) FROM requests") == 8 * expected_per_shipper
    assert (
        live.scalar(
            "SELECT count(*) FROM (SELECT gateway, request_id FROM requests GROUP BY ALL "
            "HAVING count(*) > 1)"
        )
        == 0
    )
    health = httpx.get(live.url + "/api/health").json()["writer"]
    assert health["rows_accepted"] == 8 * expected_per_shipper
    assert health["rows_duplicate"] == 8 * (per_shipper // 2) * (size // 2)
    assert health["flushes"] <= health["batches"]


def test_saturated_writer_answers_503_with_retry_after(settings):
    tight = settings.model_copy(update={"writer_queue_rows": 5, "writer_flush_ms": 800.0})
    gen = serve(tight)
    live = next(gen)
    try:
        token = live.token("ingest")
        first: list[httpx.Response] = []
        t = threading.Thread(
            target=lambda: first.append(
                httpx.post(
                    live.url + "/v1/requests",
                    json=batch(4, "a"),
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=30,
                )
            )
        )
        t.start()
        time.sleep(0.3)  # the first batch waits in the queue for company
        r = httpx.post(
            live.url + "/v1/requests",
            json=batch(4, "b"),
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        t.join()
        assert r.status_code == 503
        assert r.headers["retry-after"] == "1"
        assert "retry" in r.json()["detail"]
        assert first[0].status_code == 200 and first[0].json()["accepted"] == 4
        assert live.scalar("SELECT count(*) FROM requests") == 4
    finally:
        gen.close()


class _Clock:
    """The writer module's clock: monotonic time that only sleep() moves."""

    def __init__(self):
        self.now = 1000.0
        self.slept = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds
        self.slept += seconds


class _Backlog:
    def __init__(self, rows: int):
        self.unmoved_rows = rows


def test_the_mover_gathers_a_row_group_only_while_flushes_keep_coming(tmp_path, monkeypatch):
    from app.storage.write import writer as module

    clock = _Clock()
    monkeypatch.setattr(module, "time", clock)
    w = Writer(Database(tmp_path / "g.duckdb"))
    try:
        w._last_flush = clock.now - 1.0  # traffic paused: move at once
        w._gather(_Backlog(10))
        assert clock.slept == 0
        w._prev_flush, w._last_flush = clock.now - 5.0, clock.now  # a lone flush: at once
        w._gather(_Backlog(10))
        assert clock.slept == 0
        w._prev_flush = clock.now - 0.01  # two flushes in a row, a small backlog: wait a bit
        with w.incoming():  # ... while a shipper's next batch is arriving
            w._gather(_Backlog(10))
        assert module.QUIET_S <= clock.slept <= module.QUIET_S + 0.02

        class Busy:  # flushes keep coming all along
            @property
            def unmoved_rows(self):
                w._last_flush = clock.now
                return 10

        clock.slept = 0
        w._pending_rows = 1000
        w._gather(Busy())
        assert module.MOVE_AFTER_S <= clock.slept <= module.MOVE_AFTER_S + 0.02
        clock.slept = 0
        w._prev_flush, w._last_flush = clock.now - 0.01, clock.now
        w._gather(_Backlog(module.MOVE_ROWS))  # a whole row group: move now
        w._stopping = True
        w._gather(_Backlog(10))  # stopping: move now
        assert clock.slept == 0
    finally:
        w._executor.shutdown()


def test_the_mover_moves_soon_when_no_ingest_request_is_arriving(tmp_path, monkeypatch):
    """A pause with a shipper's batch arriving or queued is a stall (wait QUIET_S for more);
    with none, traffic has ended and the rows move after IDLE_S."""
    from app.storage.write import writer as module

    clock = _Clock()
    monkeypatch.setattr(module, "time", clock)
    w = Writer(Database(tmp_path / "i.duckdb"))
    try:
        w._prev_flush, w._last_flush = clock.now - 0.01, clock.now
        with w.incoming():  # a batch is being read or parsed
            w._gather(_Backlog(10))
        assert module.QUIET_S <= clock.slept <= module.QUIET_S + 0.02
        clock.slept = 0
        w._prev_flush, w._last_flush = clock.now - 0.01, clock.now
        w._pending_rows = 1000  # a batch is queued for the next flush
        w._gather(_Backlog(10))
        assert module.QUIET_S <= clock.slept <= module.QUIET_S + 0.02
        clock.slept = 0
        w._pending_rows = 0
        w._prev_flush, w._last_flush = clock.now - 0.01, clock.now
        w._gather(_Backlog(10))  # nothing arriving, nothing queued
        assert module.IDLE_S <= clock.slept <= module.IDLE_S + 0.02 < module.QUIET_S

        class Periodic:  # a shipper whose batch comes every 0.15 s: idle between, not done
            def __init__(self):
                self.next = clock.now + 0.15

            @property
            def unmoved_rows(self):
                if clock.now >= self.next:
                    w._prev_flush, w._last_flush = w._last_flush, clock.now
                    self.next = clock.now + 0.15
                return 10

        clock.slept = 0
        w._prev_flush, w._last_flush = clock.now - 0.15, clock.now
        w._gather(Periodic())
        assert module.MOVE_AFTER_S <= clock.slept <= module.MOVE_AFTER_S + 0.02
    finally:
        w._executor.shutdown()


def test_the_mover_gathers_before_every_move_not_only_the_first(tmp_path, monkeypatch):
    """Rows that arrive during a long move are a fraction of a row group: they gather too."""
    w = Writer(Database(tmp_path / "m.duckdb"))

    class Store:
        unmoved_rows = 3

        def __init__(self):
            self.log: list[str] = []

        def move(self, con):
            self.log.append("move")
            self.unmoved_rows -= 1

    class Con:
        def close(self):
            pass

    store = Store()
    monkeypatch.setattr(w, "_gather", lambda s: store.log.append("gather"))
    monkeypatch.setattr(w, "_rebuild_rollups", lambda con: None)
    try:
        w._store = store
        w._stopping = True
        w._move_wanted.set()
        w._move_loop(Con())
        assert store.log == ["gather", "move"] * 3
    finally:
        w._executor.shutdown()


def test_the_server_process_is_tuned_and_other_processes_keep_the_defaults():
    """`tokenshape serve` freezes start-up objects out of collections, collects the young
    generation less often and gives Arrow an allocator that keeps its pages; a fresh
    interpreter (tests, other commands) keeps Python's and Arrow's defaults."""
    probe = (
        "import gc, sys, pyarrow as pa\n"
        "before = (gc.get_threshold()[0], gc.get_freeze_count() > 0, sys.getswitchinterval())\n"
        "from app.server.tuning import tune_server_process\n"
        "tune_server_process()\n"
        "after = (gc.get_threshold()[0], gc.get_freeze_count() > 0, sys.getswitchinterval())\n"
        "print(before, after, pa.default_memory_pool().backend_name)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout.split(") ")
    assert out[0] == "(700, False, 0.005"
    assert out[1] == "(20000, True, 0.0005"
    assert out[2].strip() in ("jemalloc", "system")
