"""Hand-made data sets that tests of more than one tier check against."""

from __future__ import annotations

from datetime import timedelta

from tests.support.records import BASE_TIME, record


def latency_records() -> list[dict]:
    """Three hours of traffic, 20 requests an hour; TTFT grows 0.5 ms per input token; the
    first four carry token gaps (the gap at position p is p ms); one has no latencies."""
    recs = []
    for k in range(60):
        isl = 100 * (k + 1)
        rec = record(
            k,
            isl=isl,
            osl=11,
            ttft_ms=20.0 + 0.5 * isl,
            itl_ms=10.0 + k % 3,
            e2e_ms=20.0 + 0.5 * isl + 10 * (10.0 + k % 3),
        )
        rec["started_at"] = (BASE_TIME + timedelta(minutes=3 * k)).isoformat()
        if k < 4:
            rec["token_gaps_ms"] = [float(g) for g in range(1, 11)]  # gap at position p is p ms
        recs.append(rec)
    recs[5].update(ttft_ms=None, itl_ms=None, e2e_ms=None)
    return recs
