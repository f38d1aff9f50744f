"""Overlapping requests whose in-flight counts are worked out by hand (tests of the load views).

Times are seconds from BASE_TIME; the window is [BASE_TIME, BASE_TIME + 10 min), 5-minute
buckets [0, 300) and [300, 600). Engine chat-8b:

    A  [-60,  60)  started before the window, runs into it (team-a)
    B  [ 30,  90)  starts with C
    C  [ 30, 430)  crosses into the second bucket
    D  [ 90, 120)  starts the instant B ends (B is no longer in flight)
    G  [200, 210)  team-b
    E  [500, 700)  runs past the window's end

Engine code-7b: F [100, 150). And H on chat-8b without an E2E time: it counts nowhere.

In flight on chat-8b at each arrival (itself included): B 3, C 3 (A, B, C), D 2 (C, D),
G 2 (C, G), E 1. Time in flight inside the first bucket: A 60 + B 60 + C 270 + D 30 + G 10
= 430 s, a mean of 430/300; its most is 3 (A, B, C over [30, 60)). Second bucket: C 130 + E
100 = 230 s; most 1. code-7b: 50/300 and 1, then 0 and 0.
"""

from __future__ import annotations

from datetime import timedelta

from tests.support.records import BASE_TIME, record

WINDOW = (BASE_TIME, BASE_TIME + timedelta(minutes=10))

# name: (start s, e2e s or None, engine, tenant, isl, ttft ms, itl ms)
REQUESTS = {
    "A": (-60, 120, "chat-8b", "team-a", 100, 40.0, 4.0),
    "B": (30, 60, "chat-8b", "team-a", 200, 100.0, 10.0),
    "C": (30, 400, "chat-8b", "team-a", 3000, 300.0, 20.0),
    "D": (90, 30, "chat-8b", "team-a", 400, 50.0, 5.0),
    "G": (200, 10, "chat-8b", "team-b", 600, 80.0, 8.0),
    "E": (500, 200, "chat-8b", "team-a", 50, 20.0, 2.0),
    "F": (100, 50, "code-7b", "team-a", 900, 70.0, 7.0),
    "H": (250, None, "chat-8b", "team-a", 120, 60.0, 6.0),
}
LEVELS = {"B": 3, "C": 3, "D": 2, "G": 2, "E": 1, "F": 1}


def load_records() -> list[dict]:
    """The requests above as native records."""
    out = []
    for k, (name, (at, e2e, engine, tenant, isl, ttft, itl)) in enumerate(REQUESTS.items()):
        rec = record(
            k,
            prefix="load",
            engine=engine,
            tenant=tenant,
            isl=isl,
            osl=10 * (k + 1),
            ttft_ms=ttft,
            itl_ms=itl,
            e2e_ms=None if e2e is None else e2e * 1000.0,
        )
        rec["request_id"] = f"load-{name}"
        rec["started_at"] = (BASE_TIME + timedelta(seconds=at)).isoformat()
        out.append(rec)
    return out
