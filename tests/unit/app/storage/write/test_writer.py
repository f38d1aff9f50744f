"""The writer's mover (app/storage/write/writer) on a clock that only sleep() moves."""

from __future__ import annotations

from app.storage.database import Database
from app.storage.write.writer import Writer


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
