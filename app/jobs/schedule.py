"""When the weekly email goes out: a small cron expression in a time zone, DST-correct."""

from __future__ import annotations

import asyncio
import logging
import re
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo

from app.jobs.base import Job
from app.jobs.cron import Cron

if TYPE_CHECKING:
    from app.reports.send import Outcome

log = logging.getLogger("tokenshape.reports")


def next_fire(cron: Cron, after: datetime, tz: str) -> datetime:
    """The first scheduled moment strictly after `after`, in UTC. A local time that a DST
    change skips fires when the clocks have jumped; a repeated one fires once."""
    zone = ZoneInfo(tz)
    local_day = after.astimezone(zone).date()
    for offset in range(0, 8 * 7):
        day = local_day + timedelta(days=offset)
        if day.isoweekday() not in cron.weekdays:
            continue
        for hour in sorted(cron.hours):
            for minute in sorted(cron.minutes):
                moment = datetime.combine(day, time(hour, minute), tzinfo=zone).astimezone(UTC)
                if moment > after:
                    return moment
    raise ValueError("report schedule never fires")  # unreachable with a valid Cron


def last_full_week(now: datetime, tz: str) -> str:
    """The ISO week ('2026-W47') that ended most recently before `now`, in tz."""
    today = now.astimezone(ZoneInfo(tz)).date()
    year, week, _ = (today - timedelta(days=7)).isocalendar()
    return f"{year}-W{week:02d}"


WEEK_FORMAT = re.compile(r"^(\d{4})-W(\d{2})$")


def canonical_week(week: str) -> str:
    """'2026-W47' exactly (the key the send history dedupes on); ValueError otherwise."""
    m = WEEK_FORMAT.match(week)
    try:
        if not m or not 2000 <= int(m.group(1)) <= 2999:
            raise ValueError
        date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    except ValueError:
        raise ValueError(f"week {week!r}: use an ISO week such as 2026-W47") from None
    return week


def week_bounds(week: str, tz: str) -> tuple[datetime, datetime]:
    """[Monday 00:00, next Monday 00:00) of an ISO week in tz, as UTC datetimes."""
    m = WEEK_FORMAT.match(canonical_week(week))
    assert m is not None
    monday = date.fromisocalendar(int(m.group(1)), int(m.group(2)), 1)
    zone = ZoneInfo(tz)
    start = datetime.combine(monday, time(0), tzinfo=zone).astimezone(UTC)
    end = datetime.combine(monday + timedelta(days=7), time(0), tzinfo=zone).astimezone(UTC)
    return start, end


RETRY_S = 30 * 60  # after a failed week, try again this often until it is sent


class ReportScheduler(Job):
    """Sends the weekly email from inside the server (off without recipients or SMTP server).

    On every wake-up it sends the last full week if that week is due (its fire time has passed)
    and not sent yet: a server that was down at the fire time catches up when it starts, and a
    failed week is tried again every 30 minutes until the next week replaces it. The clock and
    the sleep are injected, so tests can run it through DST."""

    name = "report-scheduler"
    what = "the weekly email"
    log = log

    def __init__(self, cron: Cron, tz: str, send_week, sent, clock, sleep=None):
        super().__init__()
        self.cron, self.tz = cron, tz
        self.send_week = send_week  # (week, stop event) -> Outcome, run in a worker thread
        self.sent = sent  # week -> bool: sent (or in doubt) already
        self.clock = clock
        self.sleep = sleep or asyncio.sleep
        self.last: Outcome | str | None = None  # the last Outcome or error, for /api/health
        self.next: datetime | None = None

    def due(self, now: datetime) -> str | None:
        """The last full week, if its fire time has passed and it was not sent."""
        week = last_full_week(now, self.tz)
        start, end = week_bounds(week, self.tz)
        fire = next_fire(self.cron, end - timedelta(microseconds=1), self.tz)
        return week if fire <= now and not self.sent(week) else None

    async def run(self, rounds: int | None = None) -> None:
        """Wake at each fire time (or to retry) and send what is due; `rounds` (for tests)
        stops after that many sends."""
        done = 0
        while rounds is None or done < rounds:
            now = self.clock()
            week = await asyncio.to_thread(self.due, now)
            if week is not None:
                try:
                    self.last = await self.in_thread(self.send_week, week, self.stopping)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # the server keeps running; the failure is shown
                    self.last = f"{type(exc).__name__}: {exc}"
                done += 1
                now = self.clock()
            self.next = next_fire(self.cron, now, self.tz)
            failed = week is not None and getattr(self.last, "status", "") != "sent"
            wake = min(self.next, now + timedelta(seconds=RETRY_S)) if failed else self.next
            # Sleep in chunks of at most an hour: a suspended host or a changed clock is
            # noticed, and an early wake-up cannot send twice (the week is sent by then).
            await self.sleep(min(max((wake - now).total_seconds(), 0), 3600))
