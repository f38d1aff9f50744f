"""The Dash app mounted on the FastAPI server, with the page shell around every page."""

from __future__ import annotations

from typing import Any

import dash
import httpx
from dash import Dash, dcc, html
from dash.backends._fastapi import reset_current_request, set_current_request
from fastapi import FastAPI, Request, Response

from app.auth import principal
from app.auth.gate import WARM_UP_HEADER
from app.auth.principal import Principal
from app.dashboard import edge, ids
from app.dashboard.pages import (
    admin,
    compare,
    latency,
    notes,
    overview,
    ready_page,
    reports,
    rightsizing,
    seasonal,
    shapes,
    traffic,
)
from app.dashboard.speedups import plotlyjs, polyfill, prefetched
from app.server.runtime import Runtime
from app.services.credentials import Credentials
from app.sizing.slo import Fleet

# What only admins may load or change: the gate refuses others with a 403 (the pages and
# callbacks check again themselves).
ADMIN_PAGES = frozenset({"/admin"})
ADMIN_OUTPUTS = frozenset(
    {
        ids.RIGHTSIZING_SAVED,
        ids.ADMIN_RESULT,
        ids.ADMIN_TOKENS + "-box",
        ids.ADMIN_USERS + "-box",
        ids.REPORTS_TEST_RESULT,
        ids.REPORTS_RESEND_RESULT,
        ids.NOTES_RESULT,
        ids.RIGHTSIZING_UNDO_RESULT,
    }
)


# How long the first layout waits for its page: a page ready by then rides in it; a slower
# one comes by Dash's callback, so the bar and a loading state show meanwhile.
PAGE_WAIT_S = 0.3
# The ids of Dash's page container (dash.page_container), which its routing callback uses.
PAGES_LOCATION, PAGES_CONTENT = "_pages_location", "_pages_content"
PAGES_STORE, PAGES_DUMMY = "_pages_store", "_pages_dummy"
# Dash Pages shows the page registered under this module name for a path no page has.
NOT_FOUND_MODULE = "not_found_404"
# Its own path (Dash Pages needs one); answered 404 like every path without a page.
NOT_FOUND_PATH = "/_not-found"
# The skip link's target: the page's main region.
MAIN_ID = "content"


class _Dash(Dash):
    """Dash that leaves plotly.js to the partial bundle when it is usable (see plotlyjs), and
    its Babel polyfill to regenerator-runtime (see polyfill)."""

    # Set once at mount, next to Dash collecting its assets: the page must never drop the
    # polyfill for a runtime that is not served (say, one built while the server runs).
    runtime_served = False

    def _initialize_context(self, body: Any) -> Any:
        """Dash's callback context, for a request whose shape is a callback's (app/dashboard/edge;
        anything else is a 400 or 404 naming what was wrong, never a 500)."""
        edge.check_envelope(body, self.callback_map)
        return super()._initialize_context(body)

    def _execute_callback(self, func: Any, args: Any, outputs_list: Any, g: Any) -> Any:
        """Dash's call of the callback, once every input and state has the type the callback
        declares (else a 422 naming the component and property)."""
        edge.check_args(func, g.inputs_list + g.states_list, args)
        return super()._execute_callback(func, args, outputs_list, g)

    def init_app(self, app: object = None, **kwargs: object) -> None:
        """Dash's setup without its websocket transport: no callback here uses it, yet on
        FastAPI the browser opens one on every page load (and the auth gate refuses it)."""
        self.backend.websocket_capability = False
        super().init_app(app, **kwargs)

    def _setup_plotlyjs(self) -> None:
        if not plotlyjs.partial_plotly_usable():
            super()._setup_plotlyjs()

    def interpolate_index(self, **kwargs: str) -> str:  # type: ignore[override]  # Dash passes keywords only
        """Dash's page, without the Babel polyfill when its runtime is served instead, and
        with dcc.Graph's lazily loaded chunk fetched up front (see polyfill.preload_graph)."""
        if self.runtime_served:
            kwargs["scripts"] = polyfill.drop_polyfill(kwargs.get("scripts", ""))
        prefix = self.config.requests_pathname_prefix
        kwargs["css"] = kwargs.get("css", "") + polyfill.preload_graph(prefix)
        # Screen readers pick the voice from the document's language; Dash's page names none.
        return super().interpolate_index(**kwargs).replace("<html>", '<html lang="en">', 1)


