"""How much of a window was sampled: stored rows, the requests they stand for, the rates."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from app.analytics.filters import WEIGHT, Filter
from app.storage.rows import first_row


@dataclass(frozen=True)
class SampleInfo:
    """Stored rows of a window, the requests they stand for (Σ 1/sample_rate, rounded), and
    the lowest and highest sample rate among them (None: no rows)."""

    rows: int
    estimated_requests: int
    min_rate: float | None
    max_rate: float | None

    @property
    def sampled(self) -> bool:
        """Whether some row was kept with a probability below 1."""
        return self.min_rate is not None and self.min_rate < 1

    def note(self) -> str | None:
        """ "estimated from a 1% sample of 2.3M requests", or None when nothing is sampled."""
        if not self.sampled or self.min_rate is None or self.max_rate is None:
            return None
        rates = percent(self.min_rate)
        if self.max_rate != self.min_rate:
            rates = f"{percent(self.min_rate)}–{percent(self.max_rate)}"
        return (
            f"estimated from a {rates} sample of {compact(self.estimated_requests)} requests "
            f"({self.rows:,} stored)"
        )

    def as_dict(self) -> dict:
        """The JSON the analytics APIs answer under `sampling`."""
        return {
            "rows": self.rows,
            "estimated_requests": self.estimated_requests,
            "min_rate": self.min_rate,
            "max_rate": self.max_rate,
            "note": self.note(),
        }


def percent(rate: float) -> str:
    """A rate as a short percentage: 1%, 0.1%, 12.5%, 100%."""
    value = rate * 100
    text = f"{value:.3g}" if value < 100 else "100"
    if "e" in text:  # below 0.001%: plain decimals read better than 1e-05%
        text = f"{value:.10f}".rstrip("0").rstrip(".")
    return f"{text}%"


def compact(n: int) -> str:
    """A count in a few characters: 812, 45.2k, 2.3M, 1.1B."""
    for size, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if n >= size:
            text = f"{n / size:.1f}".removesuffix(".0")
            return f"{text}{suffix}"
    return f"{n:,}"


def sampling(cur: duckdb.DuckDBPyConnection, flt: Filter) -> SampleInfo:
    """The window's SampleInfo (one scan of the sample_rate column)."""
    where, params = flt.where()
    row = first_row(
        cur,
        f"SELECT count(*), coalesce(round(sum({WEIGHT})), 0), min(coalesce(sample_rate, 1.0)), "
        f"max(coalesce(sample_rate, 1.0)) FROM requests WHERE {where}",
        params,
    )
    if not row or not row[0]:
        return SampleInfo(0, 0, None, None)
    return SampleInfo(int(row[0]), int(row[1]), float(row[2]), float(row[3]))
