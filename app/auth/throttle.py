"""The login throttle: failed logins counted per account name and per client address, in
moving windows (the `limits` library), expiring, and bounded in memory.

A try is reserved before its password is checked (so parallel guesses cannot all slip past
while their hashes are computed) and, once checked, either recorded as a failure against its
buckets or, on success, forgotten, clearing its own account's (or device's) failures only.

A browser that logged in as a user before holds a device cookie for that name (OWASP's
"device cookies"): its tries count against their own (account, device) bucket instead of the
account's, so failures sent from elsewhere, which can lock an account, cannot lock out its
user's own browsers. Every try counts against its client's bucket too."""

from __future__ import annotations

import bisect
import ipaddress
import math
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from limits import RateLimitItem, RateLimitItemPerSecond
from limits.storage import MemoryStorage
from limits.storage.memory import Entry
from limits.strategies import MovingWindowRateLimiter

ACCOUNT_FAILURES, ACCOUNT_WINDOW_S = 5, 300
# Per (account, device cookie): as strict as per account, but the device's own.
DEVICE_FAILURES, DEVICE_WINDOW_S = 5, 300
# Higher per client: many users may share one proxy's (or one office's NAT) address.
CLIENT_FAILURES, CLIENT_WINDOW_S = 20, 300
# Names and addresses tracked at once; past this, new ones share one bucket per kind until
# old entries expire (a flood from many addresses then locks out new names for a window,
# rather than growing the server's memory: ~1 KB a key).
MAX_KEYS = 20_000
SWEEP_S = 30.0
FULL_SWEEP_S = 5.0
OVERFLOW = "*"  # no user name or address looks like this
# What a refusal names, per kind of bucket.
_WHOSE = {"account": "this user name", "device": "this user name on this browser"}
_WHOSE_UNDER_WAY = {
    "account": "for this user name",
    "device": "for this user name on this browser",
    "client": "from this address",
}


class _Entry(Entry):
    """One failure in a moving window, at a time given (limits' Entry reads the wall clock)."""

    def __init__(self, atime: float, expiry: float):
        self.atime = atime
        self.expiry = atime + expiry


class _Storage(MemoryStorage):
    """limits' MemoryStorage for moving windows, on the throttle's clock, and bounded.

    Without limits' own expiry timer, which walks every key after every hit (~5 µs a key:
    continuous work under a flood) and keeps an empty list for each key it ever saw
    (LoginThrottle sweeps instead, now and then, dropping the keys too); and each key keeps
    only its newest `limit` entries: a moving window never looks further back, and a key that
    fails now and then, never refused, would otherwise keep every failure forever."""

    def __init__(self, clock: Callable[[], float]):
        super().__init__()
        self.clock = clock

    def _MemoryStorage__schedule_expiry(self) -> None:  # overrides the private scheduler
        return None

    def acquire_entry(self, key: str, limit: int, expiry: int, amount: int = 1) -> bool:
        """limits' moving-window hit, on our clock; the key's list cut to `limit` entries."""
        if amount > limit:
            return False
        with self.locks[key]:
            events = self.events.setdefault(key, [])
            now = self.clock()
            if len(events) > limit - amount and events[limit - amount].atime >= now - expiry:
                return False
            events[:0] = [_Entry(now, expiry) for _ in range(amount)]
            del events[limit:]
            return True

    def get_moving_window(self, key: str, limit: int, expiry: int) -> tuple[float, int]:
        """(start of the window, entries in it), on our clock; entries are newest first."""
        now = self.clock()
        if events := self.events.get(key, []):
            inside = bisect.bisect_left(events, -(now - expiry), key=lambda e: -e.atime)
            return events[inside - 1].atime, inside
        return now, 0


