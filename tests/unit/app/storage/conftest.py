"""Fixtures of the storage unit tests."""

from __future__ import annotations

import pytest

from tests.support import files


@pytest.fixture
def usual_umask():
    """The process under a login shell's usual umask (022), put back afterwards."""
    with files.usual_umask():
        yield
