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

from ingest.records import MIN_SAMPLE_RATE

THRESHOLD_BITS = 56
_TH = re.compile(r"[0-9a-f]{1,14}")
PROBABILITY_ATTRIBUTE = "sampling.probability"
RATE_ATTRIBUTES = ("SampleRate", "sample_rate")
SHOWN_CHARS = 64


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


def shown(value: object) -> str:
    """A value for an error message: its repr, cut short (a value may be megabytes), and the
    kind of non-scalar values in words."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, str) and not value:
        return "an empty string"
    text = repr(value)
    if isinstance(value, str):
        text = f"the string {text}"
    return text if len(text) <= SHOWN_CHARS else text[: SHOWN_CHARS - 1] + "…"


def _number(value: object) -> float | None:
    """A finite number as a float; None for anything else (booleans and strings included)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:  # an int too large for a double
        return None
    return number if math.isfinite(number) else None


def from_attributes(attrs: dict) -> tuple[object, str | None, str | None]:
    """(the sample rate to store, the attribute it came from, an error message or None).

    The rate is None when no attribute names one; a `sampling.probability` that is a finite
    number is passed on as it came, so the native rule words its range errors; anything else
    (a boolean, a string, an array), and a SampleRate that is no positive number, is an error
    naming the attribute."""
    if PROBABILITY_ATTRIBUTE in attrs:
        value = attrs[PROBABILITY_ATTRIBUTE]
        if _number(value) is None:
            return (
                None,
                PROBABILITY_ATTRIBUTE,
                f"otlp: {PROBABILITY_ATTRIBUTE} must be a number with 0 < p <= 1 (the "
                f"probability the span was kept), got {shown(value)}",
            )
        return float(value), PROBABILITY_ATTRIBUTE, None  # type: ignore[arg-type]  # a number
    for name in RATE_ATTRIBUTES:
        if name not in attrs:
            continue
        rate = _number(attrs[name])
        p = None if rate is None or rate <= 0 else (1.0 / rate if rate > 1 else rate)
        if p is None or p < MIN_SAMPLE_RATE:
            return (
                None,
                name,
                f"otlp: {name} {shown(attrs[name])} is not a sample rate; send N for '1 in N "
                "requests kept' (a number >= 1, at most 2^56), or sampling.probability = 1/N",
            )
        return p, name, None
    return None, None, None
