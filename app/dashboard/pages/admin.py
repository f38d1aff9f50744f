"""Admin page: API tokens (create, rotate, revoke, last use) and dashboard users."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING

from dash import Dash, Input, Output, State, dcc, html, no_update

from app.auth import principal
from app.auth.principal import Principal
from app.config import Settings
from app.dashboard import ids
from app.dashboard.edge import Chosen
from app.dashboard.pages import register_page
from app.services.credentials import ROLES, SCOPES, Credentials

if TYPE_CHECKING:
    from dash.development.base_component import Component

ADMINS_ONLY = "Only admins can manage tokens and users."
READ_ONLY_NOTE = "Read-only: you are a viewer; ask an admin to make these changes."


def _when(value) -> str:
    return f"{value:%Y-%m-%d %H:%M}" if value else "never"


def tokens_table(creds: Credentials) -> html.Table:
    """Every token with its prefix, scope and last use; never a secret."""
    head = ("token", "gateway", "scope", "created", "last used", "state")
    rows = [
        html.Tr(
            [
                html.Td(html.Code(t.display)),
                html.Td(t.gateway),
                html.Td(t.scope),
                html.Td(_when(t.created_at)),
                html.Td(_when(t.last_used_at)),
                html.Td(f"revoked {_when(t.revoked_at)}" if t.revoked_at else "live"),
            ]
        )
        for t in creds.tokens()
    ] or [html.Tr(html.Td("No tokens yet.", colSpan=len(head)))]
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)],
        className="grid",
        id=ids.ADMIN_TOKENS,
    )


def users_table(creds: Credentials) -> html.Table:
    """Every user with role and last login."""
    head = ("user", "role", "created", "last login")
    rows = [
        html.Tr(
            [
                html.Td(u.name),
                html.Td(u.role),
                html.Td(_when(u.created_at)),
                html.Td(_when(u.last_login_at)),
            ]
        )
        for u in creds.users()
    ] or [html.Tr(html.Td("No users yet.", colSpan=len(head)))]
    return html.Table(
        [html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)],
        className="grid",
        id=ids.ADMIN_USERS,
    )


def _token_options(creds: Credentials) -> list[html.Option]:
    """The live tokens as the token select's options, after a blank one (nothing chosen)."""
    # Keyed by id: when the list changes (a token made, one revoked) the browser keeps the
    # option the user chose selected rather than whatever moved into its place.
    return [html.Option("choose a live token", value="", key="")] + [
        html.Option(f"{t.display} ({t.gateway}, {t.scope})", value=t.id, key=t.id)
        for t in creds.tokens()
        if t.revoked_at is None
    ]


def _select(select_id: str, options: list, disabled: bool) -> html.Select:
    """A native select: Dash 4.4.1's Dropdown puts a focusable input under aria-hidden=true
    (axe-core's aria-hidden-focus), a native one is keyboard- and screen-reader-ready.

    Dash does not report a native select's choice, so each action's click copies it into a
    store in the browser (`_CHOSEN_JS`), and that store's change runs the server callback."""
    return html.Select(options, id=select_id, name=select_id, disabled=disabled)


def _choices(values: tuple[str, ...], chosen: str) -> list[html.Option]:
    return [html.Option(v, value=v, selected=v == chosen) for v in values]


def _field(label: str, control: Component) -> html.Label:
    return html.Label([html.Span(label), control])


