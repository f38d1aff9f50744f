"""One page, one scan: within `shared()`, a rollup query asked twice with the same filter and
split runs once (the Overview's KPIs and its per-model table read the same value rows).

Scoped to one page build or callback (a context variable, so threads and requests never
share an answer): the data a page reads cannot change under it in a way the page could show,
and nothing outlives the block, so no answer is ever stale."""

from __future__ import annotations

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
