"""A small cron expression: 'minute hour * * weekday' (the weekly email's schedule).

The settings hold it as text (they import nothing of the app); `check_setting` validates it
where the schedule is used: `tokenshape serve` before it opens anything, and the Runtime."""

from __future__ import annotations

from dataclasses import dataclass


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


def check_setting(expr: str) -> Cron:
    """TOKENSHAPE_REPORT_CRON parsed; ValueError worded as the settings' other errors are."""
    try:
        return parse_cron(expr)
    except ValueError as exc:
        raise ValueError(f"invalid setting: report_cron: {exc}") from None
