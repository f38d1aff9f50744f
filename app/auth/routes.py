"""The login page, login and logout: a form, scrypt-checked passwords, signed session cookies."""

from __future__ import annotations

import asyncio
import secrets
import time
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from app.auth import cookies
from app.auth import state as auth_state
from app.auth.gate import session_principal
from app.auth.state import AuthState
from app.storage import sessions, users

router = APIRouter(include_in_schema=False)
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=select_autoescape(["html"]),
)
FORM_LIMIT = 16 * 1024
# Failed logins per client address: after this many in the window, wait (scrypt alone slows
# one guesser, not many parallel ones).
MAX_FAILURES = 5
FAILURE_WINDOW_S = 300.0


def _safe_next(target: str | None) -> str:
    """Only same-site paths: an open redirect would let a link send a user elsewhere."""
    target = target or "/"
    if not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


def _secure(request: Request) -> bool:
    """Secure cookies behind HTTPS (the scheme uvicorn saw, or the public URL's)."""
    public = auth_state.of(request).settings.public_url
    return request.url.scheme == "https" or public.startswith("https://")


def _cookie(
    response: Response, name: str, value: str, max_age: int, secure: bool, readable: bool = False
) -> None:
    """Set one of our cookies: SameSite=Lax, HttpOnly unless the page must read it."""
    response.set_cookie(
        name, value, max_age=max_age, httponly=not readable, samesite="lax", secure=secure
    )


def _page(request: Request, status: int = 200, **values: str) -> HTMLResponse:
    nonce = secrets.token_urlsafe(24)
    context = {"message": "", "kind": "", "username": "", "next": "/", **values, "nonce": nonce}
    response = HTMLResponse(_TEMPLATES.get_template("login.html").render(context), status)
    _cookie(response, cookies.LOGIN_COOKIE, nonce, 3600, _secure(request))
    response.headers["Cache-Control"] = "no-store"
    return response


@router.get("/login")
async def login_page(request: Request, next: str = "/", out: str = "") -> Response:
    """The login form (or straight on when already logged in or when logins are off)."""
    state = auth_state.of(request)
    if not state.auth_enabled:
        return RedirectResponse(_safe_next(next), 303)
    if session_principal(state, request.cookies.get(cookies.SESSION_COOKIE), state.clock()):
        return RedirectResponse(_safe_next(next), 303)
    message = "You are logged out." if out else ""
    return _page(request, message=message, kind="info", next=_safe_next(next))


async def _form(request: Request) -> dict[str, str]:
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > FORM_LIMIT:
            break
    fields = parse_qs(body[:FORM_LIMIT].decode(errors="replace"), keep_blank_values=True)
    return {k: v[0] for k, v in fields.items()}


def _throttled(state: AuthState, client: str) -> float:
    """Seconds this client must wait before trying again (0 if it may try now)."""
    now = time.monotonic()
    failures = [t for t in state.login_failures.get(client, []) if now - t < FAILURE_WINDOW_S]
    state.login_failures[client] = failures
    if len(failures) < MAX_FAILURES:
        return 0.0
    return FAILURE_WINDOW_S - (now - failures[0])


@router.post("/login")
async def login(request: Request) -> Response:
    """Check the password; on success start a session and go where the user was headed."""
    state = auth_state.of(request)
    if not state.auth_enabled:
        return RedirectResponse("/", 303)
    form = await _form(request)
    target = _safe_next(form.get("next"))
    name = form.get("username", "").strip()
    if not cookies.same(form.get("csrf"), request.cookies.get(cookies.LOGIN_COOKIE)):
        return _page(
            request,
            403,
            message="The login form expired or came from another site: try again.",
            username=name,
            next=target,
        )
    client = request.client.host if request.client else "?"
    wait = _throttled(state, client)
    if wait > 0:
        response: Response = _page(
            request,
            429,
            message=f"Too many failed logins: wait {int(wait) + 1} s and try again.",
            username=name,
            next=target,
        )
        response.headers["Retry-After"] = str(int(wait) + 1)
        return response
    password = form.get("password", "")
    # Counted as a failure before the check: parallel guesses must not all slip past the
    # throttle while their hashes are computed. A success forgets them.
    state.login_failures.setdefault(client, []).append(time.monotonic())
    async with state.login_slots:  # each check holds 32 MiB: a flood must not pile them up
        # The cursor is taken in the worker thread: cursors are per thread, never shared.
        user = await asyncio.to_thread(
            lambda: users.authenticate(state.db.cursor(), name, password)
        )
    if user is None:
        return _page(
            request, 401, message="Wrong user name or password.", username=name, next=target
        )
    state.login_failures.pop(client, None)
    now = state.clock()
    ttl = timedelta(hours=state.settings.session_hours)
    sessions.prune(state.db.cursor(), now)  # expired ones go as new ones come
    session_id = sessions.create(state.db.cursor(), user.name, now, ttl)
    response = RedirectResponse(target, 303)
    secure = _secure(request)
    max_age = int(ttl.total_seconds())
    _cookie(
        response,
        cookies.SESSION_COOKIE,
        cookies.sign(state.signing_key, session_id),
        max_age,
        secure,
    )
    # Readable by the page on purpose: Dash's renderer echoes it as X-CSRFToken.
    csrf = cookies.csrf_for(state.signing_key, session_id)
    _cookie(response, cookies.CSRF_COOKIE, csrf, max_age, secure, readable=True)
    response.delete_cookie(cookies.LOGIN_COOKIE, secure=secure, httponly=True, samesite="lax")
    return response


@router.post("/logout")
async def logout(request: Request) -> Response:
    """End the session (it stops working at once) and clear the cookies."""
    state = auth_state.of(request)
    response = RedirectResponse("/login?out=1", 303)
    found = session_principal(state, request.cookies.get(cookies.SESSION_COOKIE), state.clock())
    if found is None:
        # No session came with it (e.g. a cross-site form, whose Lax cookies stay behind):
        # touch nothing, or another site could log a user out.
        return response
    if found is not None:
        who, session_id = found
        form = await _form(request)
        sent = form.get("csrf") or request.headers.get(cookies.CSRF_HEADER)
        if not cookies.same(sent, who.csrf):
            return HTMLResponse(
                "The logout form came without this session's CSRF token: reload and retry.", 403
            )
        sessions.end(state.db.cursor(), session_id)
        state.session_cache.pop(session_id, None)
    secure = _secure(request)
    response.delete_cookie(cookies.SESSION_COOKIE, secure=secure, httponly=True, samesite="lax")
    response.delete_cookie(cookies.CSRF_COOKIE, secure=secure, samesite="lax")
    return response
