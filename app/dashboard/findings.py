"""Drift findings as a panel, shared by the Overview and Rightsizing pages."""

from __future__ import annotations

from dash import html

from app.dashboard import ids
from app.sizing.drift import Finding

SHOWN = ("critical", "warning")


def drift_panel(findings: list[Finding], *, title: str = "Drift") -> html.Div:
    """Critical and warning findings with their severity; a count of the informational ones."""
    shown = [f for f in findings if f.severity in SHOWN]
    info = len(findings) - len(shown)
    items = [
        html.Li(
            [
                html.Span(f.severity, className=f"badge {f.severity}"),
                html.Span(f"{f.engine}: " if f.engine else ""),
                f.message,
            ]
        )
        for f in shown
    ]
    if not items:
        items = [html.Li("Nothing to act on: traffic stays inside the engines' bounds.")]
    note = (
        f"{info} informational finding{'s' if info != 1 else ''} in GET /api/drift." if info else ""
    )
    return html.Div(
        [html.H3(title), html.Ul(items, className="findings"), html.P(note, className="muted")],
        id=ids.DRIFT_PANEL,
        className="card drift",
    )
