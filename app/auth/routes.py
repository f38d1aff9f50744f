"""The login page, login and logout: a form, Argon2id-checked passwords (throttled per account
and per client), signed session cookies."""

from __future__ import annotations

import asyncio
import secrets
from datetime import datetime, timedelta
from pathlib import Path
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from app.auth import cookies
from app.auth import state as auth_state
from app.auth.gate import session_principal
from app.auth.throttle import client_key
from app.storage import sessions, users

router = APIRouter(include_in_schema=False)
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).with_name("templates")),
    autoescape=select_autoescape(["html"]),
)
FORM_LIMIT = 16 * 1024


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


def _start_session(
    state: auth_state.AuthState, name: str, password: str, now: datetime, ttl: timedelta
) -> tuple[users.UserInfo, str] | None:
    """The password check and the new session (one guarded transaction, see sessions.log_in),
    in a worker thread: a write conflict's retry waits without holding the event loop up.
    The cursor is taken here: cursors are per thread, never shared."""
    cur = state.db.cursor()
    started = sessions.log_in(cur, name, password, now, ttl)
    if started is not None:
        sessions.prune(cur, now)  # expired ones go as new ones come
    return started


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
    # The real client: uvicorn rewrites it from X-Forwarded-For only for trusted proxies.
    client = client_key(request.client.host if request.client else None)
    account = users.login_key(name)
    # A browser this user logged in from before: its tries count apart from the account's,
    # so failures sent from elsewhere cannot lock the user out of it.
    device = cookies.device_of(
        state.signing_key, request.cookies.get(cookies.DEVICE_COOKIE), account
    )
    # Reserved before the check: parallel guesses must not all slip past the throttle while
    # their hashes are computed. Unknown names count the same, so a 429 tells nothing.
    attempt = state.throttle.begin(account, client, device)
    if attempt.wait:
        response: Response = _page(
            request, 429, message=attempt.message, username=name, next=target
        )
        response.headers["Retry-After"] = str(state.throttle.retry_after(attempt))
        return response
    password = form.get("password", "")
    now = state.clock()
    ttl = timedelta(hours=state.settings.session_hours)
    started: tuple[users.UserInfo, str] | None = None
    try:
        async with state.login_slots:  # each check holds up to 32 MiB: a flood must wait
            started = await asyncio.to_thread(_start_session, state, name, password, now, ttl)
    finally:  # a try the client gave up on still counts as a failure
        state.throttle.end(attempt, succeeded=started is not None)
    if started is None:
        return _page(
            request, 401, message="Wrong user name or password.", username=name, next=target
        )
    user, session_id = started
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
    # Kept across logouts on purpose: it is what lets this browser in while the account is
    # locked by others' failures (OWASP's device cookies).
    device_value = cookies.device_cookie(
        state.signing_key, user.name, device or secrets.token_urlsafe(16)
    )
    _cookie(response, cookies.DEVICE_COOKIE, device_value, cookies.DEVICE_COOKIE_MAX_AGE, secure)
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
        await asyncio.to_thread(lambda: sessions.end(state.db.cursor(), session_id))
        # After the delete committed: a look-up on the event loop that read the session
        # while it was being deleted has cached it by now, and this drops it; every later
        # one reads the database after the commit.
        state.session_cache.pop(session_id, None)
    secure = _secure(request)
    response.delete_cookie(cookies.SESSION_COOKIE, secure=secure, httponly=True, samesite="lax")
    response.delete_cookie(cookies.CSRF_COOKIE, secure=secure, samesite="lax")
    return response
