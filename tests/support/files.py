"""File modes: what a file's permission bits are, and the umask a login shell usually has."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def mode(path: str | Path) -> int:
    """The permission bits of a file or folder (0o600, 0o700, …)."""
    return stat.S_IMODE(os.stat(path).st_mode)


@contextmanager
def usual_umask() -> Iterator[None]:
    """The process under a login shell's usual umask (022), put back afterwards."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)
