"""Seasonal engines (DESIGN §7): hour-of-day demand, replica plans, the best two-window split.

Model (docs/sizing.md "Seasonal engines"):
- Per local hour h, over whole weeks: the peak over days of the arrival rate and of the KV
  demand in token-seconds per second (Σ E2E × (ISL + OSL/2) / seconds in that hour), and the
  requests in flight at that peak (peak rate × mean E2E, Little's law).
- A configuration (one set of bounds) admits `slots` requests per replica, at most its batch
  size: `kv_capacity // max_seq_len` when the engine reserves each request's whole length
  (TensorRT-LLM's no-evict scheduler), `kv_capacity // E[ISL + OSL/2]` when its cache is paged
  (vLLM, SGLang: requests hold what they use; the KV demand is checked in tokens as well).
- Replicas for hour h: the larger of the memory need (enough slots and enough KV for the peak
  with headroom, default 20%) and the latency need (the fewest replicas whose predicted TTFT
  and ITL at the hour's peak rate and ISL × OSL mix meet the engine's SLO: app/sizing/slo_plan.py,
  computed by the service floor and passed in as `latency_need`); when the profile has a
  measured per-replica throughput, enough replicas for the peak rate too.
- Plans: (a) one configuration, replicas for the peak hour all day; (b) the same configuration,
  replicas per hour; (c) two windows [a, b) and the rest, each with its own bounds (from the
  window's traffic) and replicas per hour — every split of the 24 hours into two windows of at
  least four hours is tried; among
  splits with equal GPU-hours the one whose windows differ most (max_seq_len ratio weighted by
  the shorter window's length) is shown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from app.sizing.recommend import DEFAULT_HEADROOM, round_up
from app.sizing.slo import money

DEFAULT_THRESHOLD = 0.10
# A window shorter than this is not worth an engine swap (a restart takes minutes, and a few
# hours of traffic say little about a window's shape).
MIN_WINDOW_HOURS = 4


@dataclass(frozen=True)
class HourDemand:
    """An engine's demand per local hour (index 0–23)."""

    peak_rate: np.ndarray  # requests/s, peak over days
    mean_rate: np.ndarray  # requests/s, mean over days
    in_flight: np.ndarray  # requests in flight at the peak (peak rate × mean E2E)
    kv_tokens: np.ndarray  # KV tokens in use at the peak (token-seconds per second)
    mean_footprint: np.ndarray  # E[ISL + OSL/2] per hour (tokens)
    hist: dict[str, np.ndarray]  # "isl", "osl", "seq": 24 × buckets of `granularity` tokens
    granularity: int


@dataclass(frozen=True)
class WindowConfig:
    """A configuration for a set of hours: its bounds and what one replica holds."""

    hours: tuple[int, ...]
    max_input_len: int
    max_seq_len: int
    slots: int


# Weeks in an average month (365.25 / 12 / 7), for money per month.
WEEKS_PER_MONTH = 365.25 / 12 / 7
HOURS_PER_MONTH = WEEKS_PER_MONTH * 7 * 24
# What set an hour's replicas, in words (plans' `binding`, the recommendation's Replicas).
BINDING_WORDS = {
    "memory": "the KV cache",
    "latency": "the latency targets",
    "throughput": "the measured requests/s per replica",
    "minimum": "the minimum of one replica",
}


@dataclass(frozen=True)
class Plan:
    """Replicas per hour and GPU-hours per week of one plan."""

    name: str
    replicas: list[int]
    gpu_hours_week: float
    configs: list[WindowConfig] = field(default_factory=list)
    cost_week: float | None = None
    # Per hour, what set its replica count: "memory", "latency", "throughput" or "minimum".
    binding: list[str] = field(default_factory=list)

    @property
    def cost_month(self) -> float | None:
        """The plan's cost over an average month."""
        return None if self.cost_week is None else self.cost_week * WEEKS_PER_MONTH

    @property
    def gpu_hours_month(self) -> float:
        """GPU-hours over an average month."""
        return self.gpu_hours_week * WEEKS_PER_MONTH


