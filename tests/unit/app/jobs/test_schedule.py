"""The weekly email's schedule (app/jobs/schedule, cron): local times across DST, an injected
clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from app.jobs.cron import parse_cron
from app.jobs.schedule import (
    ReportScheduler,
    last_full_week,
    next_fire,
)


def test_the_schedule_keeps_local_time_across_dst():
    cron = parse_cron("0 8 * * 1")  # Mondays 08:00 in Berlin
    before = datetime(2026, 10, 19, 7, 0, tzinfo=UTC)  # Mon 09:00 CEST: just after a fire
    first = next_fire(cron, before, "Europe/Berlin")
    assert first == datetime(2026, 10, 26, 7, 0, tzinfo=UTC)  # 08:00 CET, after the change
    summer = next_fire(cron, datetime(2026, 10, 12, 0, 0, tzinfo=UTC), "Europe/Berlin")
    assert summer == datetime(2026, 10, 12, 6, 0, tzinfo=UTC)  # 08:00 CEST
    with pytest.raises(ValueError, match="hour"):
        parse_cron("0 25 * * 1")
    assert last_full_week(datetime(2026, 10, 26, 7, tzinfo=UTC), "Europe/Berlin") == "2026-W43"


def test_the_scheduler_fires_at_local_times_with_an_injected_clock():
    now = [datetime(2026, 10, 18, 12, 0, tzinfo=UTC)]  # a Sunday, the server just started
    done: set[str] = set()
    sends: list[tuple[str, datetime]] = []

    async def fake_sleep(seconds: float) -> None:
        now[0] += timedelta(seconds=seconds)

    def send(week, _stop):
        sends.append((week, now[0]))
        done.add(week)
        return "sent"

    scheduler = ReportScheduler(
        parse_cron("0 8 * * 1"),
        "Europe/Berlin",
        send,
        done.__contains__,
        lambda: now[0],
        fake_sleep,
    )
    asyncio.run(scheduler.run(rounds=3))
    assert sends == [
        ("2026-W41", datetime(2026, 10, 18, 12, 0, tzinfo=UTC)),  # missed while down: caught up
        ("2026-W42", datetime(2026, 10, 19, 6, 0, tzinfo=UTC)),  # Monday 08:00 CEST
        ("2026-W43", datetime(2026, 10, 26, 7, 0, tzinfo=UTC)),  # Monday 08:00 CET
    ]


def test_a_failed_week_is_tried_again_until_it_is_sent():
    now = [datetime(2026, 11, 23, 8, 0, tzinfo=UTC)]  # Monday 08:00: W47 is due
    attempts: list[datetime] = []

    async def fake_sleep(seconds: float) -> None:
        now[0] += timedelta(seconds=seconds)

    def send(week, _stop):
        attempts.append(now[0])
        if len(attempts) < 3:
            raise OSError("connection refused")
        return "sent"

    scheduler = ReportScheduler(
        parse_cron("0 8 * * 1"),
        "UTC",
        send,
        lambda w: len(attempts) >= 3,
        lambda: now[0],
        fake_sleep,
    )
    asyncio.run(scheduler.run(rounds=3))
    assert [a - attempts[0] for a in attempts] == [
        timedelta(0),
        timedelta(minutes=30),
        timedelta(minutes=60),
    ]
    assert "OSError" in str(scheduler.last) or scheduler.last == "sent"
