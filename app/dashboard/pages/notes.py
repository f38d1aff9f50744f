"""Changes and notes page (/notes): the window's notes and engine-profile changes, newest
first, with a form for admins to add a note ("deployed vLLM 0.33") and to delete one. Every
time chart marks the same list (static/annotations.js)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from datetime import datetime
from typing import Any
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

import dash
from dash import ALL, Dash, Input, Output, State, dcc, html

from app.auth import principal
from app.dashboard import filterbar, ids
from app.dashboard.pages import register_page
from app.services import annotations as service
from app.services import profiles as profile_store
from app.storage.database import Database

LEFT = {"textAlign": "left"}
FIELD = {"display": "flex", "flexDirection": "column", "gap": "2px"}  # label over field
READ_ONLY = (
    "Only admins can add or delete notes: ask one, or use POST /api/annotations with an "
    "admin token."
)


def _when(at: datetime, tz: str) -> str:
    return at.astimezone(ZoneInfo(tz)).strftime("%Y-%m-%d %H:%M")


def _label(text: str) -> dict[str, Any]:
    """An aria-label prop (Dash takes it as a keyword its stubs do not name)."""
    return {"aria-label": text}


def _table(found: list[service.Annotation], tz: str, admin: bool) -> html.Table:
    head = ["when (" + tz + ")", "what", "engine", "who", "text"] + ([""] if admin else [])
    rows = []
    for a in reversed(found):  # newest first
        cells = [
            html.Td(_when(a.at, tz), style=LEFT),
            html.Td("note" if a.kind == "note" else "profile change", style=LEFT),
            html.Td(a.engine or "all", style=LEFT),
            html.Td(a.author, style=LEFT),
            # Text goes in as a string: React escapes it (a note is never HTML).
            html.Td(a.text, style=LEFT, className="note-text"),
        ]
        if admin:
            cells.append(
                html.Td(
                    html.Button(
                        "Delete",
                        id={"type": ids.NOTES_DELETE, "index": a.id},
                        n_clicks=0,
                        className="danger",
                        **_label(f"Delete the note {a.text[:60]}"),
                    )
                    if a.kind == "note"
                    else ""
                )
            )
        rows.append(html.Tr(cells))
    if not rows:
        rows = [
            html.Tr(
                html.Td(
                    "No notes or profile changes in this window.",
                    colSpan=len(head),
                    style=LEFT,
                )
            )
        ]
    return html.Table(
        [html.Thead(html.Tr([html.Th(h, style=LEFT) for h in head])), html.Tbody(rows)],
        className="grid notes",
        id=ids.NOTES_LIST,
    )


def _add_form(engines: list[str], chosen: str | None, tz: str) -> html.Div:
    """The admins' form: text, time (empty: now) and engine (empty: the whole fleet)."""
    return html.Div(
        [
            html.H3("Add a note"),
            html.Div(
                [
                    html.Label(
                        style=FIELD,
                        children=[
                            html.Span("text"),
                            dcc.Input(
                                id=ids.NOTES_TEXT,
                                type="text",
                                maxLength=service.MAX_TEXT,
                                placeholder="deployed vLLM 0.33",
                                style={"minWidth": "28em"},
                            ),
                        ],
                    ),
                    html.Label(
                        style=FIELD,
                        children=[
                            html.Span(f"when ({tz}; empty: now)"),
                            dcc.Input(id=ids.NOTES_AT, type="text", placeholder="2026-11-20T08:00"),
                        ],
                    ),
                    html.Label(
                        style=FIELD,
                        children=[
                            html.Span("engine (empty: all)"),
                            # A native text field with the engines as suggestions: Dash's
                            # Dropdown renders a focusable aria-hidden input (axe: serious).
                            dcc.Input(
                                id=ids.NOTES_ENGINE,
                                type="text",
                                value=chosen or "",
                                list=ids.NOTES_ENGINES,
                                placeholder="all engines",
                                style={"minWidth": "14em"},
                            ),
                            html.Datalist(
                                [html.Option(value=e) for e in engines], id=ids.NOTES_ENGINES
                            ),
                        ],
                    ),
                    html.Button("Add note", id=ids.NOTES_ADD, className="primary", n_clicks=0),
                ],
                # Side by side, wrapping; labels above their fields.
                style={"display": "flex", "flexWrap": "wrap", "gap": "12px", "alignItems": "end"},
                id=ids.NOTES_FORM,
            ),
            html.P("", id=ids.NOTES_RESULT, role="status"),
            dcc.Store(id=ids.NOTES_TZ, data=tz),
        ],
        className="card",
    )


