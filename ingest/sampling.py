"""Sample rates from the wire: the OpenTelemetry sampling threshold and sampling attributes.

A stored record's `sample_rate` is p, the probability it was kept (the row stands for 1/p
requests). OTLP carries it in three ways, read in this order:

1. the W3C `tracestate` entry `ot=th:<hex>` (OpenTelemetry "TraceState: Probability
   Sampling"): the rejection threshold T as 1 to 14 lowercase hex digits, with trailing zeros
   left out; p = 1 - T / 2^56, so `th:0` is p = 1 and `th:8` is p = 1/2. A malformed
   threshold (a capital, a 15th digit, not hex) means the sampling is unknown, as the spec
   asks, and the next source is tried; it never rejects the span;
2. the attribute `sampling.probability`: p itself (checked by the native rule, 0 < p <= 1);
3. the attributes `SampleRate` (Honeycomb) or `sample_rate`: a number N >= 1 means "1 in N
   kept" (p = 1/N); a number in (0, 1] is read as p itself (1 is the same either way).
"""

from __future__ import annotations

import math
import re

THRESHOLD_BITS = 56
_TH = re.compile(r"[0-9a-f]{1,14}")
PROBABILITY_ATTRIBUTE = "sampling.probability"
RATE_ATTRIBUTES = ("SampleRate", "sample_rate")


def threshold_probability(tracestate: str) -> float | None:
    """p from the `th` sub-key of the tracestate's `ot` entry; None when absent or malformed."""
    if not tracestate or "ot=" not in tracestate:
        return None
    for member in tracestate.split(","):
        key, sep, value = member.strip().partition("=")
        if key != "ot" or not sep:
            continue
        for pair in value.split(";"):
            sub, sep, th = pair.partition(":")
            if sub == "th" and sep:
                if not _TH.fullmatch(th):
                    return None
                threshold = int(th.ljust(THRESHOLD_BITS // 4, "0"), 16)
                return (2**THRESHOLD_BITS - threshold) / 2**THRESHOLD_BITS
        return None
    return None


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def from_attributes(attrs: dict) -> tuple[object, str | None, str | None]:
    """(the sample rate to store, the attribute it came from, an error message or None).

    The rate is None when no attribute names one; `sampling.probability` is passed on as it
    came, so the native rule words its errors; a SampleRate that is no positive number is an
    error naming the attribute."""
    if PROBABILITY_ATTRIBUTE in attrs:
        return attrs[PROBABILITY_ATTRIBUTE], PROBABILITY_ATTRIBUTE, None
    for name in RATE_ATTRIBUTES:
        if name not in attrs:
            continue
        rate = _number(attrs[name])
        if rate is None or not math.isfinite(rate) or rate <= 0:
            return (
                None,
                name,
                f"otlp: {name} {attrs[name]!r} is not a sample rate; send N for '1 in N "
                "requests kept' (a number >= 1), or sampling.probability = 1/N",
            )
        return (1.0 / rate if rate > 1 else rate), name, None
    return None, None, None