@dataclass(frozen=True)
class Seasonal:
    """The three plans, the verdict, and the savings of the best split."""

    static: Plan
    hourly: Plan
    split: Plan | None
    savings_vs_static: float
    savings_vs_hourly: float
    verdict: str
    threshold: float
    now: Plan | None = None  # the replicas running today, all day (when the profile says)


def demand_from(
    cells: list[tuple[str, int, int, float, float, int]],
    seconds: dict[tuple[str, int], int],
    footprint_sum: np.ndarray,
    count: np.ndarray,
    hist: dict[str, np.ndarray],
    granularity: int,
) -> HourDemand:
    """Hourly demand from (local date, hour, requests, KV token-seconds, E2E seconds, E2E count)
    cells and the real seconds of each (date, hour) — DST hours count what they really last."""
    peak = np.zeros(24)
    kv = np.zeros(24)
    total = np.zeros(24)
    e2e_sum = np.zeros(24)
    e2e_n = np.zeros(24)
    hour_seconds = np.zeros(24)
    for (_, h), secs in seconds.items():
        hour_seconds[h] += secs
    for day, h, n, kv_ts, e2e_s, n_e2e in cells:
        secs = seconds.get((day, int(h)), 3600)
        peak[h] = max(peak[h], n / secs)
        # Requests without a total time count at the hour's average (KV token-seconds scaled
        # up by requests / requests with e2e_ms).
        kv[h] = max(kv[h], kv_ts * (n / n_e2e if n_e2e else 0) / secs)
        total[h] += n
        e2e_sum[h] += e2e_s
        e2e_n[h] += n_e2e
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_e2e = np.where(e2e_n > 0, e2e_sum / e2e_n, 0.0)
        mean_rate = np.where(hour_seconds > 0, total / hour_seconds, 0.0)
        footprint = np.where(count > 0, footprint_sum / count, 0.0)
    return HourDemand(peak, mean_rate, peak * mean_e2e, kv, footprint, hist, granularity)


def _bound(hist_rows: np.ndarray, coverage: float, granularity: int) -> int:
    """The coverage quantile of merged hours, rounded up to the granularity (from g-wide
    buckets: the upper edge of the bucket holding the quantile's order statistic)."""
    counts = hist_rows.sum(axis=0)
    n = int(counts.sum())
    if n == 0:
        return granularity
    rank = math.ceil(coverage * (n - 1))  # 0-based order statistic
    bucket = int(np.searchsorted(np.cumsum(counts), rank + 1))
    return round_up((bucket + 1) * granularity, granularity)


def window_config(
    d: HourDemand,
    hours: tuple[int, ...],
    kv_capacity: int,
    coverage: float,
    max_context: int,
    max_batch_size: int | None = None,
    paged: bool = False,
) -> WindowConfig:
    """Bounds from the window's own traffic, and the slots one replica then holds (at most the
    engine's max_batch_size when it has one)."""
    rows = list(hours)
    g = d.granularity
    max_in = min(_bound(d.hist["isl"][rows], coverage, g), max_context - g)
    max_seq = min(max(_bound(d.hist["seq"][rows], coverage, g), max_in + g), max_context)
    return WindowConfig(
        hours, max_in, max_seq, _slots(d, hours, kv_capacity, max_seq, max_batch_size, paged)
    )


