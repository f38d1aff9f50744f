"""The plans warmer (app/jobs/plans) leaves the fleet's plans in the cache the pages read."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from app.jobs.plans import PlanWarmer
from app.services import economics
from app.sizing.slo import Fleet
from tests.support.records import record

NOW = datetime(2026, 11, 22, 12, tzinfo=UTC)


def test_rounds_fill_the_cache_and_a_failed_round_does_not_stop_the_job(live, ingest):
    recs = [
        record(i, "w", started_at=f"2026-11-{1 + i // 12:02d}T{(i % 12) * 2:02d}:10:00Z")
        for i in range(21 * 12)
    ]
    assert ingest.post("/v1/requests", json=recs).json()["accepted"] == len(recs)
    with live.client(live.token("admin")) as c:
        profile = {"model": "llama-3.1-8b", "gpu": "H100", "replicas": 2, "max_seq_len": 8192}
        assert c.put("/api/engines/chat-8b", json=profile).status_code == 200
    db = live.db
    calls: list[int] = []
    made: list[economics.FleetMoney] = []

    def compute() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("disk hiccup")  # the first round fails, the second works
        made.append(economics.fleet_money(db, now=NOW, tz="UTC", fleet=Fleet()))

    rounds = []

    async def sleep(seconds: float) -> None:
        rounds.append(seconds)
        if len(rounds) == 3:  # first delay, after round 1, after round 2
            job.stopping.set()

    job = PlanWarmer(compute, every_s=240, first_delay_s=5, sleep=sleep)
    asyncio.run(job.run())
    assert rounds == [5, 240, 240] and job.runs == 2 and job.last_error is None
    # What a page asks next is the warmed answer itself, not a new computation.
    (warmed,) = made[0].engines
    assert economics.engine_money(db, "chat-8b", now=NOW, tz="UTC", fleet=Fleet()) is warmed
    assert warmed.baseline is not None and warmed.baseline.peak_replicas == 2
