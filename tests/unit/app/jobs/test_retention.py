"""The daily retention job (app/jobs/retention) keeps its schedule on a fake clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from app.jobs.retention import NAP_S, RetentionJob
from app.storage import retention
from app.storage.database import Database
from tests.support.retention import prefixes, put

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def test_the_job_prunes_daily_on_a_fake_clock(database: Database):
    db = database
    put(db, "a", 4, NOW - timedelta(days=2, minutes=1))  # due at the first run
    put(db, "b", 3, NOW - timedelta(days=1, hours=1))  # due at the second
    put(db, "c", 2, NOW - timedelta(hours=1))  # due at the third
    put(db, "d", 1, NOW + timedelta(hours=1))  # never within three runs
    clock = [NOW]
    seen: list[tuple[datetime, frozenset[str]]] = []

    async def sleep(seconds: float) -> None:
        assert 0 < seconds <= NAP_S  # naps of at most an hour
        seen.append((clock[0], frozenset(prefixes(db))))
        clock[0] += timedelta(seconds=seconds)

    job = RetentionJob(
        db, request_days=2, reject_days=1, clock=lambda: clock[0], sleep=sleep, first_delay_s=60
    )
    asyncio.run(job.run(rounds=3))
    first = NOW + timedelta(seconds=60)
    assert clock[0] == first + timedelta(days=2)  # ran at +60 s, +1 day, +2 days: no drift
    assert job.runs == 3 and job.next == first + timedelta(days=3)
    left = {when: groups for when, groups in seen}
    assert left[NOW] == {"a", "b", "c", "d"}  # nothing before the first run
    assert left[first] == {"b", "c", "d"}
    assert left[first + timedelta(days=1)] == {"c", "d"}
    assert prefixes(db) == {"d"}
    assert isinstance(job.last, retention.PruneResult) and job.last.deleted["requests"] == 2