def _forms(creds: Credentials | None) -> list:
    """The token and user forms for an admin (`creds`); for anyone else (None) disabled, with
    the read-only note, and no tables: tokens and users are for admins' eyes only."""
    off = creds is None
    note = [html.P(READ_ONLY_NOTE, className="readonly-note")] if off else []
    form_class = "admin-form readonly" if off else "admin-form"
    return [
        html.H2("API tokens"),
        html.P(
            "Gateways ship with ingest tokens, scripts read /api with read tokens, "
            "admin tokens change profiles, tokens and users. A token is shown once, "
            "when it is made; only its first characters are kept in the clear.",
            className="muted",
        ),
        html.Div(
            [
                _field("gateway", dcc.Input(id=ids.ADMIN_GATEWAY, type="text", disabled=off)),
                _field("scope", _select(ids.ADMIN_SCOPE, _choices(SCOPES, "ingest"), off)),
                html.Button("Create token", id=ids.ADMIN_CREATE, disabled=off),
                _field(
                    "live token",
                    _select(
                        ids.ADMIN_TOKEN_ID,
                        _token_options(creds)
                        if creds
                        else [html.Option("tokens are listed for admins only", value="")],
                        off,
                    ),
                ),
                html.Button("Rotate", id=ids.ADMIN_ROTATE, disabled=off),
                # Destructive: the browser asks first (submit_n_clicks fires on OK only).
                dcc.ConfirmDialogProvider(
                    html.Button("Revoke", disabled=off),
                    id=ids.ADMIN_REVOKE,
                    message="Revoke this token? Everything using it is refused from the "
                    "next request on; this cannot be undone (create a new token instead).",
                ),
                *note,
            ],
            className=form_class,
        ),
        html.Div(id=ids.ADMIN_RESULT, role="status"),
        html.Div(tokens_table(creds) if creds else [], id=ids.ADMIN_TOKENS + "-box"),
        html.H2("Users"),
        html.Div(
            [
                _field("name", dcc.Input(id=ids.ADMIN_USER_NAME, type="text", disabled=off)),
                _field("role", _select(ids.ADMIN_USER_ROLE, _choices(ROLES, "viewer"), off)),
                _field(
                    "password",
                    dcc.Input(id=ids.ADMIN_USER_PASSWORD, type="password", disabled=off),
                ),
                html.Button("Add user", id=ids.ADMIN_USER_ADD, disabled=off),
                dcc.ConfirmDialogProvider(
                    html.Button("Remove user", disabled=off),
                    id=ids.ADMIN_USER_REMOVE,
                    message="Remove this user? Their sessions end at once; add them again "
                    "to undo (with a new password).",
                ),
                *note,
            ],
            className=form_class,
        ),
        html.Div(users_table(creds) if creds else [], id=ids.ADMIN_USERS + "-box"),
        dcc.Store(id=ids.ADMIN_SCOPE_CHOSEN),
        dcc.Store(id=ids.ADMIN_TOKEN_CHOSEN),
        dcc.Store(id=ids.ADMIN_ROLE_CHOSEN),
    ]


def _who_words(who: Principal | None) -> str:
    if who is None:
        return "not signed in"
    if who.via == "open":
        return f"not asked to sign in (open mode, {who.role})"
    if who.via == "token":
        return f"using {who.name} ({who.role})"
    return f"signed in as {who.name} ({who.role})"


def access_card(creds: Credentials, who: Principal | None) -> html.Div:
    """For anyone but an admin: why this page is not theirs, what they can do, whom to ask."""
    admins = sorted(u.name for u in creds.users() if u.role == "admin")
    ask = (
        f"Whom to ask: an admin ({', '.join(admins)}), to change an engine profile, to "
        "create a read token for your scripts (GET /api/...) or to give you the admin role."
        if admins
        else "No admin exists yet: whoever runs the server adds one with "
        "`tokenshape user add NAME --role admin`."
    )
    return html.Div(
        [
            html.P(
                html.Strong(f"Admin is for admins; you are {_who_words(who)}."),
                id=ids.ADMIN_ACCESS_WHO,
            ),
            html.P(
                "Admins create, rotate and revoke API tokens and add and remove users here. "
                "As a viewer you can read every page, download its CSV and follow the "
                "recommendations; engine profiles are shown read-only."
            ),
            html.P(ask),
        ],
        className="card access",
        id=ids.ADMIN_ACCESS,
    )


def _mode_words(settings: Settings | None) -> tuple[str, str]:
    """Why logins are off, and who can therefore reach the server (for the open-mode card)."""
    if settings is None:
        return "logins are off", "everyone who can reach it"
    host = f"[{settings.host}]" if ":" in settings.host else settings.host  # IPv6
    where = f"{host}:{settings.port}"
    if settings.loopback:
        why = (
            f"TOKENSHAPE_AUTH is {settings.auth} and the server listens on {settings.host} only"
            if settings.auth == "auto"
            else f"TOKENSHAPE_AUTH=off and the server listens on {settings.host} only"
        )
        who = (
            "everyone who can reach it from this machine (it answers only requests sent "
            f"straight to http://{where}/ or localhost, not through a proxy or another name)"
        )
        return why, who
    return "TOKENSHAPE_AUTH=off", f"everyone who can reach {where} over the network"


OPEN_ACTIONS = (
    "read every page and download its CSV",
    "change and delete engine profiles (Rightsizing)",
    "create, rotate and revoke API tokens; add and remove users (this page)",
    "read the API's GET routes under /api/ (but /api/tokens and /api/users) and /metrics",
)
TOKEN_ACTIONS = (
    "send traffic to /v1/requests, /v1/litellm, /v1/traces and /v1/logs, or rollups to "
    "/v1/rollups: an ingest token",
    "the API's changes and its token and user lists (PUT and DELETE /api/engines/{name}, "
    "/api/tokens, /api/users, POST /api/admin/backup): an admin token",
)