def mount(server: FastAPI, runtime: Runtime) -> Dash:
    """Create the Dash app on `server` (Dash's FastAPI backend) and register the pages."""
    db, clock, settings = runtime.db, runtime.clock, runtime.settings
    tz = settings.tz
    prefetched.reset()
    partial = plotlyjs.partial_plotly_usable()
    app = _Dash(
        __name__,
        server=server,  # type: ignore[arg-type]  # Dash hint omits server instances
        use_pages=True,
        pages_folder="",
        assets_folder=str(plotlyjs.STATIC),
        assets_ignore=plotlyjs.OLD_BUNDLE if partial else plotlyjs.STALE_BUNDLE,
        title="tokenshape",
        update_title=None,  # type: ignore[arg-type]  # Dash documents None; hint: str
        suppress_callback_exceptions=True,
        use_async=True,  # layouts and callbacks are coroutines that query in a worker thread
    )
    app.runtime_served = polyfill.runtime_served()
    overview.register(app, db, clock, tz, Fleet.of(settings))
    shapes.register(app, db, clock, Fleet.of(settings))
    latency.register(app, db, clock, tz, Fleet.of(settings))
    traffic.register(db, clock, tz)
    rightsizing.register(app, db, clock, tz, Fleet.of(settings))
    seasonal.register(db, clock, tz, settings.seasonal_threshold, Fleet.of(settings))
    reports.register(db, clock, settings)
    compare.register(db, clock, Fleet.of(settings))
    notes.register(app, db, clock, tz)  # /notes: order 8, between Compare and Admin
    admin.register(app, Credentials(db, runtime.auth))
    dash.register_page(
        NOT_FOUND_MODULE,
        path=NOT_FOUND_PATH,
        name="Page not found",
        title="tokenshape · Page not found",
        layout=_not_found,
    )
    _serve_pages(server, app)
    logo = app.get_asset_url("logo.svg")
    # A function: Dash calls it for every page load, so the bar shows who is looking.
    app.layout = lambda: _shell(logo)
    return app


def page_paths() -> frozenset[str]:
    """The paths that have a page (the not-found page's own path is not one)."""
    return frozenset(
        p["path"] for module, p in dash.page_registry.items() if module != NOT_FOUND_MODULE
    )


def _serve_pages(server: FastAPI, app: Dash) -> None:
    """Answer every GET no other route takes with Dash's page: 200 for a page's path, 404 for
    any other, so a mistyped address is not a page found.

    Dash's own catch-all, added when the server starts, would answer 200 for every path; this
    route is added first, so it wins. Dash's other routes (/_dash-*, /assets, /_favicon.ico)
    and the API's are matched before either."""

    async def page_or_not_found(request: Request) -> Response:
        # Dash's page reads the request (its meta tags) through Dash's own request context.
        token = set_current_request(request)
        try:
            body = app.index()
        finally:
            reset_current_request(token)
        path = request.url.path.rstrip("/") or "/"
        status = 200 if path in page_paths() else 404
        if path in ADMIN_PAGES and not principal.is_admin():
            status = 403  # the page itself says why and whom to ask (app/dashboard/pages/admin)
        return Response(content=body, media_type="text/html", status_code=status)

    server.add_api_route(
        "/{path:path}", page_or_not_found, methods=["GET"], include_in_schema=False
    )


def _not_found(**_query: object) -> html.Div:
    """The page for a path no page has: what was asked for and the way home."""
    try:  # Dash's routing callback builds it; its input is the path asked for
        path = dash.ctx.inputs.get(f"{PAGES_LOCATION}.pathname")
    except Exception:  # built outside a callback: say less rather than fail
        path = None
    asked: list = [html.Code(path), " "] if isinstance(path, str) else ["this address "]
    return html.Div(
        [
            html.H1("Page not found"),
            html.P(
                [
                    "There is no page at ",
                    *asked,
                    "in tokenshape. Check the address, or pick a page from the bar above.",
                ],
                id="not-found-message",
            ),
            html.P(html.A("Go to the Overview", href="/", id="not-found-home")),
        ],
        className="empty not-found",
    )


