"""httpx clients and one-shot calls that share one TLS context.

httpx loads the CA certificates again for every client it makes (about 30 ms each, and a test
run makes thousands); these clients speak plain HTTP to loopback, so one context serves all.
`http.get(url)` is `httpx.get(url)`, `http.client(...)` is `httpx.Client(...)`, otherwise alike.
"""

from __future__ import annotations

import ssl

import httpx

TLS = ssl.create_default_context()


def client(**kw) -> httpx.Client:
    """`httpx.Client(**kw)`, without loading certificates again."""
    return httpx.Client(verify=TLS, **kw)


def request(method: str, url: str, **kw) -> httpx.Response:
    """`httpx.request(method, url, **kw)`: one request on a connection of its own."""
    with client() as c:
        return c.request(method, url, **kw)


def get(url: str, **kw) -> httpx.Response:
    """`httpx.get(url, **kw)`."""
    return request("GET", url, **kw)


def post(url: str, **kw) -> httpx.Response:
    """`httpx.post(url, **kw)`."""
    return request("POST", url, **kw)