def open_mode_card(creds: Credentials) -> html.Div:
    """Open mode: why logins are off, exactly which actions are open, how to turn them on."""
    settings = creds.auth.settings if creds.auth is not None else None
    why, reach = _mode_words(settings)
    names = [u.name for u in creds.users()]
    users = (
        "No users exist yet."
        if not names
        else f"{len(names)} user{'s' if len(names) != 1 else ''} exist ({', '.join(names)}), "
        "but nobody is asked to sign in while logins are off."
    )
    return html.Div(
        [
            html.P(
                [
                    html.Strong("Open mode: "),
                    f"logins are off because {why}, so {reach} is an admin. {users}",
                ]
            ),
            html.P("Open to everyone, with no login and no token:"),
            html.Ul([html.Li(a) for a in OPEN_ACTIONS]),
            html.P("Still needing a token, even now:"),
            html.Ul([html.Li(a) for a in TOKEN_ACTIONS]),
            html.P(
                [
                    "To turn sign-in on: add an admin user below (or ",
                    html.Code("tokenshape user add NAME --role admin"),
                    "), then restart the server with ",
                    html.Code("TOKENSHAPE_AUTH=on"),
                    ". Adding users alone changes nothing while logins are off.",
                ]
            ),
        ],
        className="card open-mode",
        id=ids.ADMIN_OPEN_MODE,
    )


def layout_for(creds: Credentials) -> html.Div:
    """The page for an admin (with open mode explained when it is on); for anyone else the
    reason it is not theirs, and the forms disabled."""
    who = principal.current()
    if who is None or not who.is_admin:
        return html.Div([access_card(creds, who), *_forms(None)])
    opened = [open_mode_card(creds)] if who.via == "open" else []
    return html.Div([*opened, *_forms(creds)])


# The browser-side half of reading a native select: its value and the button that was
# clicked; `at` makes each click a change, so choosing the same twice acts twice.
_CHOSEN_JS = """function () {
    var select = document.getElementById(%s);
    var by = (window.dash_clientside.callback_context.triggered[0] || {}).prop_id || "";
    return {choice: select ? select.value : "", by: by.split(".")[0], at: Date.now()};
}"""


def _picked(chosen: object) -> tuple[str, str]:
    """(the select's value, the button's id) from a store `_CHOSEN_JS` filled; a request
    can send anything, so anything else is ("", "")."""
    if not isinstance(chosen, dict):
        return "", ""
    choice, by = chosen.get("choice"), chosen.get("by")
    return (choice if isinstance(choice, str) else "", by if isinstance(by, str) else "")


def _note(text: str, secret: str | None = None) -> html.Div:
    parts: list = [html.P(text)]
    if secret:
        parts.append(html.Pre(secret, className="code new-token"))
    return html.Div(parts, className="card")


