"""One module per page; each registers itself from `register(...)`."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from concurrent import futures
from typing import TYPE_CHECKING

import dash
from dash import dcc, html

from app.analytics.rollups import memo
from app.dashboard.speedups import prefetched

if TYPE_CHECKING:
    from dash.development.base_component import Component

log = logging.getLogger("tokenshape.dashboard")


def safe(
    name: str, build: Callable[..., html.Div], path: str = ""
) -> Callable[..., Awaitable[html.Div]]:
    """Wrap a page layout: run it off the event loop; log a failure, show it as a plain panel.

    Dash's FastAPI backend calls a synchronous layout or callback on the event loop itself, so
    a query of a second would stall ingest and every other request for that second. A build
    already started by `prefetch` for the same URL and caller is taken instead of a new one."""

    async def layout(**query: object) -> html.Div:
        try:
            started = prefetched.take(path, query)
            if started is not None:
                return await asyncio.wrap_future(started)
            return await asyncio.to_thread(build, **query)
        except Exception as exc:  # the page must say something, never go blank
            return _failed(name, query, exc)

    return layout


def _failed(name: str, query: dict, exc: Exception) -> html.Div:
    log.error("the %s page failed for query %r", name, query, exc_info=exc)
    return titled(
        name,
        html.Div(
            [
                html.H3(f"The {name} page could not be built"),
                html.P(
                    f"{type(exc).__name__}. The server log has the details; "
                    "try another window or filter."
                ),
            ],
            className="empty page-error",
        ),
    )


def ready_page(path: str, search: str, wait_s: float) -> html.Div | None:
    """The page at `path` for the URL query `search`, if the caller's HTML request for that
    very URL started its build and it is done within `wait_s`; else None, and any build stays
    for Dash's routing callback to take while the shell shows a loading state. Waits in the
    calling worker thread.

    Only a build the page's own HTML request started counts: a Referer cut down to the
    origin (a long URL, a strict Referrer-Policy) names "/" and must not put the Overview
    into another page's first layout."""
    query = prefetched.query_of(search.removeprefix("?"))
    started = prefetched.peek(path, query)
    if started is None or not futures.wait([started], timeout=wait_s).done:
        return None
    if prefetched.take(path, query, started) is None:  # another request took it meanwhile
        return None
    try:
        return started.result()
    except Exception as exc:
        return _failed(_builders[path][0], query, exc)


def register_page(
    module: str, path: str, name: str, order: int, build: Callable[..., html.Div]
) -> None:
    """Register a page whose layout is `build(**url_query)`, run safely off the event loop."""
    build = _sharing(name, build)
    dash.register_page(
        module,
        path=path,
        name=name,
        title=f"tokenshape · {name}",
        order=order,
        layout=safe(name, build, path),
    )
    prefetched.pages[path] = build
    _builders[path] = (name, build)


_builders: dict[str, tuple[str, Callable[..., html.Div]]] = {}


def _sharing(name: str, build: Callable[..., html.Div]) -> Callable[..., html.Div]:
    """`build` with one scan per rollup query however many of its parts ask (memo.shared),
    its title made the page's one H1 (`titled`)."""

    def shared_build(**query: object) -> html.Div:
        with memo.shared():
            return titled(name, build(**query))

    return shared_build


def titled(name: str, page: html.Div) -> html.Div:
    """The page with exactly one H1: its title heading (a first child H2 that is its only
    H2) becomes the H1, else an H1 of the page's name goes first.

    The pages title themselves with an H2; a screen reader's list of headings and its "go to
    the main heading" key want the page's title to be the one H1, and the shell's bar has none."""
    children = page.children if isinstance(page.children, list) else [page.children]
    h2s = [c for c in children if isinstance(c, html.H2)]
    if any(isinstance(c, html.H1) for c in children):
        return page
    first = children[0] if children else None
    if isinstance(first, html.H2) and h2s == [first]:
        props = {
            k: getattr(first, k) for k in first._prop_names if getattr(first, k, None) is not None
        }
        page.children = [html.H1(**props), *children[1:]]
    else:
        page.children = [html.H1(name, className="page-title"), *children]
    return page


def graph(graph_id: str, figure: object) -> dcc.Graph:
    """A figure with the dashboard's graph settings."""
    return dcc.Graph(id=graph_id, figure=figure, config={"displaylogo": False})


def graph_card(title: str, graph_id: str, figure: object, *extra: Component) -> html.Div:
    """A titled card holding one figure (and optional notes under it)."""
    return html.Div([html.H3(title), graph(graph_id, figure), *extra], className="card")
