"""A small time-limited cache for answers that run the performance model (seconds each)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class TtlCache(Generic[T]):
    """Answers by key for `seconds`; at most `size` kept (then all dropped: the keys carry the
    hour, so old ones are never asked again)."""

    def __init__(self, seconds: float, size: int = 256):
        self.seconds, self.size = seconds, size
        self._items: dict[Hashable, tuple[float, T]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> T | None:
        """The answer for key while it is fresh, else None."""
        with self._lock:
            hit = self._items.get(key)
        if hit is not None and time.monotonic() - hit[0] < self.seconds:
            return hit[1]
        return None

    def put(self, key: Hashable, value: T) -> T:
        """Keep value for key; returns it."""
        with self._lock:
            if len(self._items) >= self.size:
                self._items.clear()
            self._items[key] = (time.monotonic(), value)
        return value

    def get_or_make(self, key: Hashable, make: Callable[[], T]) -> T:
        """The fresh answer for key, made (outside the lock) when there is none."""
        hit = self.get(key)
        return hit if hit is not None else self.put(key, make())