def register(app: Dash, creds: Credentials) -> None:
    """Register /admin and its callbacks (each checks the caller is an admin).

    `creds` carries the server's AuthState, so a revocation or a removal drops the cached
    credentials and acts on the very next request."""
    register_page(__name__, "/admin", "Admin", 9, lambda **_query: layout_for(creds))
    token_outputs = (
        Output(ids.ADMIN_RESULT, "children", allow_duplicate=True),
        Output(ids.ADMIN_TOKENS + "-box", "children", allow_duplicate=True),
        Output(ids.ADMIN_TOKEN_ID, "children", allow_duplicate=True),
    )

    def token_answer(note: html.Div) -> tuple:
        return note, tokens_table(creds), _token_options(creds)

    # Each action's click copies its native select's choice into a store, in the browser;
    # the store's change is what runs the action's server callback (a State would not do:
    # Dash sends it without waiting for a browser-side callback of the same click).
    for store, select, triggers in (
        (ids.ADMIN_SCOPE_CHOSEN, ids.ADMIN_SCOPE, [(ids.ADMIN_CREATE, "n_clicks")]),
        (
            ids.ADMIN_TOKEN_CHOSEN,
            ids.ADMIN_TOKEN_ID,
            [(ids.ADMIN_ROTATE, "n_clicks"), (ids.ADMIN_REVOKE, "submit_n_clicks")],
        ),
        (ids.ADMIN_ROLE_CHOSEN, ids.ADMIN_USER_ROLE, [(ids.ADMIN_USER_ADD, "n_clicks")]),
    ):
        app.clientside_callback(
            _CHOSEN_JS % json.dumps(select),
            Output(store, "data"),
            *[Input(component, prop) for component, prop in triggers],
            prevent_initial_call=True,
        )

    # Dash's renderer needs each output to have one callback that owns it without
    # allow_duplicate: creating a token owns the token outputs, adding a user the users table.
    @app.callback(
        Output(ids.ADMIN_RESULT, "children"),
        Output(ids.ADMIN_TOKENS + "-box", "children"),
        Output(ids.ADMIN_TOKEN_ID, "children"),
        Input(ids.ADMIN_SCOPE_CHOSEN, "data"),
        State(ids.ADMIN_GATEWAY, "value"),
        prevent_initial_call=True,
    )
    async def _create(chosen: Chosen | None, gateway: str | None):  # type: ignore[no-untyped-def]
        scope, _by = _picked(chosen)
        if not principal.is_admin():
            return _note(ADMINS_ONLY), no_update, no_update

        def work() -> tuple:
            try:
                plain, info = creds.create_token(gateway or "", scope or "")
            except ValueError as exc:
                return token_answer(_note(f"Not created: {exc}."))
            return token_answer(
                _note(
                    f"Created {info.display} for gateway '{info.gateway}' ({info.scope}). "
                    "Copy it now: it is not shown again.",
                    plain,
                )
            )

        return await asyncio.to_thread(work)

    @app.callback(
        *token_outputs,
        Input(ids.ADMIN_TOKEN_CHOSEN, "data"),
        prevent_initial_call=True,
    )
    async def _rotate_or_revoke(chosen: Chosen | None):  # type: ignore[no-untyped-def]
        token_id, by = _picked(chosen)
        if not principal.is_admin():
            return _note(ADMINS_ONLY), no_update, no_update
        rotating = by == ids.ADMIN_ROTATE

        def work() -> tuple:
            if not rotating:
                if not creds.revoke_token(token_id or ""):
                    return token_answer(_note("Choose a live token to revoke."))
                return token_answer(_note("Revoked: the token stopped working."))
            rotated = creds.rotate_token(token_id or "")
            if rotated is None:
                return token_answer(_note("Choose a live token to rotate."))
            return token_answer(
                _note(
                    f"Rotated: the old token stopped working; the new one is "
                    f"{rotated[1].display}. Copy it now: it is not shown again.",
                    rotated[0],
                )
            )

        return await asyncio.to_thread(work)

    user_outputs = (
        Output(ids.ADMIN_RESULT, "children", allow_duplicate=True),
        Output(ids.ADMIN_USERS + "-box", "children", allow_duplicate=True),
    )

    @app.callback(
        Output(ids.ADMIN_RESULT, "children", allow_duplicate=True),
        Output(ids.ADMIN_USERS + "-box", "children"),
        Input(ids.ADMIN_ROLE_CHOSEN, "data"),
        State(ids.ADMIN_USER_NAME, "value"),
        State(ids.ADMIN_USER_PASSWORD, "value"),
        prevent_initial_call=True,
    )
    async def _add_user(  # type: ignore[no-untyped-def]
        chosen: Chosen | None, name: str | None, password: str | None
    ):
        role, _by = _picked(chosen)
        if not principal.is_admin():
            return _note(ADMINS_ONLY), no_update

        def work() -> tuple:
            try:
                user = creds.add_user((name or "").strip(), password or "", role or "")
            except ValueError as exc:
                return _note(f"Not added: {exc}."), users_table(creds)
            return _note(f"Added {user.name} as {user.role}."), users_table(creds)

        return await asyncio.to_thread(work)

    @app.callback(
        *user_outputs,
        Input(ids.ADMIN_USER_REMOVE, "submit_n_clicks"),
        State(ids.ADMIN_USER_NAME, "value"),
        prevent_initial_call=True,
    )
    async def _remove_user(_n: int | None, name: str | None):  # type: ignore[no-untyped-def]
        who = principal.current()
        if who is None or not who.is_admin:
            return _note(ADMINS_ONLY), no_update
        if who.via == "session" and name == who.name:
            return _note("You cannot remove yourself; ask another admin."), users_table(creds)

        def work() -> tuple:
            if not creds.remove_user((name or "").strip()):
                return _note(f"No user named {name!r}."), users_table(creds)
            return _note(f"Removed {name}; their sessions ended."), users_table(creds)

        return await asyncio.to_thread(work)
