"""The one filter every analytics query takes, turned into a WHERE clause with bound values."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

from app.storage.schema import WEIGHT

# The requests a stored row stands for, 1 / sample_rate (NULL: 1). Every count is sum(WEIGHT),
# every rate and share a ratio of such sums, every quantile a weighted quantile. Re-exported
# here so analytics, goodput and the services weigh rows by one expression.
__all__ = ["EARLIEST", "LATEST", "WEIGHT", "Filter", "time_problem"]

# The times a window may name: every bucket, zone shift and interval sum stays inside Python's
# and DuckDB's calendars (year 1 or 9999 with an offset overflows both).
EARLIEST = datetime(1970, 1, 1, tzinfo=UTC)
LATEST = datetime(2200, 1, 1, tzinfo=UTC)


def time_problem(name: str, value: datetime | None) -> str | None:
    """What is wrong with a window bound outside EARLIEST…LATEST, naming it; None if fine."""
    if value is None:
        return None
    aware = value if value.tzinfo else value.replace(tzinfo=UTC)
    try:
        inside = EARLIEST <= aware < LATEST
    except OverflowError:  # year 1 with a positive offset is before year 1 in UTC
        inside = False
    if inside:
        return None
    return (
        f"{name}: {value.isoformat()} is outside the supported range "
        f"{EARLIEST:%Y-%m-%d} to {LATEST:%Y-%m-%d} (UTC)"
    )


@dataclass(frozen=True)
class Filter:
    """Time window [start, end) and the dimensions to keep; empty tuples mean all."""

    start: datetime | None = None
    end: datetime | None = None
    models: tuple[str, ...] = ()
    engines: tuple[str, ...] = ()
    gateways: tuple[str, ...] = ()
    tenants: tuple[str, ...] = ()
    statuses: tuple[str, ...] = field(default=())
    hours: tuple[int, ...] = ()  # local hours of day in `tz` (seasonal windows)
    weekdays: tuple[int, ...] = ()  # local ISO weekdays in `tz`, 1 = Monday
    tz: str = "UTC"

    def dimensions(self) -> dict[str, tuple[str, ...]]:
        """The dimension columns this filter narrows, with the values it keeps."""
        return {
            column: values
            for column, values in (
                ("model", self.models),
                ("engine", self.engines),
                ("gateway", self.gateways),
                ("tenant", self.tenants),
                ("status", self.statuses),
            )
            if values
        }

    def dims_where(self) -> tuple[str, list]:
        """The condition on the dimensions alone (also columns of the hourly rollups)."""
        parts: list[str] = ["TRUE"]
        params: list = []
        for column, values in self.dimensions().items():
            # A list parameter: one placeholder whatever the number of values.
            parts.append(f"list_contains(?, {column})")
            params.append(list(values))
        return " AND ".join(parts), params

    def where(self) -> tuple[str, list]:
        """SQL condition (never empty) and its parameters, in order."""
        parts: list[str] = ["TRUE"]
        params: list = []
        if self.start is not None:
            parts.append("started_at >= ?")
            params.append(self.start)
        if self.end is not None:
            parts.append("started_at < ?")
            params.append(self.end)
        dims, dim_params = self.dims_where()
        parts.append(dims)
        params += dim_params
        if self.hours:
            parts.append("list_contains(?, hour(started_at AT TIME ZONE ?))")
            params += [list(self.hours), self.tz]
        if self.weekdays:
            parts.append("list_contains(?, isodow(started_at AT TIME ZONE ?))")
            params += [list(self.weekdays), self.tz]
        return " AND ".join(parts), params