def _who(who: Principal | None) -> list:
    """The open-mode banner, or the user's name with a logout button."""
    if who is None or who.via == "open":
        return [
            html.Div(
                "Open mode: no login is required, so anyone who can reach this address can see "
                "this traffic"
                + (" and change engine profiles." if who and who.is_admin else ".")
                + " Set TOKENSHAPE_AUTH=on and add users with `tokenshape user add`.",
                className="open-banner",
                id=ids.OPEN_BANNER,
            )
        ]
    return [
        html.Div(
            [
                html.Span(f"{who.name} · {who.role}", id=ids.WHO),
                html.Form(
                    [
                        dcc.Input(type="hidden", name="csrf", value=who.csrf),
                        html.Button("Log out", type="submit", id=ids.LOGOUT),
                    ],
                    action="/logout",
                    method="POST",
                    className="logout",
                ),
            ],
            className="who",
        )
    ]


def _shell(logo: str) -> html.Div:
    """The bar, the banner and the page container around every page."""
    who = principal.current()
    signed_in = _who(who)
    banner = signed_in if who is None or who.via == "open" else []
    user_box = [] if banner else signed_in
    pages = [
        p
        for module, p in dash.page_registry.items()
        if module != NOT_FOUND_MODULE
        and (p["path"] != "/admin" or (who is not None and who.is_admin))
    ]
    here = prefetched.page_url()
    current = here[0] if here else None
    return html.Div(
        [
            # First in the page, so the first Tab reaches it: past the bar to the page itself.
            html.A("Skip to content", href=f"#{MAIN_ID}", className="skip-link"),
            html.Header(
                [
                    html.Img(src=logo, className="logo", alt=""),
                    html.Span("tokenshape", className="brand"),
                    html.Nav(
                        [_nav_link(p, p["path"] == current) for p in pages],
                        **_aria(label="Pages"),
                    ),
                    *user_box,
                ],
                className="topbar",
            ),
            *banner,
            # While a page's layout is computed the old content stays, dimmed, so nothing jumps.
            html.Main(
                dcc.Loading(
                    _page_container(who),
                    target_components={PAGES_CONTENT: "children"},  # type: ignore[arg-type]  # Dash stub: empty TypedDict
                    delay_show=300,
                    overlay_style={"visibility": "visible", "opacity": 0.55},
                    type="dot",
                    color="#6c7a96",
                ),
                className="page",
                id=MAIN_ID,
                tabIndex=-1,  # the skip link moves focus here, not only the scroll
            ),
        ]
    )


def _nav_link(page: dict, current: bool) -> html.A:
    """A page's link in the bar; the current page's says so (static/nav.js keeps it so as
    the address changes without a new layout)."""
    if not current:
        return html.A(page["name"], href=page["relative_path"])
    return html.A(
        page["name"], href=page["relative_path"], className="current", **_aria(current="page")
    )


def _aria(**attributes: str) -> dict[str, Any]:
    """aria-* props (Dash takes them as keywords its stubs do not name)."""
    return {f"aria-{name}": value for name, value in attributes.items()}


def _page_container(who: Principal | None) -> html.Div:
    """Dash's page container, with the page already in it when the layout request's Referer
    says which page it is for and its build is ready within PAGE_WAIT_S: the browser then
    skips Dash's routing round trip (the location below matches its own, so the routing
    callback does not fire). Otherwise Dash's own empty container, which that callback fills
    while the bar and a loading state show."""
    page = prefetched.page_url()
    if page is None or (page[0] in ADMIN_PAGES and not (who and who.is_admin)):
        return dash.page_container
    path, search = page
    entry = next((p for p in dash.page_registry.values() if p["path"] == path), None)
    content = ready_page(path, search, PAGE_WAIT_S) if entry is not None else None
    if content is None:
        return dash.page_container
    assert entry is not None  # no entry, no content
    return html.Div(
        [
            dcc.Location(id=PAGES_LOCATION, refresh="callback-nav", pathname=path, search=search),
            html.Div(content, id=PAGES_CONTENT, disable_n_clicks=True),
            dcc.Store(id=PAGES_STORE, data={"title": entry["title"]}),
            html.Div(id=PAGES_DUMMY, disable_n_clicks=True),
        ]
    )


async def warm_up(app: FastAPI, key: str) -> None:
    """Let Dash finish its first-request setup before a browser comes.

    Dash Pages registers its title callback on the first request; the page served by that very
    request lacks the callback's script and the browser logs an error. One internal request
    here makes every real page load complete. It carries a per-process key the auth gate
    admits, since there is no user yet."""
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(
        transport=transport, base_url="http://tokenshape", headers={WARM_UP_HEADER: key}
    ) as client:
        await client.get("/_dash-layout")
