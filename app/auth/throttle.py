"""The login throttle: failed logins counted per account name and per client address, in
moving windows (the `limits` library), expiring, and bounded in memory.

A try is reserved before its password is checked (so parallel guesses cannot all slip past
while their hashes are computed) and, once checked, either recorded as a failure against both
its account and its client or, on success, forgotten, clearing that account's failures only."""

from __future__ import annotations

import ipaddress
import math
import time
from collections import Counter
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.strategies import MovingWindowRateLimiter

ACCOUNT_FAILURES, ACCOUNT_WINDOW_S = 5, 300
# Higher per client: many users may share one proxy's (or one office's NAT) address.
CLIENT_FAILURES, CLIENT_WINDOW_S = 20, 300
# Names and addresses tracked at once; past this, new ones share one bucket per kind until
# old entries expire (a flood from many addresses then locks out new names for a window,
# rather than growing the server's memory: ~1 KB a key).
MAX_KEYS = 20_000
SWEEP_S = 30.0
FULL_SWEEP_S = 5.0
OVERFLOW = "*"  # no user name or address looks like this


class _Storage(MemoryStorage):
    """limits' MemoryStorage without its own expiry timer, which walks every key after every
    hit (~5 µs a key: continuous work under a flood) and keeps an empty list for each key it
    ever saw; LoginThrottle sweeps instead, now and then, dropping the keys too."""

    def _MemoryStorage__schedule_expiry(self) -> None:  # overrides the private scheduler
        return None


@dataclass
class Attempt:
    """One login try: its buckets, and how long to wait if it was refused (0: go ahead)."""

    keys: tuple[tuple[RateLimitItem, str, str], ...]
    wait: float = 0.0
    reason: str = ""


def client_key(host: str | None) -> str:
    """The bucket of a client address: IPv4 as is, IPv6 by its /64 (one host holds a whole
    /64, so counting single addresses would give it billions of buckets)."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return host or "?"
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class LoginThrottle:
    """Failed logins per account and per client (see module doc); one per running server."""

    def __init__(
        self,
        account: tuple[int, int] = (ACCOUNT_FAILURES, ACCOUNT_WINDOW_S),
        client: tuple[int, int] = (CLIENT_FAILURES, CLIENT_WINDOW_S),
        max_keys: int = MAX_KEYS,
    ):
        self.account = RateLimitItemPerSecond(account[0], account[1], namespace="login")
        self.client = RateLimitItemPerSecond(client[0], client[1], namespace="login")
        self.storage = _Storage()
        self.limiter = MovingWindowRateLimiter(self.storage)
        self.max_keys = max_keys
        # Tries whose password is being checked: bounded by the requests under way.
        self.in_flight: Counter[tuple[str, str]] = Counter()
        self._swept = time.monotonic()

    def tracked(self) -> int:
        """How many names and addresses are being counted."""
        return len(self.storage.events)

    def begin(self, account: str, client: str) -> Attempt:
        """Reserve a try for this account name (see users.login_key) and client bucket (see
        client_key), or say how long to wait. Call `end` once the password is checked."""
        self._sweep()
        keys = (
            (self.account, "account", self._bucket(self.account, "account", account)),
            (self.client, "client", self._bucket(self.client, "client", client)),
        )
        attempt = Attempt(keys)
        for item, kind, value in keys:
            reserved = self.in_flight[(kind, value)]
            if self.limiter.test(item, kind, value, cost=reserved + 1):
                continue
            stats = self.limiter.get_window_stats(item, kind, value)
            # Full of failures: until the oldest leaves the window; else tries under way
            # hold the places: a second.
            wait = stats.reset_time - time.time() if stats.remaining <= 0 else 1.0
            if wait > attempt.wait:
                attempt.wait = max(1.0, wait)
                attempt.reason = "this user name" if kind == "account" else "this address"
        if attempt.wait == 0:
            for _, kind, value in keys:
                self.in_flight[(kind, value)] += 1
        return attempt

    def end(self, attempt: Attempt, succeeded: bool) -> None:
        """Close a try `begin` admitted: a failure counts against its account and client; a
        success clears its account's failures (and not its client's: others' guesses from the
        same address still count)."""
        if attempt.wait:
            return
        for item, kind, value in attempt.keys:
            key = (kind, value)
            self.in_flight[key] -= 1
            if self.in_flight[key] <= 0:
                del self.in_flight[key]
            if not succeeded:
                self.limiter.hit(item, kind, value)
            elif kind == "account":
                self.limiter.clear(item, kind, value)

    @staticmethod
    def retry_after(attempt: Attempt) -> int:
        """Whole seconds for a Retry-After header."""
        return max(1, math.ceil(attempt.wait))

    def _bucket(self, item: RateLimitItem, kind: str, value: str) -> str:
        """The value itself, or the shared overflow bucket when the table is full."""
        if (
            self.tracked() >= self.max_keys
            and item.key_for(kind, value) not in self.storage.events
            and (kind, value) not in self.in_flight
        ):
            return OVERFLOW
        return value

    def _sweep(self) -> None:
        """Drop the keys whose failures have all left their window (more often when full).

        ~2 µs a key, on the event loop: 40 ms for a full table."""
        now = time.monotonic()
        every = FULL_SWEEP_S if self.tracked() >= self.max_keys else SWEEP_S
        if now - self._swept < every:
            return
        self._swept = now
        cutoff = time.time() - max(self.account.get_expiry(), self.client.get_expiry())
        events = self.storage.events
        # Entries are newest first: a key whose newest entry left the window has none in it.
        for key in [k for k, entries in events.items() if not entries or entries[0].atime < cutoff]:
            self.storage.clear(key)
