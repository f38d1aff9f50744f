"""The login throttle (app/auth/throttle): per account and per client, reserved before the
check, a success clearing its own account only, and bounded in memory."""

from __future__ import annotations

from limits.storage import MemoryStorage

from app.auth.throttle import OVERFLOW, LoginThrottle, client_key


def _fail(throttle: LoginThrottle, account: str, client: str, device: str | None = None) -> float:
    """One failed try; returns the wait if it was refused instead."""
    attempt = throttle.begin(account, client, device)
    if not attempt.wait:
        throttle.end(attempt, succeeded=False)
    return attempt.wait


def test_failures_count_per_account_and_a_success_clears_only_its_own():
    throttle = LoginThrottle(account=(5, 300), client=(20, 300))
    for _ in range(4):
        assert _fail(throttle, "alice", "10.0.0.1") == 0
    ok = throttle.begin("victor", "10.0.0.1")
    assert ok.wait == 0
    throttle.end(ok, succeeded=True)
    assert _fail(throttle, "alice", "10.0.0.1") == 0  # the fifth
    refused = throttle.begin("alice", "10.0.0.2")  # from anywhere
    assert 299 <= refused.wait <= 300 and refused.reason == "this user name"
    assert throttle.retry_after(refused) in (299, 300)
    assert throttle.begin("victor", "10.0.0.1").wait == 0


def test_a_success_clears_its_accounts_failures_but_not_the_clients():
    throttle = LoginThrottle(account=(5, 300), client=(6, 300))
    for _ in range(4):
        _fail(throttle, "ada", "10.0.0.1")
    _fail(throttle, "eve", "10.0.0.1")
    ok = throttle.begin("ada", "10.0.0.1")
    throttle.end(ok, succeeded=True)
    assert _fail(throttle, "ada", "10.0.0.1") == 0  # ada's count started again ...
    refused = throttle.begin("ada", "10.0.0.1")  # ... but the address has 6 failures
    assert refused.wait > 0 and refused.reason == "this address"


def test_tries_under_way_hold_their_places():
    throttle = LoginThrottle(account=(5, 300), client=(20, 300))
    under_way = [throttle.begin("ada", f"10.0.0.{k}") for k in range(5)]
    assert all(a.wait == 0 for a in under_way)
    sixth = throttle.begin("ada", "10.0.0.9")
    assert sixth.wait == 1.0  # no failure recorded yet: try again in a second
    for attempt in under_way:
        throttle.end(attempt, succeeded=False)
    assert throttle.begin("ada", "10.0.0.9").wait > 1
    assert not throttle.in_flight


def test_memory_is_bounded_under_many_names_and_addresses():
    throttle = LoginThrottle(max_keys=50)
    for k in range(500):
        _fail(throttle, f"user{k}", f"10.0.{k // 250}.{k % 250}")
    assert throttle.tracked() <= 52  # the cap, and one overflow bucket per kind
    assert throttle.limiter.get_window_stats(throttle.account, "account", OVERFLOW).remaining == 0
    # A tracked name is still counted on its own.
    assert throttle.begin("user0", "10.0.0.0").wait == 0


def test_the_sweep_drops_keys_whose_failures_expired():
    throttle = LoginThrottle(account=(5, 300), client=(20, 300))
    _fail(throttle, "ada", "10.0.0.1")
    assert throttle.tracked() == 2
    ok = throttle.begin("ada", "10.0.0.1")
    throttle.end(ok, succeeded=True)
    assert throttle.tracked() == 1  # the account's key is gone, the client's stays
    # limits' MemoryStorage keeps an empty list for every key it saw (no cap): the sweep,
    # not the library's timer, removes them.
    throttle.storage.events["LIMITER/stale"] = []
    throttle._swept = -1e9
    throttle.begin("ada", "10.0.0.1")
    assert "LIMITER/stale" not in throttle.storage.events


