"""Drift of an engine's traffic away from what it was built for (DESIGN §7). Pure: no I/O.

Inputs (computed in app/analytics/drift.py): the engine's current bounds, a dict of two weeks
("last" = the 7 days before the end, "previous" = the 7 days before that), each with keys
requests, isl_p99, osl_p99, isl_p999, seq_p999 (of ISL + OSL), ttft_p95 (ms) and arrival_rate
(requests/s), and last week's counts (beyond max_input_len, beyond max_seq_len, all requests).

Findings and their severity:
- no requests last week: one `no_data` finding, severity info, and nothing else.
- `beyond_input` / `beyond_seq`: the share of last week's requests with ISL > max_input_len /
  ISL + OSL > max_seq_len (they fail or are truncated today). Share >= 1% critical, >= 0.1%
  warning, > 0 info. value = the share (0.02 for 2%).
- `over_provisioned_input` / `over_provisioned_seq`: current bound / last week's p99.9 (of ISL,
  of ISL + OSL). Ratio >= 4 critical, >= 2 warning; below 2 no finding (below 1 is already a
  beyond-bounds finding); only with >= 100 requests last week. A p99.9 under one token counts
  as one. value = the ratio.
- `change_isl_p99`, `change_osl_p99`, `change_arrival_rate`, `change_ttft_p95`: relative change
  from the previous week to the last, only when both weeks have >= 100 requests (fewer make
  p99 too noisy) and the previous value is positive. |change| >= 50% warning, >= 20% info; for
  TTFT p95 only an increase is a finding. value = the relative change (0.5 for +50%).
Findings are sorted critical, warning, info; within a severity, in the order above.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

Severity = Literal["critical", "warning", "info"]
SEVERITY_ORDER: dict[str, int] = {"critical": 0, "warning": 1, "info": 2}

BEYOND_CRITICAL = 0.01
BEYOND_WARNING = 0.001
OVER_CRITICAL = 4.0
OVER_WARNING = 2.0
CHANGE_WARNING = 0.5
CHANGE_INFO = 0.2
MIN_WEEK_REQUESTS = 100


@dataclass(frozen=True)
class Finding:
    """One drift finding for an engine; `value` is a share, ratio or relative change."""

    engine: str
    kind: str
    severity: Severity
    message: str
    value: float


def share_text(n: int, total: int) -> str:
    """n / total as a percentage, rounded down so a message never overstates a share."""
    tenths = n * 1000 // total  # exact integer arithmetic: 20 of 1,000 is 2.0%, not 1.9999%
    if tenths or n == 0:
        return f"{tenths // 10}.{tenths % 10}%"
    return f"{100 * n / total:.2g}%"


def _beyond_severity(share: float) -> Severity | None:
    if share >= BEYOND_CRITICAL:
        return "critical"
    if share >= BEYOND_WARNING:
        return "warning"
    return "info" if share > 0 else None


def _beyond(engine: str, bounds: tuple, counts: tuple) -> list[Finding]:
    n_input, n_seq, total = counts
    out = []
    rows = (
        ("beyond_input", bounds[0], n_input, "were longer than max_input_len {b:,}"),
        ("beyond_seq", bounds[1], n_seq, "needed more than max_seq_len {b:,} tokens (ISL + OSL)"),
    )
    for kind, bound, n, what in rows:
        if bound is None or n is None or not total:
            continue
        share = n / total
        severity = _beyond_severity(share)
        if severity is None:
            continue
        message = (
            f"{share_text(n, total)} of last week's requests ({n:,} of {total:,}) "
            f"{what.format(b=bound)}: they fail or are truncated today"
        )
        out.append(Finding(engine, kind, severity, message, share))
    return out


def _over(engine: str, bounds: tuple, last: Mapping) -> list[Finding]:
    out: list[Finding] = []
    rows = (
        ("over_provisioned_input", "max_input_len", bounds[0], last.get("isl_p999"), "ISL"),
        ("over_provisioned_seq", "max_seq_len", bounds[1], last.get("seq_p999"), "ISL + OSL"),
    )
    if last["requests"] < MIN_WEEK_REQUESTS:
        return out  # a p99.9 of a handful of requests says nothing about the bound
    for kind, name, bound, p999, what in rows:
        if bound is None or p999 is None:
            continue
        ratio = bound / max(p999, 1.0)
        if ratio < OVER_WARNING:
            continue
        severity: Severity = "critical" if ratio >= OVER_CRITICAL else "warning"
        message = (
            f"{name} {bound:,} is {ratio:.1f} times last week's p99.9 {what} of {p999:,.0f} "
            f"tokens ({last['requests']:,} requests): over-provisioned, rebuild suggested (the "
            "Rightsizing page's word): it recommends a tighter bound"
        )
        out.append(Finding(engine, kind, severity, message, ratio))
    return out


def _number(value: float, unit: str) -> str:
    if unit == "requests/s" and value < 100:  # low rates need their significant digits
        return f"{value:.3g} requests/s"
    return f"{value:,.0f} {unit}"


def _changes(engine: str, last: Mapping, previous: Mapping) -> list[Finding]:
    if min(last["requests"], previous["requests"]) < MIN_WEEK_REQUESTS:
        return []
    out = []
    rows = (
        ("change_isl_p99", "isl_p99", "p99 ISL", "tokens"),
        ("change_osl_p99", "osl_p99", "p99 OSL", "tokens"),
        ("change_arrival_rate", "arrival_rate", "the arrival rate", "requests/s"),
        ("change_ttft_p95", "ttft_p95", "TTFT p95", "ms"),
    )
    for kind, key, label, unit in rows:
        before, now = previous.get(key), last.get(key)
        if before is None or now is None or before <= 0:
            continue
        change = (now - before) / before
        # A faster first token is good news, not drift.
        if kind == "change_ttft_p95" and change <= 0:
            continue
        if abs(change) >= CHANGE_WARNING:
            severity: Severity = "warning"
        elif abs(change) >= CHANGE_INFO:
            severity = "info"
        else:
            continue
        verb = "rose" if change > 0 else "fell"
        message = (
            f"{label} {verb} {abs(change):.0%} week over week, from {_number(before, unit)} "
            f"to {_number(now, unit)}"
        )
        out.append(Finding(engine, kind, severity, message, change))
    return out


def findings(
    engine: str,
    profile_bounds: tuple[int | None, int | None],
    weeks: Mapping[str, Mapping],
    beyond_counts: tuple[int | None, int | None, int],
) -> list[Finding]:
    """The drift findings of one engine, most severe first (rules in the module docstring)."""
    last, previous = weeks["last"], weeks["previous"]
    if not last["requests"]:
        return [Finding(engine, "no_data", "info", "no requests in the last 7 days", 0.0)]
    out = (
        _beyond(engine, profile_bounds, beyond_counts)
        + _over(engine, profile_bounds, last)
        + _changes(engine, last, previous)
    )
    return sorted(out, key=lambda f: SEVERITY_ORDER[f.severity])  # stable: keeps rule order
