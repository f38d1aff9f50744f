"""Whether the email's links (TOKENSHAPE_PUBLIC_URL) lead to this dashboard: unset, or not the
address the server was reached at, is said in words with what to set."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True)
class LinkCheck:
    """The verdict on the email's links: ok, or a problem and what to set."""

    ok: bool
    message: str


def _origin(url: str) -> tuple[str, str, int | None, str] | None:
    """(scheme, host, port, path) of an absolute http(s) URL; None for anything else."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return (
        parts.scheme,
        parts.hostname.lower(),
        port or DEFAULT_PORTS[parts.scheme],
        parts.path.rstrip("/"),
    )


def base_of(url: str) -> str:
    """The scheme, host and port of a URL, as people type it ('http://host:8050')."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def check_links(public_url: str, explicit: bool, seen: str | None) -> LinkCheck:
    """Judge TOKENSHAPE_PUBLIC_URL (`explicit`: set rather than the default) against `seen`,
    the base URL a request reached this server at (None: unknown, e.g. the CLI)."""
    here = f" (this page was opened at {base_of(seen)})" if seen else ""
    suggestion = base_of(seen) if seen else "https://tokenshape.example.com"
    fix = f"set TOKENSHAPE_PUBLIC_URL={suggestion} and restart the server"
    if not explicit or not public_url.strip():
        return LinkCheck(
            False,
            f"TOKENSHAPE_PUBLIC_URL is not set, so the email's links point at {public_url or '…'}, "
            f"the default, which opens only on the server's own machine: set it to the address "
            f"people open the dashboard at{here}, e.g. {fix.removeprefix('set ')}.",
        )
    public = _origin(public_url)
    if public is None:
        return LinkCheck(
            False,
            f"TOKENSHAPE_PUBLIC_URL={public_url!r} is not an http:// or https:// address, so the "
            f"email's links lead nowhere: {fix}.",
        )
    if seen is None:
        return LinkCheck(True, f"The email's links point at {public_url} (TOKENSHAPE_PUBLIC_URL).")
    actual = _origin(seen)
    if actual is None or public[:3] == actual[:3]:
        return LinkCheck(
            True,
            f"The email's links point at {public_url} (TOKENSHAPE_PUBLIC_URL), the address of "
            "this page.",
        )
    return LinkCheck(
        False,
        f"The email's links point at {public_url} (TOKENSHAPE_PUBLIC_URL), but this page was "
        f"opened at {base_of(seen)}. If that is the address people use, {fix}; if a proxy "
        "publishes the dashboard at the first address, the links are right.",
    )
