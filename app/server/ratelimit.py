"""Per-token rate limits on ingest: token buckets for requests/s and records/s."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Bucket:
    """A token bucket: `rate` tokens a second, holding at most `burst`."""

    rate: float
    burst: float
    level: float
    updated: float

    def take(self, n: float, now: float) -> float:
        """Take n tokens and return 0.0, or take nothing and return the seconds to wait.

        A take larger than the burst is admitted once the bucket is full and leaves it in debt,
        so a batch bigger than the bucket still goes through, at the configured average rate."""
        # max(): a clock that steps back must not drain the bucket.
        self.level = min(self.burst, self.level + max(now - self.updated, 0.0) * self.rate)
        self.updated = now
        need = min(n, self.burst)
        if self.level >= need:
            self.level -= n
            return 0.0
        return (need - self.level) / self.rate


@dataclass(frozen=True)
class Limited:
    """A refused request: which limit, and when to come back."""

    message: str
    retry_after: int


@dataclass(frozen=True)
class Limit:
    """One configured limit: a rate (0 = unlimited), its burst and its setting's name."""

    rate: float
    burst: float
    setting: str
    unit: str

    def refusal(self, who: str, wait: float) -> Limited:
        """The 429 answer for a token over this limit, waiting at least a whole second."""
        retry = max(1, math.ceil(wait))
        return Limited(
            f"rate limit: token {who} is over {self.rate:g} {self.unit}/s (burst "
            f"{self.burst:g}, TOKENSHAPE_{self.setting} / TOKENSHAPE_{self.setting}_BURST); "
            f"nothing was stored, retry after {retry} s",
            retry,
        )


class RateLimiter:
    """Buckets per token id for requests and records; the clock is injectable for tests.

    Called on the event loop only, so the buckets need no lock."""

    def __init__(self, requests: Limit, records: Limit, clock: Callable[[], float] | None = None):
        self.request_limit, self.record_limit = requests, records
        self.clock = clock or time.monotonic
        self._buckets: dict[tuple[str, str], Bucket] = {}
        self.refused = {"requests": 0, "records": 0}

    def _take(self, limit: Limit, kind: str, token_id: str, n: float) -> float:
        if limit.rate <= 0 or n <= 0:
            return 0.0
        now = self.clock()
        bucket = self._buckets.get((kind, token_id))
        if bucket is None:
            if len(self._buckets) > 100_000:  # tokens are few; this only bounds a pathology
                self._buckets.clear()
            bucket = Bucket(limit.rate, limit.burst, limit.burst, now)
            self._buckets[(kind, token_id)] = bucket
        wait = bucket.take(n, now)
        if wait:
            self.refused[kind] += 1
        return wait

    def admit_request(self, token_id: str, who: str) -> Limited | None:
        """Count one request of a token (before its body is read); a refusal if over."""
        wait = self._take(self.request_limit, "requests", token_id, 1)
        return self.request_limit.refusal(who, wait) if wait else None

    def admit_records(self, token_id: str, who: str, n: int) -> Limited | None:
        """Count n parsed records of a token (before they are stored); a refusal if over."""
        wait = self._take(self.record_limit, "records", token_id, n)
        return self.record_limit.refusal(who, wait) if wait else None
