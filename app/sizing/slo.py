"""Latency targets (SLOs) and the fleet's defaults for them and for money.

An engine's SLO is a set of targets on TTFT, ITL and optionally E2E at one percentile
("TTFT p95 ≤ 500 ms, ITL p95 ≤ 50 ms"). A request *meets* the SLO when every targeted value was
measured and is within its target; one that measured a value above its target *missed*; one
missing a targeted value (and missing nothing it measured) is *not measured* and counted apart.
Goodput is the weighted share good ÷ (good + missed) (app/analytics/goodput.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from app.sizing.profile import EngineProfile

DEFAULT_PERCENTILE = 95.0


@dataclass(frozen=True)
class Fleet:
    """Fleet-wide defaults an engine's profile may override (from the settings)."""

    slo_ttft_ms: float | None = None
    slo_itl_ms: float | None = None
    slo_e2e_ms: float | None = None
    slo_percentile: float = DEFAULT_PERCENTILE
    cost_per_gpu_hour: float | None = None
    currency: str = "$"
    api_price_input_per_mtok: float | None = None
    api_price_output_per_mtok: float | None = None

    @classmethod
    def of(cls, settings: object) -> Fleet:
        """The defaults from a Settings object (any object with the same attribute names)."""
        names = cls.__dataclass_fields__
        return cls(**{n: getattr(settings, n) for n in names if hasattr(settings, n)})


@dataclass(frozen=True)
class Slo:
    """Targets at one percentile; `source` says whether the engine or the fleet set them."""

    ttft_ms: float | None
    itl_ms: float | None
    e2e_ms: float | None = None
    percentile: float = DEFAULT_PERCENTILE
    source: str = "engine"

    @property
    def quantile(self) -> float:
        """The percentile as a fraction (95 → 0.95)."""
        return self.percentile / 100.0

    def words(self) -> str:
        """'TTFT p95 ≤ 500 ms, ITL p95 ≤ 50 ms'."""
        p = f"p{self.percentile:g}"
        parts = [
            f"{name} {p} ≤ {value:,.0f} ms" if value >= 10 else f"{name} {p} ≤ {value:g} ms"
            for name, value in (("TTFT", self.ttft_ms), ("ITL", self.itl_ms), ("E2E", self.e2e_ms))
            if value is not None
        ]
        return ", ".join(parts)

    def as_dict(self) -> dict[str, object]:
        """The JSON form."""
        return {
            "ttft_ms": self.ttft_ms,
            "itl_ms": self.itl_ms,
            "e2e_ms": self.e2e_ms,
            "percentile": self.percentile,
            "source": self.source,
            "words": self.words(),
        }


def slo_for(profile: EngineProfile | None, fleet: Fleet = Fleet()) -> Slo | None:
    """The engine's targets, each falling back to the fleet's; None when neither sets any."""
    own = profile is not None and any(
        v is not None for v in (profile.slo_ttft_ms, profile.slo_itl_ms, profile.slo_e2e_ms)
    )
    if own:
        assert profile is not None
        return Slo(
            profile.slo_ttft_ms,
            profile.slo_itl_ms,
            profile.slo_e2e_ms,
            profile.slo_percentile or fleet.slo_percentile,
            "engine",
        )
    if any(v is not None for v in (fleet.slo_ttft_ms, fleet.slo_itl_ms, fleet.slo_e2e_ms)):
        percentile = (profile.slo_percentile if profile else None) or fleet.slo_percentile
        return Slo(fleet.slo_ttft_ms, fleet.slo_itl_ms, fleet.slo_e2e_ms, percentile, "fleet")
    return None


def cost_for(profile: EngineProfile | None, fleet: Fleet = Fleet()) -> float | None:
    """What one GPU-hour of this engine costs: its own figure, else the fleet's."""
    if profile is not None and profile.cost_per_gpu_hour is not None:
        return profile.cost_per_gpu_hour
    return fleet.cost_per_gpu_hour


def api_prices(
    profile: EngineProfile | None, fleet: Fleet = Fleet()
) -> tuple[float | None, float | None]:
    """The comparison API's price per million (input, output) tokens."""
    own_in = profile.api_price_input_per_mtok if profile else None
    own_out = profile.api_price_output_per_mtok if profile else None
    return (
        own_in if own_in is not None else fleet.api_price_input_per_mtok,
        own_out if own_out is not None else fleet.api_price_output_per_mtok,
    )


def money(value: float | None, currency: str = "$") -> str:
    """'$4,210' (a symbol before the figure) or '4,210 EUR' (a code after it); '' for None."""
    if value is None:
        return ""
    figure = f"{value:,.0f}"
    return f"{currency}{figure}" if len(currency) == 1 else f"{figure} {currency}"
