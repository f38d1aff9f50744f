"""Which peers may say who the client is: uvicorn's proxy options from the settings."""

from __future__ import annotations

import ipaddress
from typing import Any

from app.config import Settings


def trusted_proxies(settings: Settings) -> list[str]:
    """The configured proxy addresses and CIDR networks, normalised (10.1.2.3/8 is 10.0.0.0/8).

    uvicorn takes a network only in its strict form and silently ignores anything that is not an
    address or a network: a typo here must fail loudly instead of trusting nobody."""
    found = []
    for item in (i.strip() for i in settings.trusted_proxies.split(",")):
        if not item:
            continue
        try:
            if "/" in item:
                found.append(str(ipaddress.ip_network(item, strict=False)))
            else:
                found.append(str(ipaddress.ip_address(item)))
        except ValueError:
            raise ValueError(
                f"invalid setting: trusted_proxies: {item!r} is not an IP address or a CIDR network"
            ) from None
    return found


def proxy_options(settings: Settings) -> dict[str, Any]:
    """uvicorn.run/Config arguments: X-Forwarded-For/-Proto believed only from trusted proxies.

    uvicorn's own default believes them from 127.0.0.1, so any local process could claim any
    address (and the scheme); with no proxy configured the peer address is the client."""
    proxies = trusted_proxies(settings)
    if not proxies:
        return {"proxy_headers": False, "forwarded_allow_ips": []}
    return {"proxy_headers": True, "forwarded_allow_ips": proxies}
