"""An engine's status in one vocabulary, with its colour and its reason.

The Rightsizing fleet table, the Overview, the weekly email and the API all take an engine's
status from `engine_status`, so one engine is never "ok" on one page and "over-provisioned" or
"needs a rebuild" on another. The words (docs/guide/rightsizing.md "Status"):

- rebuild suggested: rebuilding to the recommended bounds saves replicas within the SLO, or
  holds at least 10% more of the engine's real traffic at once on the same replicas;
- fits: today's build holds the traffic (within the SLO when one is set); a rebuild gains
  too little to be worth a restart;
- misses SLO: today's replicas are too few for the busiest hour within the SLO, or no replica
  count meets it (without an SLO: "short of replicas", memory alone);
- does not fit: the model's weights and overhead do not fit the engine's GPUs;
- no data: the window has no request of the engine;
- cannot be sized: its profile or the model failed on it (the reason says which).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from app.sizing.rightsize import Recommendation

StatusKey = Literal[
    "rebuild-suggested", "fits", "misses-slo", "does-not-fit", "no-data", "cannot-be-sized"
]
LABELS: dict[str, str] = {
    "rebuild-suggested": "rebuild suggested",
    "fits": "fits",
    "misses-slo": "misses SLO",
    "does-not-fit": "does not fit",
    "no-data": "no data",
    "cannot-be-sized": "cannot be sized",
}
# Text colours on a white background (WCAG AA contrast); the pages' badges use the same.
COLOURS: dict[str, str] = {
    "rebuild-suggested": "#1d6f65",
    "fits": "#2b6a2b",
    "misses-slo": "#b42318",
    "does-not-fit": "#b42318",
    "no-data": "#5b6478",
    "cannot-be-sized": "#8a5a00",
}
# A rebuild is worth a restart from 10% more concurrent requests of the real traffic.
REBUILD_GAIN = 1.1


@dataclass(frozen=True)
class Status:
    """An engine's status: a key of LABELS, and why, in one sentence."""

    key: StatusKey
    reason: str
    label_override: str | None = None  # "short of replicas" for misses-slo without an SLO

    @property
    def label(self) -> str:
        """The status in words, as every page shows it."""
        return self.label_override or LABELS[self.key]

    @property
    def colour(self) -> str:
        """The status's colour (hex)."""
        return COLOURS[self.key]

    def as_dict(self) -> dict[str, str]:
        """The status as JSON: key, label, colour and reason."""
        return {"key": self.key, "label": self.label, "colour": self.colour, "reason": self.reason}


def concurrency_gain(r: Recommendation) -> float | None:
    """How many more of the real traffic's requests one replica holds after the rebuild: the
    expected (paged KV cache) concurrency for vLLM and SGLang, the full-length one for
    TensorRT-LLM, which reserves each request's max_seq_len."""
    now, after = r.capacity_now, r.capacity_after
    if now is None or after is None:
        return None
    before, later = (now.expected, after.expected) if r.paged else (now.worst, after.worst)
    if not before or later is None:
        return None
    return later / before


def engine_status(r: Recommendation) -> Status:
    """The status of a recommendation, with its reason."""
    if r.status == "does-not-fit":
        return Status("does-not-fit", r.verdict)
    if r.status != "ok":
        return Status("no-data", r.verdict)
    x = r.replicas
    if x is not None:
        short = x.running is not None and x.running < x.after
        if not x.feasible or short:
            label = None if x.slo else "short of replicas"
            if not x.feasible:
                reason = f"no replica count meets the SLO ({x.slo}) at the busiest hour"
                reason += f": {x.note}" if x.note else ""
            else:
                reason = (
                    f"today's {x.running} replica{'s are' if x.running != 1 else ' is'} too few "
                    f"for the busiest hour{f' within the SLO ({x.slo})' if x.slo else ''}: it "
                    f"needs {x.after}, set by {x.why_after}"
                )
            return Status("misses-slo", reason, label)
        if x.after < x.today:
            return Status(
                "rebuild-suggested",
                f"the recommended bounds serve the busiest hour on {x.after} replica"
                f"{'s' if x.after != 1 else ''} instead of {x.today}",
            )
    gain = concurrency_gain(r)
    if gain is not None and gain >= REBUILD_GAIN and (x is None or x.after <= x.today):
        kind = "expected" if r.paged else "full-length"
        return Status(
            "rebuild-suggested",
            f"one replica holds {gain:.2f}× the {kind} concurrent requests after the rebuild",
        )
    within = f" within the SLO ({x.slo})" if x is not None and x.slo else ""
    if gain is not None and gain > 1:
        why = f"; a rebuild would gain only {gain - 1:.0%} concurrency and no replica"
    else:
        why = "; a rebuild gains nothing"
    return Status("fits", f"today's build holds the traffic{within}{why}")


def failed_status(reason: str) -> Status:
    """The status of an engine whose profile or model failed: the reason says why."""
    return Status("cannot-be-sized", reason)


def count_words(statuses: Iterable[Status]) -> str:
    """'1 rebuild suggested, 2 fit, 1 misses SLO' (keys in LABELS' order, zero counts left out)."""
    counts: Counter[str] = Counter(s.key for s in statuses)
    plural = {"fits": "fit", "misses-slo": "miss SLO", "does-not-fit": "do not fit"}
    parts = []
    for key, label in LABELS.items():
        n = counts.get(key, 0)
        if n:
            parts.append(f"{n} {plural.get(key, label) if n != 1 else label}")
    return ", ".join(parts) or "no engine"