def _slots(
    d: HourDemand,
    hours: tuple[int, ...],
    kv_capacity: int,
    max_seq: int,
    max_batch_size: int | None,
    paged: bool,
) -> int:
    """Requests one replica runs at once. Reserved (TensorRT-LLM's no-evict scheduler): each
    may grow to max_seq_len, kv_capacity // max_seq_len. Paged (vLLM, SGLang): the cache
    holds requests at their real footprint, kv_capacity // the window's largest mean
    E[ISL + OSL/2] (the KV demand is checked in tokens too); with a max_seq_len that one
    request cannot fit in, none."""
    if kv_capacity < max_seq:
        return 0
    if paged:
        footprint = max((float(d.mean_footprint[h]) for h in hours), default=0.0)
        slots = int(kv_capacity // max(footprint, 1.0))
    else:
        slots = kv_capacity // max_seq
    if max_batch_size:
        slots = min(slots, max_batch_size)
    return max(slots, 0)


def need_for(
    d: HourDemand,
    h: int,
    config: WindowConfig,
    kv_capacity: int,
    headroom: float,
    rps_per_replica: float | None,
    latency: int = 0,
) -> tuple[int, str]:
    """Hour h's replicas and what set them: memory, latency, throughput, or the minimum of 1."""
    if config.slots <= 0:
        return 0, "memory"  # one replica cannot hold one full request: no plan with this config
    memory = max(
        math.ceil(d.in_flight[h] * (1 + headroom) / config.slots),
        math.ceil(d.kv_tokens[h] * (1 + headroom) / kv_capacity) if kv_capacity else 0,
    )
    needs = [(memory, "memory"), (latency, "latency")]
    if rps_per_replica:
        needs.append((math.ceil(d.peak_rate[h] / rps_per_replica), "throughput"))
    n, why = max(needs, key=lambda x: x[0])
    return (n, why) if n >= 1 else (1, "minimum")


def peak_need(
    d: HourDemand,
    config: WindowConfig,
    kv_capacity: int,
    headroom: float,
    rps_per_replica: float | None,
    latency: list[int],
) -> tuple[int, str]:
    """The replicas one configuration needs all day (its busiest hour) and what sets them."""
    needs = [
        need_for(d, h, config, kv_capacity, headroom, rps_per_replica, latency[h])
        for h in range(24)
    ]
    return max(needs, key=lambda x: x[0])


def fixed_config(
    d: HourDemand,
    max_input_len: int | None,
    max_seq_len: int,
    kv_capacity: int,
    max_batch_size: int | None,
    paged: bool = False,
) -> WindowConfig:
    """A configuration with given bounds (today's build) for every hour."""
    hours = tuple(range(24))
    slots = _slots(d, hours, kv_capacity, max_seq_len, max_batch_size, paged)
    return WindowConfig(hours, max_input_len or max_seq_len - 1, max_seq_len, slots)


def plans(
    d: HourDemand,
    *,
    kv_capacity: int,
    gpus: int,
    coverage: float,
    max_context: int,
    headroom: float = DEFAULT_HEADROOM,
    rps_per_replica: float | None = None,
    cost_per_gpu_hour: float | None = None,
    threshold: float = DEFAULT_THRESHOLD,
    days: int = 7,
    max_batch_size: int | None = None,
    paged: bool = False,
    latency_need: list[int] | None = None,
    replicas_now: int | None = None,
    currency: str = "$",
    whole_day: WindowConfig | None = None,
) -> Seasonal | str:
    """Plans (a) static, (b) hourly replicas, (c) the best two-window split, and a verdict.

    `days`: how many days a week this demand stands for (5 for weekdays, 2 for weekends).
    `latency_need`: per hour, the replicas the SLO needs (none: memory alone decides).
    `replicas_now`: the replicas running today, for the plan "now" and what a plan saves.
    `whole_day`: the one configuration of plans (a) and (b), the whole-day recommendation's
    bounds (app/services/rightsizing.recommend), so they say what the Rightsizing page says;
    without it, bounds from the hourly histograms.
    Returns a sentence instead when no plan can be made (why, and what to do)."""
    latency = latency_need or [0] * 24
    if 2 * d.granularity > max_context:
        return f"granularity {d.granularity:,} is too coarse for a {max_context:,}-token context"
    if not d.in_flight.any() and not d.kv_tokens.any():
        return (
            "no request in the window has a total time (e2e_ms): requests in flight and KV "
            "demand cannot be known; ship e2e_ms to get seasonal plans"
        )

    def config(hours: tuple[int, ...]) -> WindowConfig:
        return window_config(d, hours, kv_capacity, coverage, max_context, max_batch_size, paged)

    everything = whole_day or config(tuple(range(24)))
    if everything.slots == 0:
        return (
            f"one replica's KV cache ({kv_capacity:,} tokens) cannot hold one request of "
            f"max_seq_len {everything.max_seq_len:,}: no plan holds this traffic; use more "
            "GPUs per replica, FP8 or shorter bounds"
        )

    def plan(name: str, per_hour: list[int], configs: list[WindowConfig], why: list[str]) -> Plan:
        hours = sum(per_hour) * gpus * days
        cost = hours * cost_per_gpu_hour if cost_per_gpu_hour is not None else None
        return Plan(name, per_hour, float(hours), configs, cost, why)

    needs = [
        need_for(d, h, everything, kv_capacity, headroom, rps_per_replica, latency[h])
        for h in range(24)
    ]
    hourly_replicas = [n for n, _ in needs]
    peak_why = max(needs, key=lambda x: x[0])[1]
    static = plan("static", [max(hourly_replicas)] * 24, [everything], [peak_why] * 24)
    hourly = plan("hourly", hourly_replicas, [everything], [w for _, w in needs])
    now = plan("now", [replicas_now] * 24, [everything], ["today"] * 24) if replicas_now else None
    best: Plan | None = None
    best_key: tuple[float, float] = (math.inf, 0.0)
    for a in range(24):
        for b in range(a + MIN_WINDOW_HOURS, 24 - MIN_WINDOW_HOURS + a + 1):
            if b > 23:
                break
            inside = tuple(range(a, b))
            outside = tuple(h for h in range(24) if not a <= h < b)
            one, two = config(inside), config(outside)
            split_needs = [
                need_for(
                    d,
                    h,
                    one if a <= h < b else two,
                    kv_capacity,
                    headroom,
                    rps_per_replica,
                    latency[h],
                )
                for h in range(24)
            ]
            per_hour = [n for n, _ in split_needs]
            if min(per_hour) == 0:
                continue
            candidate = plan("seasonal", per_hour, [one, two], [w for _, w in split_needs])
            # Fewest GPU-hours; among equals, the split whose windows differ most in shape.
            key = (candidate.gpu_hours_week, -_contrast(one, two))
            if best is None or key < best_key:
                best, best_key = candidate, key
    vs_static = 1 - best.gpu_hours_week / static.gpu_hours_week if best else 0.0
    vs_hourly = 1 - best.gpu_hours_week / hourly.gpu_hours_week if best else 0.0
    return Seasonal(
        static,
        hourly,
        best,
        vs_static,
        vs_hourly,
        _verdict(hourly, best, vs_hourly, threshold, currency),
        threshold,
        now,
    )


def _contrast(one: WindowConfig, two: WindowConfig) -> float:
    """How different two windows are: their max_seq_len ratio, weighted by the shorter window's
    length so that a long, distinct window (a night batch) beats a short outlier."""
    lo, hi = sorted((one.max_seq_len, two.max_seq_len))
    return (hi / lo if lo else 0.0) * min(len(one.hours), len(two.hours)) / 12


def window_label(hours: tuple[int, ...]) -> str:
    """'20:00–08:00' for the hours 20 … 7 (a window may wrap past midnight); 'all day'."""
    hs = set(hours)
    if len(hs) >= 24:
        return "all day"
    start = next(h for h in range(24) if h in hs and (h - 1) % 24 not in hs)
    end = next(h for h in range(24) if h in hs and (h + 1) % 24 not in hs)
    return f"{start:02d}:00–{(end + 1) % 24:02d}:00"


def binding_words(plan: Plan) -> str:
    """What sets a plan's replicas, in a few words ('latency at 09:00–18:00, the minimum of 1
    replica at night')."""
    if not plan.binding:
        return ""
    parts: dict[str, list[int]] = {}
    for h, why in enumerate(plan.binding):
        parts.setdefault(why, []).append(h)
    words = BINDING_WORDS
    out = []
    for why, hours in sorted(parts.items(), key=lambda kv: -len(kv[1])):
        if why in words:
            out.append(f"{words[why]} for {len(hours)} h")
    return "replicas set by " + ", ".join(out) if out else ""


def below(saving: float, threshold: float) -> bool:
    """Whether a saving falls short of the threshold; float noise aside (1 - 252/280 is
    0.0999…98 in floats, and saves 10%)."""
    return saving < threshold - 1e-9


def share_words(saving: float, threshold: float) -> tuple[str, str]:
    """A saving and its threshold as percentages that compare as the numbers do: rounded down
    to 0.1% (a whole number shows whole), with more decimals while rounding would make a saving
    under the threshold read as equal to it ('9.96%' against '10%', never '10%' and '10%')."""
    for digits in range(1, 5):
        shown = _floor_share(saving, digits), _floor_share(threshold, digits)
        if (shown[0] < shown[1]) == below(saving, threshold):
            break
    return _share_text(shown[0], digits), _share_text(shown[1], digits)


def _floor_share(x: float, digits: int) -> float:
    """x in percent, rounded down to `digits` decimals (after float noise: 0.57 is 57%)."""
    scale = 10**digits
    return math.floor(round(max(x, 0.0) * 100 * scale, 4)) / scale


def _share_text(percent: float, digits: int) -> str:
    return f"{percent:.0f}%" if percent == int(percent) else f"{percent:.{digits}f}%"


def saving_against(saving: float, threshold: float) -> str:
    """'saves 9.6%, below the 10% threshold' or 'saves 12.5%, at least the 10% threshold'."""
    said, bar = share_words(saving, threshold)
    where = "below" if below(saving, threshold) else "at least"
    return f"saves {said} of GPU-hours against hourly scaling, {where} the {bar} threshold"


def _verdict(
    hourly: Plan, best: Plan | None, saving: float, threshold: float, currency: str = "$"
) -> str:
    # One comparison for the verdict and its words: the unrounded saving against the threshold.
    if best is None or below(saving, threshold):
        reason = ""
        if best is not None and max(hourly.replicas) <= 1:
            reason = (
                " The busiest hour needs one replica, and an engine keeps at least one up: "
                "there is nothing to scale."
            )
        return f"Run one engine: a seasonal split {saving_against(saving, threshold)}.{reason}"
    one, two = best.configs
    long_, short = (one, two) if one.max_seq_len >= two.max_seq_len else (two, one)
    saved = ""
    if best.cost_month is not None and hourly.cost_month is not None:
        saved = f", {money(hourly.cost_month - best.cost_month, currency)} a month"
    return (
        f"Run two engines: {window_label(short.hours)} with max_seq_len "
        f"{short.max_seq_len:,}, and {window_label(long_.hours)} with max_seq_len "
        f"{long_.max_seq_len:,}: {saving_against(saving, threshold)} "
        f"({hourly.gpu_hours_week:,.0f} → {best.gpu_hours_week:,.0f} GPU-hours per week{saved})."
    )


@dataclass(frozen=True)
class DayTypes:
    """The option of separate weekday and weekend plans (each with its own best split)."""

    weekdays: Seasonal
    weekends: Seasonal
    gpu_hours_week: float  # both days' best splits
    savings_vs_hourly: float  # against plan (b) over all days
    verdict: str


def by_day_type(overall: Seasonal, weekdays: Seasonal, weekends: Seasonal) -> DayTypes:
    """Weekday and weekend configurations against one hourly-scaled configuration for all days."""
    chosen = [s.split or s.hourly for s in (weekdays, weekends)]
    hours = sum(p.gpu_hours_week for p in chosen)
    base = overall.hourly.gpu_hours_week
    saving = 1 - hours / base if base else 0.0
    # The unrounded saving decides, and the words say it so (never "saves 10%" under 10%).
    words = saving_against(saving, overall.threshold)
    if below(saving, overall.threshold):
        verdict = f"Separate weekday and weekend configurations: not worth it, {words}."
    else:
        parts = []
        for label, plan in (("weekdays", chosen[0]), ("weekends", chosen[1])):
            windows = ", ".join(
                f"{window_label(c.hours)} max_seq_len {c.max_seq_len:,}" for c in plan.configs
            )
            parts.append(f"{label} {windows}")
        verdict = (
            f"Weekday and weekend configurations ({'; '.join(parts)}): {words} "
            f"({base:,.0f} → {hours:,.0f} GPU-hours per week)."
        )
    return DayTypes(weekdays, weekends, hours, saving, verdict)
