"""One module per page; each registers itself from `register(...)`."""

from __future__ import annotations

import logging
from collections.abc import Callable

from dash import html

log = logging.getLogger("tokenshape.dashboard")


def safe(name: str, build: Callable[..., html.Div]) -> Callable[..., html.Div]:
    """Wrap a page layout: a failure is logged with its traceback and shown as a plain panel."""

    def layout(**query: object) -> html.Div:
        try:
            return build(**query)
        except Exception as exc:  # the page must say something, never go blank
            log.exception("the %s page failed for query %r", name, query)
            return html.Div(
                [
                    html.H3(f"The {name} page could not be built"),
                    html.P(
                        f"{type(exc).__name__}. The server log has the details; "
                        "try another window or filter."
                    ),
                ],
                className="empty page-error",
            )

    return layout