@dataclass
class Attempt:
    """One login try: its buckets, and how long to wait if it was refused (0: go ahead)."""

    keys: tuple[tuple[RateLimitItem, str, str], ...]
    wait: float = 0.0
    reason: str = ""  # whose failures (or tries under way) refused it, in words
    under_way: bool = False  # refused for tries still being checked, not for failures

    @property
    def message(self) -> str:
        """What the login page says about a refusal."""
        if self.under_way:
            return f"Too many logins under way {self.reason}; retry in a second."
        wait = LoginThrottle.retry_after(self)
        return f"Too many failed logins for {self.reason}: wait {wait} s and try again."


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
    """Failed logins per account (or device) and per client (see module doc); one per server."""

    def __init__(
        self,
        account: tuple[int, int] = (ACCOUNT_FAILURES, ACCOUNT_WINDOW_S),
        client: tuple[int, int] = (CLIENT_FAILURES, CLIENT_WINDOW_S),
        max_keys: int = MAX_KEYS,
        device: tuple[int, int] = (DEVICE_FAILURES, DEVICE_WINDOW_S),
        clock: Callable[[], float] = time.time,
    ):
        self.account = RateLimitItemPerSecond(account[0], account[1], namespace="login")
        self.device = RateLimitItemPerSecond(device[0], device[1], namespace="login")
        self.client = RateLimitItemPerSecond(client[0], client[1], namespace="login")
        self.clock = clock
        self.storage = _Storage(clock)
        self.limiter = MovingWindowRateLimiter(self.storage)
        self.max_keys = max_keys
        # Tries whose password is being checked: bounded by the requests under way.
        self.in_flight: Counter[tuple[str, str]] = Counter()
        self._swept = clock()

    def tracked(self) -> int:
        """How many names and addresses are being counted."""
        return len(self.storage.events)

    def begin(self, account: str, client: str, device: str | None = None) -> Attempt:
        """Reserve a try for this account name (see users.login_key) and client bucket (see
        client_key), or say how long to wait. `device`: the id of a device cookie this
        browser holds for this very name (checked by the caller), whose tries count against
        their own bucket instead of the account's. Call `end` once the password is checked."""
        self._sweep()
        first = (
            (self.device, "device", self._bucket(self.device, "device", f"{account}|{device}"))
            if device
            else (self.account, "account", self._bucket(self.account, "account", account))
        )
        keys = (first, (self.client, "client", self._bucket(self.client, "client", client)))
        attempt = Attempt(keys)
        for item, kind, value in keys:
            reserved = self.in_flight[(kind, value)]
            if self.limiter.test(item, kind, value, cost=reserved + 1):
                continue
            stats = self.limiter.get_window_stats(item, kind, value)
            if stats.remaining <= 0:  # full of failures: until the oldest leaves the window
                wait, under_way = max(1.0, stats.reset_time - self.clock()), False
            else:  # tries under way hold the places: a second
                wait, under_way = 1.0, True
            if wait > attempt.wait:
                attempt.wait, attempt.under_way = wait, under_way
                attempt.reason = (
                    _WHOSE_UNDER_WAY[kind] if under_way else _WHOSE.get(kind, "this address")
                )
        if attempt.wait == 0:
            for _, kind, value in keys:
                self.in_flight[(kind, value)] += 1
        return attempt

    def end(self, attempt: Attempt, succeeded: bool) -> None:
        """Close a try `begin` admitted: a failure counts against its buckets; a success
        clears its account's (or device's) failures, and not its client's: others' guesses
        from the same address still count."""
        if attempt.wait:
            return
        for item, kind, value in attempt.keys:
            key = (kind, value)
            self.in_flight[key] -= 1
            if self.in_flight[key] <= 0:
                del self.in_flight[key]
            if not succeeded:
                self.limiter.hit(item, kind, value)
            elif kind != "client":
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
        now = self.clock()
        every = FULL_SWEEP_S if self.tracked() >= self.max_keys else SWEEP_S
        if now - self._swept < every:
            return
        self._swept = now
        items = (self.account, self.device, self.client)
        cutoff = now - max(item.get_expiry() for item in items)
        events = self.storage.events
        # Entries are newest first: a key whose newest entry left the window has none in it.
        for key in [k for k, entries in events.items() if not entries or entries[0].atime < cutoff]:
            self.storage.clear(key)