class FakeClock:
    """Seconds since the epoch that move only when a test says so."""

    def __init__(self, now: float = 1_800_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_failures_expire_with_their_window():
    clock = FakeClock()
    throttle = LoginThrottle(account=(5, 300), client=(20, 300), clock=clock)
    for _ in range(5):
        _fail(throttle, "ada", "10.0.0.1")
    assert throttle.begin("ada", "10.0.0.1").wait == 300
    clock.now += 120
    assert throttle.begin("ada", "10.0.0.2").wait == 180
    clock.now += 181  # five minutes and a second since the failures
    assert throttle.begin("ada", "10.0.0.2").wait == 0
    clock.now += 30  # the next sweep is due
    throttle._sweep()
    assert throttle.tracked() == 0


def test_a_key_that_fails_now_and_then_keeps_only_a_windows_worth():
    """One wrong password every 61 s for a week is never refused; the key must not keep
    every one of them (limits' expiry timer is off, and the sweep drops only idle keys)."""
    clock = FakeClock()
    throttle = LoginThrottle(account=(5, 300), client=(20, 300), clock=clock)
    for _ in range(7 * 24 * 3600 // 61):
        assert _fail(throttle, "ada", "10.0.0.1") == 0
        clock.now += 61
    account = throttle.account.key_for("account", "ada")
    client = throttle.client.key_for("client", "10.0.0.1")
    assert len(throttle.storage.events[account]) == 5
    assert len(throttle.storage.events[client]) == 20
    assert throttle.tracked() == 2
    # The window still counts right: five failures within it lock the name.
    for _ in range(4):
        _fail(throttle, "ada", "10.0.0.1")
    assert throttle.begin("ada", "10.0.0.1").wait > 0


def test_a_browser_with_a_device_cookie_has_its_own_bucket():
    """An attacker's failures from elsewhere lock the account; the user's own browser (it
    presents a device cookie for that name) still gets in, and its own failures lock only it."""
    throttle = LoginThrottle(account=(5, 300), client=(20, 300), device=(5, 300))
    for k in range(5):
        assert _fail(throttle, "ada", f"198.51.100.{k}") == 0
    fresh = throttle.begin("ada", "10.0.0.1")
    assert fresh.wait > 0 and fresh.reason == "this user name"
    own = throttle.begin("ada", "10.0.0.1", device="d1")
    assert own.wait == 0
    throttle.end(own, succeeded=True)
    assert throttle.begin("ada", "10.0.0.2").wait > 0  # the lock on the name stays
    for _ in range(5):
        assert _fail(throttle, "ada", "10.0.0.1", device="d1") == 0
    mine = throttle.begin("ada", "10.0.0.1", device="d1")
    assert mine.wait > 0 and mine.reason == "this user name on this browser"
    assert throttle.begin("ada", "10.0.0.3", device="d2").wait == 0  # another browser
    # A device's success clears its own failures only.
    throttle = LoginThrottle(account=(5, 300), client=(20, 300), device=(5, 300))
    for _ in range(4):
        _fail(throttle, "ada", "10.0.0.1", device="d1")
        _fail(throttle, "ada", "10.0.0.1")
    ok = throttle.begin("ada", "10.0.0.1", device="d1")
    throttle.end(ok, succeeded=True)
    _fail(throttle, "ada", "10.0.0.1")
    assert throttle.begin("ada", "10.0.0.1").wait > 0
    assert throttle.begin("ada", "10.0.0.1", device="d1").wait == 0


def test_every_try_counts_against_its_client_device_cookie_or_not():
    throttle = LoginThrottle(account=(5, 300), client=(6, 300), device=(5, 300))
    for k in range(6):
        _fail(throttle, "ada", "10.0.0.1", device=f"d{k}")
    refused = throttle.begin("ada", "10.0.0.1", device="d9")
    assert refused.wait > 0 and refused.reason == "this address"


def test_a_refusal_for_tries_under_way_says_so():
    throttle = LoginThrottle(account=(50, 300), client=(2, 300))
    under_way = [throttle.begin(f"u{k}", "10.0.0.1") for k in range(2)]
    third = throttle.begin("u3", "10.0.0.1")
    assert third.wait == 1.0 and third.under_way
    assert third.message == "Too many logins under way from this address; retry in a second."
    for attempt in under_way:
        throttle.end(attempt, succeeded=False)
    full = throttle.begin("u3", "10.0.0.1")
    assert not full.under_way
    assert full.message.startswith("Too many failed logins for this address: wait 300 s")


def test_the_library_internal_this_relies_on_is_still_there():
    """_Storage turns off MemoryStorage's per-hit expiry timer by overriding this name."""
    assert hasattr(MemoryStorage, "_MemoryStorage__schedule_expiry")
    assert isinstance(MemoryStorage().events, dict)


def test_client_buckets():
    assert client_key("203.0.113.9") == "203.0.113.9"
    assert client_key("2001:db8:1:2:aaaa::1") == client_key("2001:db8:1:2:ffff::2")
    assert client_key("2001:db8:1:2::1") == "2001:db8:1:2::/64"
    assert client_key("2001:db8:1:3::1") != client_key("2001:db8:1:2::1")
    assert client_key("::ffff:203.0.113.9") == "203.0.113.9"
    assert client_key(None) == "?"
    assert client_key("unix-socket") == "unix-socket"
