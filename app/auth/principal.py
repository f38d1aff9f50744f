"""The caller of the current request, set by the auth gate and read by pages and callbacks."""

from __future__ import annotations

from contextvars import ContextVar
from dataclasses import dataclass


@dataclass(frozen=True)
class Principal:
    """A logged-in user, a bearer token, or everyone (open mode)."""

    name: str
    role: str  # viewer | admin
    via: str  # session | token | open
    csrf: str = ""

    @property
    def is_admin(self) -> bool:
        """May change profiles, tokens, users and report settings."""
        return self.role == "admin"


# Context variables follow the request into the threads Dash layouts run in (to_thread copies
# the context), so a page knows its viewer without Dash passing the request along.
_current: ContextVar[Principal | None] = ContextVar("tokenshape_principal", default=None)


def current() -> Principal | None:
    """The caller of the request being served, or None outside a request."""
    return _current.get()


def is_admin() -> bool:
    """Whether the current caller may change things."""
    who = _current.get()
    return who is not None and who.is_admin


def set_current(who: Principal | None) -> object:
    """Set the caller for this request; returns a token for `reset`."""
    return _current.set(who)


def reset(token: object) -> None:
    """Restore the previous caller."""
    _current.reset(token)  # type: ignore[arg-type]
