"""When the weekly email goes out: a small cron expression in a time zone, DST-correct."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Cron:
    """minute hour * * weekday (0 or 7 = Sunday), each a number, a list, a range or *."""

    minutes: frozenset[int]
    hours: frozenset[int]
    weekdays: frozenset[int]  # ISO: 1 = Monday … 7 = Sunday


def _field(text: str, lo: int, hi: int, name: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            step = int(step_text)
        if part == "*":
            start, end = lo, hi
        elif "-" in part:
            a, b = part.split("-", 1)
            start, end = int(a), int(b)
        else:
            start = end = int(part)
        if not lo <= start <= end <= hi or step < 1:
            raise ValueError(f"report schedule: {name} {text!r} is outside {lo}-{hi}")
        values.update(range(start, end + 1, step))
    return frozenset(values)


def parse_cron(expr: str) -> Cron:
    """Parse 'minute hour * * weekday'; raises ValueError naming the bad field."""
    parts = expr.split()
    if len(parts) != 5 or parts[2] != "*" or parts[3] != "*":
        raise ValueError(
            f"report schedule {expr!r}: use 'minute hour * * weekday', e.g. '0 8 * * 1' "
            "for Mondays at 08:00"
        )
    try:
        minutes = _field(parts[0], 0, 59, "minute")
        hours = _field(parts[1], 0, 23, "hour")
        days = _field(parts[4], 0, 7, "weekday")
    except ValueError as exc:
        if "outside" in str(exc):
            raise
        raise ValueError(f"report schedule {expr!r}: {exc}") from None
    return Cron(minutes, hours, frozenset(7 if d == 0 else d for d in days))


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


def week_bounds(week: str, tz: str) -> tuple[datetime, datetime]:
    """[Monday 00:00, next Monday 00:00) of an ISO week in tz, as UTC datetimes."""
    try:
        year_text, week_text = week.upper().split("-W")
        monday = date.fromisocalendar(int(year_text), int(week_text), 1)
    except ValueError:
        raise ValueError(f"week {week!r}: use an ISO week such as 2026-W47") from None
    zone = ZoneInfo(tz)
    start = datetime.combine(monday, time(0), tzinfo=zone).astimezone(UTC)
    end = datetime.combine(monday + timedelta(days=7), time(0), tzinfo=zone).astimezone(UTC)
    return start, end


class ReportScheduler:
    """Sends the weekly email from inside the server at the cron times (off without recipients
    or SMTP server). The clock and the sleep are injected, so tests can run it through DST."""

    def __init__(self, cron: Cron, tz: str, send_week, clock, sleep=None):
        self.cron, self.tz = cron, tz
        self.send_week = send_week  # week -> Outcome, run in a worker thread
        self.clock = clock
        self.sleep = sleep or asyncio.sleep
        self.last = None  # the last Outcome, for /api/health
        self.next: datetime | None = None
        self._task = None

    async def run(self, rounds: int | None = None) -> None:
        """Wait for each fire time and send the last full week (`rounds` limits it for tests)."""
        done = 0
        while rounds is None or done < rounds:
            now = self.clock()
            self.next = next_fire(self.cron, now, self.tz)
            await self.sleep(max((self.next - now).total_seconds(), 0))
            week = last_full_week(self.next, self.tz)
            try:
                self.last = await asyncio.to_thread(self.send_week, week)
            except Exception as exc:  # the server keeps running; the failure is shown
                self.last = f"{type(exc).__name__}: {exc}"
            done += 1

    def start(self) -> None:
        """Run in the background (from the app's lifespan)."""
        self._task = asyncio.create_task(self.run(), name="tokenshape-report-scheduler")

    async def stop(self) -> None:
        """Cancel the background task."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
            self._task = None
