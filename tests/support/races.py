"""Racing calls: n threads released together at one barrier."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from threading import Barrier


def at_once(n: int, call: Callable[[int], object]) -> list:
    """`call(i)` from n threads released together; their answers in order."""
    start = Barrier(n)

    def run(i: int):
        start.wait()
        return call(i)

    with ThreadPoolExecutor(n) as pool:
        return list(pool.map(run, range(n)))
