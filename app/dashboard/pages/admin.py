"""Admin page: API tokens (create, rotate, revoke, last use) and dashboard users."""

from __future__ import annotations

import asyncio

from dash import Dash, Input, Output, State, ctx, dcc, html, no_update

from app.auth import principal
from app.dashboard import ids
from app.dashboard.pages import register_page
from app.services.credentials import ROLES, SCOPES, Credentials

ADMINS_ONLY = "Only admins can manage tokens and users."


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


def _live_ids(creds: Credentials) -> list[dict]:
    return [
        {"label": f"{t.display} ({t.gateway}, {t.scope})", "value": t.id}
        for t in creds.tokens()
        if t.revoked_at is None
    ]


def layout_for(creds: Credentials) -> html.Div:
    """The page, or a refusal for anyone but an admin."""
    if not principal.is_admin():
        return html.Div([html.H2("Admin"), html.P(ADMINS_ONLY)], className="empty")
    return html.Div(
        [
            html.H2("API tokens"),
            html.P(
                "Gateways ship with ingest tokens, scripts read /api with read tokens, "
                "admin tokens change profiles, tokens and users. A token is shown once, "
                "when it is made; only its first characters are kept in the clear.",
                className="muted",
            ),
            html.Div(
                [
                    html.Label(["gateway", dcc.Input(id=ids.ADMIN_GATEWAY, type="text")]),
                    html.Label(
                        [
                            "scope",
                            dcc.Dropdown(
                                list(SCOPES),
                                "ingest",
                                id=ids.ADMIN_SCOPE,
                                clearable=False,
                            ),
                        ]
                    ),
                    html.Button("Create token", id=ids.ADMIN_CREATE),
                    html.Label(
                        [
                            "live token",
                            dcc.Dropdown(_live_ids(creds), id=ids.ADMIN_TOKEN_ID),
                        ]
                    ),
                    html.Button("Rotate", id=ids.ADMIN_ROTATE),
                    # Destructive: the browser asks first (submit_n_clicks fires on OK only).
                    dcc.ConfirmDialogProvider(
                        html.Button("Revoke"),
                        id=ids.ADMIN_REVOKE,
                        message="Revoke this token? Everything using it is refused from the "
                        "next request on; this cannot be undone (create a new token instead).",
                    ),
                ],
                className="admin-form",
            ),
            html.Div(id=ids.ADMIN_RESULT, role="status"),
            html.Div(tokens_table(creds), id=ids.ADMIN_TOKENS + "-box"),
            html.H2("Users"),
            html.Div(
                [
                    html.Label(["name", dcc.Input(id=ids.ADMIN_USER_NAME, type="text")]),
                    html.Label(
                        [
                            "role",
                            dcc.Dropdown(
                                list(ROLES),
                                "viewer",
                                id=ids.ADMIN_USER_ROLE,
                                clearable=False,
                            ),
                        ]
                    ),
                    html.Label(
                        [
                            "password",
                            dcc.Input(id=ids.ADMIN_USER_PASSWORD, type="password"),
                        ]
                    ),
                    html.Button("Add user", id=ids.ADMIN_USER_ADD),
                    dcc.ConfirmDialogProvider(
                        html.Button("Remove user"),
                        id=ids.ADMIN_USER_REMOVE,
                        message="Remove this user? Their sessions end at once; add them again "
                        "to undo (with a new password).",
                    ),
                ],
                className="admin-form",
            ),
            html.Div(users_table(creds), id=ids.ADMIN_USERS + "-box"),
        ]
    )


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
        Output(ids.ADMIN_TOKEN_ID, "options", allow_duplicate=True),
    )

    def token_answer(note: html.Div) -> tuple:
        return note, tokens_table(creds), _live_ids(creds)

    # Dash's renderer needs each output to have one callback that owns it without
    # allow_duplicate: creating a token owns the token outputs, adding a user the users table.
    @app.callback(
        Output(ids.ADMIN_RESULT, "children"),
        Output(ids.ADMIN_TOKENS + "-box", "children"),
        Output(ids.ADMIN_TOKEN_ID, "options"),
        Input(ids.ADMIN_CREATE, "n_clicks"),
        State(ids.ADMIN_GATEWAY, "value"),
        State(ids.ADMIN_SCOPE, "value"),
        prevent_initial_call=True,
    )
    async def _create(_n, gateway, scope):
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
        Input(ids.ADMIN_ROTATE, "n_clicks"),
        Input(ids.ADMIN_REVOKE, "submit_n_clicks"),
        State(ids.ADMIN_TOKEN_ID, "value"),
        prevent_initial_call=True,
    )
    async def _rotate_or_revoke(_rotate, _revoke, token_id):
        if not principal.is_admin():
            return _note(ADMINS_ONLY), no_update, no_update
        rotating = ctx.triggered_id == ids.ADMIN_ROTATE

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
        Input(ids.ADMIN_USER_ADD, "n_clicks"),
        State(ids.ADMIN_USER_NAME, "value"),
        State(ids.ADMIN_USER_ROLE, "value"),
        State(ids.ADMIN_USER_PASSWORD, "value"),
        prevent_initial_call=True,
    )
    async def _add_user(_n, name, role, password):
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
    async def _remove_user(_n, name):
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
