"""One page, one scan: within `shared()`, a rollup query asked twice with the same filter and
split runs once (the Overview's KPIs and its per-model table read the same value rows).

Scoped to one page build or callback (a context variable, so threads and requests never
share an answer): the data a page reads cannot change under it in a way the page could show,
and nothing outlives the block, so no answer is ever stale.

`kept` holds a few answers across requests, for keys that name the data version they were
read at (whole days of the rollups and when they were built): a later rebuild changes the key,
so a kept answer is never stale either."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

T = TypeVar("T")

_scope: ContextVar[dict[Hashable, Any] | None] = ContextVar("tokenshape_rollup_memo", default=None)


@contextmanager
def shared() -> Iterator[None]:
    """Within this block, identical rollup scans (same kind, filter and split) run once."""
    token = _scope.set({})
    try:
        yield
    finally:
        _scope.reset(token)


def active() -> bool:
    """Whether a `shared()` block is open here."""
    return _scope.get() is not None


def once(key: Hashable, make: Callable[[], T]) -> T:
    """`make()`, or its answer from earlier in the open `shared()` block (none: always made)."""
    memo = _scope.get()
    if memo is None:
        return make()
    if key not in memo:
        memo[key] = make()
    return memo[key]


KEPT = 32  # answers kept across requests (each a few hundred buckets per series)
_kept: OrderedDict[Hashable, Any] = OrderedDict()
_kept_lock = threading.Lock()


def kept(key: Hashable, make: Callable[[], T]) -> T:
    """`make()`, or its answer for `key` kept from an earlier request (the least recently
    used beyond KEPT are dropped). `key` must change whenever the answer would."""
    with _kept_lock:
        if key in _kept:
            _kept.move_to_end(key)
            return _kept[key]
    value = make()  # outside the lock: two requests may both make it, one answer is kept
    with _kept_lock:
        _kept[key] = value
        _kept.move_to_end(key)
        while len(_kept) > KEPT:
            _kept.popitem(last=False)
    return value