def layout_for(db: Database, query: dict, now: datetime, tz: str) -> html.Div:
    """The page for a URL query: the filter bar's window and engine narrow the list."""
    view, _flt, bar = filterbar.prepare(db, query, now, tz=tz)
    engine = view.choices.get("engine")
    found = service.between(db, view.start, view.end, engine)
    admin = principal.is_admin()
    engines = sorted(
        set(filterbar.choices(db).get("engine", [])) | set(profile_store.stored_profiles(db))
    )
    parts: list = [
        html.H2("Changes and notes"),
        bar,
        html.P(
            "Every time chart marks these as thin dotted lines (hover a label for who and "
            "what). The engine filter keeps its changes and notes and the fleet-wide notes; "
            "model, gateway and tenant do not narrow them.",
            className="muted",
        ),
    ]
    if query.get("added"):
        parts.append(html.P("Note added.", className="saved"))
    if query.get("removed"):
        parts.append(html.P("Note deleted.", className="saved"))
    if admin:
        parts.append(_add_form(engines, engine, view.tz))
    else:
        parts.append(html.P(READ_ONLY, className="readonly-note"))
    parts += [_table(found, view.tz, admin), dcc.Location(id=ids.NOTES_RELOAD, refresh=True)]
    return html.Div(parts)


def add_note(
    db: Database, text: object, at_text: object, engine: object, tz: str, now: datetime
) -> str | None:
    """Store a note typed in the form (its time in `tz`); the problem in words, or None."""
    at = None
    if isinstance(at_text, str) and at_text.strip():
        at = filterbar.parse_time(at_text.strip(), tz)
        if at is None:
            return (
                f"when: {at_text.strip()[:40]!r} is not a time between 1970 and 2200; use "
                f"e.g. 2026-11-20T08:00 ({tz}), or leave it empty for now"
            )
    try:
        service.add_note(
            db,
            text if isinstance(text, str) else "",
            now,
            at=at,
            engine=(engine.strip() or None) if isinstance(engine, str) else None,
        )
    except ValueError as exc:
        return str(exc)
    return None


def _reload(href: str | None, key: str, stamp: str) -> str:
    base = href or "/notes"
    path, _, query = base.partition("?")
    kept = [p for p in query.split("&") if p and not p.startswith(("added=", "removed="))]
    return f"{path}?{'&'.join([*kept, urlencode({key: stamp})])}"


def register(app: Dash, db: Database, clock: Callable[[], datetime], tz: str) -> None:
    """Register the page at /notes and its callbacks: add a note, delete one (admins)."""
    register_page(
        __name__, "/notes", "Notes", 8, lambda **query: layout_for(db, query, clock(), tz)
    )
    counter = itertools.count(1)

    def stamp() -> str:
        # Unique per change: the Location must see a new href to reload.
        return f"{int(clock().timestamp())}-{next(counter)}"

    @app.callback(
        Output(ids.NOTES_RESULT, "children"),
        Output(ids.NOTES_RELOAD, "href"),
        Input(ids.NOTES_ADD, "n_clicks"),
        State(ids.NOTES_TEXT, "value"),
        State(ids.NOTES_AT, "value"),
        State(ids.NOTES_ENGINE, "value"),
        State(ids.NOTES_TZ, "data"),
        State(ids.NOTES_RELOAD, "href"),
        prevent_initial_call=True,
    )
    async def _add(  # type: ignore[no-untyped-def]
        n_clicks: int | None,
        text: str | None,
        at_text: str | None,
        engine: str | None,
        zone: str | None,
        href: str | None,
    ):
        if not n_clicks:
            return dash.no_update, dash.no_update
        if not principal.is_admin():  # checked here too: a request can skip the page
            return READ_ONLY, dash.no_update
        chosen = zone if isinstance(zone, str) else tz
        problem = await asyncio.to_thread(add_note, db, text, at_text, engine, chosen, clock())
        if problem:
            return problem, dash.no_update
        return "Note added.", _reload(href, "added", stamp())

    @app.callback(
        Output(ids.NOTES_RESULT, "children", allow_duplicate=True),
        Output(ids.NOTES_RELOAD, "href", allow_duplicate=True),
        Input({"type": ids.NOTES_DELETE, "index": ALL}, "n_clicks"),
        State(ids.NOTES_RELOAD, "href"),
        prevent_initial_call=True,
    )
    async def _delete(_clicks: list[int | None], href: str | None):  # type: ignore[no-untyped-def]
        trigger = dash.ctx.triggered_id
        pressed = dash.ctx.triggered[0].get("value") if dash.ctx.triggered else None
        if not isinstance(trigger, dict) or not pressed:  # a re-render, not a click
            return dash.no_update, dash.no_update
        if not principal.is_admin():
            return READ_ONLY, dash.no_update
        note_id = str(trigger.get("index", ""))
        if not await asyncio.to_thread(service.delete_note, db, note_id):
            return f"No note has id {note_id[:40]!r} any more; reload the page.", dash.no_update
        return "Note deleted.", _reload(href, "removed", stamp())
