"""uvicorn's proxy options from TOKENSHAPE_TRUSTED_PROXIES."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.server.proxies import proxy_options


def _options(value: str) -> dict:
    return proxy_options(Settings(trusted_proxies=value, _env_file=None))


def test_no_proxy_configured_believes_no_forwarded_header():
    # uvicorn's own default would believe them from 127.0.0.1.
    assert _options("") == {"proxy_headers": False, "forwarded_allow_ips": []}
    assert _options(" , ") == {"proxy_headers": False, "forwarded_allow_ips": []}


def test_addresses_and_networks_are_passed_normalised():
    got = _options("127.0.0.1, 10.1.2.3/8 ,::1, fd00::/8")
    assert got == {
        "proxy_headers": True,
        "forwarded_allow_ips": ["127.0.0.1", "10.0.0.0/8", "::1", "fd00::/8"],
    }


@pytest.mark.parametrize("value", ["proxy.internal", "10.0.0.300", "10.0.0.0/33", "*"])
def test_anything_else_fails_loudly(value):
    # uvicorn would take it as a literal that never matches, trusting nobody without a word.
    with pytest.raises(ValueError, match="trusted_proxies"):
        _options(value)
