"""Login sessions and notes cannot race (issue 26, class 3): 20 threads at once on one user,
one session or one note get clear answers, never a 500; never a live session after a logout,
a user's removal or a password change has answered; every note made is listed once."""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from threading import Event

import httpx
import pytest

from app.services.credentials import Credentials
from app.storage import sessions
from tests.support import http
from tests.support.database import copy_database, open_migrated
from tests.support.races import at_once
from tests.support.server import PASSWORD, LiveServer, serve, server_settings

THREADS = 20
SESSION = "tokenshape_session"
NEW_PASSWORD = "a different horse battery staple"


# -- servers and browsers -------------------------------------------------------------------------


@pytest.fixture
def guarded(tmp_path: Path, secured_template: Path) -> Iterator[LiveServer]:
    """A server of this test's own with logins on (ada: admin, vic: viewer): failed logins
    count against 127.0.0.1 for five minutes, so no test may inherit another's."""
    db = copy_database(secured_template, tmp_path / "s.duckdb")
    yield from serve(server_settings(db, auth="on"), wait=False)


@pytest.fixture(scope="module")
def notes_live(module_live: LiveServer) -> LiveServer:
    """One server for the note races; each test works on notes of its own."""
    return module_live


def _login_form(c: httpx.Client) -> str:
    """Load the login form as a visitor with no session; the form's CSRF nonce."""
    c.cookies.delete(SESSION)
    form = c.get("/login")
    nonce = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert nonce, (form.status_code, form.text[:200])
    return nonce.group(1)


def _post_login(c: httpx.Client, nonce: str, name: str, password: str) -> httpx.Response:
    return c.post(
        "/login", data={"csrf": nonce, "username": name, "password": password, "next": "/"}
    )


def _browsers(live: LiveServer, name: str, n: int = THREADS) -> list[tuple[httpx.Client, str, str]]:
    """n browsers that logged in as `name` once (so each holds a device cookie, and their
    racing tries are throttled apart from one another's), each with a fresh login form
    loaded: (client, the form's nonce, its first session, which stays live)."""
    made = []
    for _ in range(n):
        c = http.client(base_url=live.url, timeout=60)
        answer = _post_login(c, _login_form(c), name, PASSWORD)
        assert answer.status_code == 303, answer.text[:300]
        first = c.cookies[SESSION]
        made.append((c, _login_form(c), first))
    return made


def _works(live: LiveServer, session: str) -> int:
    """The status a read with this session cookie gets (200: the session is live)."""
    with http.client(base_url=live.url, timeout=30, cookies={SESSION: session}) as c:
        return c.get("/api/annotations").status_code


def _sessions_of(live: LiveServer, name: str) -> int:
    return live.scalar("SELECT count(*) FROM sessions WHERE user_name = ?", [name])


def _logged_in(live: LiveServer, name: str) -> tuple[str, str]:
    """(session cookie, its CSRF token) of a fresh login as `name`."""
    with live.login(name) as c:
        return c.cookies[SESSION], c.cookies["_csrf_token"]


# -- logins ---------------------------------------------------------------------------------------


def test_racing_logins_of_one_user_all_answer_and_every_session_handed_out_works(guarded):
    browsers = _browsers(guarded, "vic")
    before = _sessions_of(guarded, "vic")

    def log_in(i: int) -> tuple[int, str | None]:
        c, nonce, _ = browsers[i]
        answer = _post_login(c, nonce, "vic", PASSWORD)
        return answer.status_code, answer.cookies.get(SESSION)

    answers = at_once(THREADS, log_in)
    codes = Counter(code for code, _ in answers)
    assert set(codes) <= {303, 429}, codes  # 429: "too many logins under way", a clear answer
    handed_out = [session for code, session in answers if code == 303]
    assert handed_out and all(handed_out)
    assert len(set(handed_out)) == len(handed_out)  # never one session for two logins
    assert all(_works(guarded, s) == 200 for s in handed_out)
    assert _sessions_of(guarded, "vic") == before + len(handed_out)
    for c, _, _ in browsers:
        c.close()


def _login_race(live: LiveServer, name: str, change: Callable[[], object]):
    """THREADS - 1 browsers log in as `name` while one thread runs `change` (a removal, a
    password change), all released at once. (login answers, the change's answer, every
    session cookie those browsers ever held)."""
    browsers = _browsers(live, name, THREADS - 1)
    held = [first for _, _, first in browsers]
    one_in = Event()

    def act(i: int):
        if i == THREADS - 1:
            # Once a login is through, the others are being checked or are about to be.
            one_in.wait(timeout=30)
            return change()
        c, nonce, _ = browsers[i]
        answer = _post_login(c, nonce, name, PASSWORD)
        if answer.status_code == 303:
            one_in.set()
        return answer.status_code, answer.cookies.get(SESSION)

    answers = at_once(THREADS, act)
    for c, _, _ in browsers:
        c.close()
    logins = answers[:-1]
    held += [session for code, session in logins if code == 303 and session]
    return logins, answers[-1], held


@pytest.mark.parametrize("round_", range(4))
def test_a_user_removed_while_20_logins_race_keeps_no_session(guarded, round_):
    name = f"leaver{round_}"
    admin = guarded.token("admin", gateway="race-admin")
    with guarded.client(admin) as c:
        body = {"name": name, "password": PASSWORD, "role": "viewer"}
        assert c.post("/api/users", json=body).status_code == 201
        logins, removed, held = _login_race(
            guarded, name, lambda: c.delete(f"/api/users/{name}").status_code
        )
        assert removed == 204
        codes = Counter(code for code, _ in logins)
        assert set(codes) <= {303, 401, 429}, codes
        # Once the removal answered, nothing of the user's lives on, however the logins fell.
        assert _sessions_of(guarded, name) == 0
        assert [_works(guarded, s) for s in held] == [401] * len(held)
        # Not even under a new account of the same name: no session outlived the old one.
        assert c.post("/api/users", json=body).status_code == 201
        assert [_works(guarded, s) for s in held] == [401] * len(held)


@pytest.mark.parametrize("round_", range(4))
def test_a_password_changed_while_20_logins_race_keeps_no_session_of_the_old_one(guarded, round_):
    # No HTTP route changes a password (the CLI does, with the server stopped); the running
    # server's own service does it here, as the Admin page would.
    name = f"changer{round_}"
    guarded.user(name, "viewer")
    creds = Credentials(guarded.database, guarded.app.state.runtime.auth)
    logins, changed, held = _login_race(
        guarded, name, lambda: creds.set_password(name, NEW_PASSWORD)
    )
    assert changed is True
    codes = Counter(code for code, _ in logins)
    assert set(codes) <= {303, 401, 429}, codes
    # Every login with the old password, before or after the change, is over now.
    assert _sessions_of(guarded, name) == 0
    assert [_works(guarded, s) for s in held] == [401] * len(held)
    with guarded.login(name, NEW_PASSWORD) as fresh:  # the new password works
        assert fresh.get("/api/annotations").status_code == 200


def _reads_racing(live: LiveServer, held: list[str], change: Callable[[], object]):
    """One thread runs `change` while the others read with the sessions in `held`, before,
    during and after it: (the change's answer, statuses of reads sent after it answered)."""
    clients = [http.client(base_url=live.url, timeout=30, cookies={SESSION: s}) for s in held]
    done = Event()
    after: list[int] = []
    lock = threading.Lock()

    def act(i: int):
        if i == len(clients):
            answer = change()
            done.set()
            return answer
        late = 0
        while late < 5:
            sent_after = done.is_set()
            status = clients[i].get("/api/annotations").status_code
            assert status in (200, 401), status
            if sent_after:
                late += 1
                with lock:
                    after.append(status)
        return None

    answers = at_once(len(clients) + 1, act)
    for c in clients:
        c.close()
    return answers[-1], after


def _sessions(live: LiveServer, name: str, n: int) -> list[str]:
    """The cookies of n fresh sessions of `name`, each logged in through the form."""
    made = []
    for _ in range(n):
        with live.login(name) as c:
            made.append(c.cookies[SESSION])
    return made


@pytest.mark.parametrize("round_", range(8))
@pytest.mark.parametrize("change", ["remove", "password"])
def test_once_a_removal_or_password_change_answered_no_session_of_the_user_works(
    guarded, change, round_
):
    name = f"busy-{change}"
    guarded.user(name, "viewer")
    held = _sessions(guarded, name, THREADS - 1)
    creds = Credentials(guarded.database, guarded.app.state.runtime.auth)
    with guarded.client(guarded.token("admin", gateway="race-admin")) as admin:
        act = {
            "remove": lambda: admin.delete(f"/api/users/{name}").status_code == 204,
            "password": lambda: creds.set_password(name, NEW_PASSWORD),
        }[change]
        answer, after = _reads_racing(guarded, held, act)
    assert answer is True
    # A look-up under way as the change committed must not leave the session cached.
    assert after and set(after) == {401}, Counter(after)


# -- logouts --------------------------------------------------------------------------------------


def _session_client(live: LiveServer, session: str, csrf: str) -> httpx.Client:
    return http.client(
        base_url=live.url,
        timeout=30,
        cookies={SESSION: session, "_csrf_token": csrf},
        headers={"X-CSRFToken": csrf},
    )


def test_racing_logouts_of_one_session_all_answer_and_leave_it_dead(guarded):
    session, csrf = _logged_in(guarded, "vic")
    clients = [_session_client(guarded, session, csrf) for _ in range(THREADS)]
    for c in clients:  # every racer starts from a live session (and warms its cache)
        assert c.get("/api/annotations").status_code == 200
    answers = at_once(THREADS, lambda i: clients[i].post("/logout"))
    codes = Counter(r.status_code for r in answers)
    assert codes == {303: THREADS}, [r.text[:200] for r in answers if r.status_code != 303]
    assert all(r.headers["location"] == "/login?out=1" for r in answers)
    assert _works(guarded, session) == 401
    assert guarded.scalar("SELECT count(*) FROM sessions WHERE user_name = 'vic'") == 0
    for c in clients:
        c.close()


@pytest.mark.parametrize("round_", range(3))
def test_once_a_logout_answered_its_session_never_authenticates(guarded, round_):
    session, csrf = _logged_in(guarded, "vic")
    clients = [_session_client(guarded, session, csrf) for _ in range(THREADS)]
    logged_out = Event()
    after: list[int] = []  # statuses of reads sent after the logout answered
    lock = threading.Lock()

    def act(i: int) -> list[int]:
        if i == 0:
            answer = clients[0].post("/logout")
            logged_out.set()
            return [answer.status_code]
        seen = []
        late = 0
        while late < 5:  # reads before, during and after the logout
            sent_after = logged_out.is_set()
            status = clients[i].get("/api/annotations").status_code
            seen.append(status)
            if sent_after:
                late += 1
                with lock:
                    after.append(status)
        return seen

    answers = at_once(THREADS, act)
    assert answers[0] == [303]
    assert all(s in (200, 401) for seen in answers[1:] for s in seen), answers
    assert after and set(after) == {401}, Counter(after)
    assert _works(guarded, session) == 401


# -- notes ----------------------------------------------------------------------------------------


def _notes(c: httpx.Client) -> list[dict]:
    listed = c.get("/api/annotations", params={"start": "2000-01-01T00:00:00Z", "limit": 1000})
    assert listed.status_code == 200, listed.text
    return listed.json()


def test_racing_note_creations_all_succeed_and_are_all_listed(notes_live):
    admin = notes_live.token("admin", gateway="race-notes")
    with notes_live.client(admin) as c:
        answers = at_once(
            THREADS,
            lambda i: c.post("/api/annotations", json={"text": f"racing note {i}"}),
        )
        assert [r.status_code for r in answers] == [201] * THREADS, [r.text for r in answers]
        made = [r.json() for r in answers]
        assert len({n["id"] for n in made}) == THREADS
        listed = {n["id"]: n["text"] for n in _notes(c)}
    assert all(listed.get(n["id"]) == n["text"] for n in made)


def test_racing_deletes_of_one_note_delete_it_once_and_answer_404_to_the_rest(notes_live):
    admin = notes_live.token("admin", gateway="race-notes")
    with notes_live.client(admin) as c:
        note = c.post("/api/annotations", json={"text": "to be deleted"}).json()
        answers = at_once(THREADS, lambda _: c.delete(f"/api/annotations/{note['id']}"))
        codes = Counter(r.status_code for r in answers)
        assert codes == {204: 1, 404: THREADS - 1}, [r.text for r in answers]
        assert all("no note has id" in r.json()["detail"] for r in answers if r.status_code == 404)
        assert note["id"] not in {n["id"] for n in _notes(c)}


def test_deletes_of_many_notes_racing_new_ones_all_succeed(notes_live):
    admin = notes_live.token("admin", gateway="race-notes")
    with notes_live.client(admin) as c:
        old = [
            c.post("/api/annotations", json={"text": f"old note {i}"}).json()["id"]
            for i in range(THREADS // 2)
        ]

        def act(i: int) -> httpx.Response:
            if i % 2:
                return c.delete(f"/api/annotations/{old[i // 2]}")
            return c.post("/api/annotations", json={"text": f"new note {i}"})

        answers = at_once(THREADS, act)
        assert [r.status_code for r in answers] == [201, 204] * (THREADS // 2), [
            r.text for r in answers
        ]
        listed = {n["id"] for n in _notes(c)}
    assert listed.isdisjoint(old)
    assert {r.json()["id"] for r in answers[::2]} <= listed


# -- the signing key ------------------------------------------------------------------------------


def test_the_signing_key_is_made_once_under_20_concurrent_first_starts(db_path: Path):
    # One server process holds the database file, so concurrent first starts meet only
    # inside one process: 20 threads, each with its cursor, ask for the key at once.
    with open_migrated(db_path) as db:
        assert db.cursor().execute("SELECT count(*) FROM server_keys").fetchone() == (0,)
        keys = at_once(THREADS, lambda _: sessions.signing_key(db.cursor()))
        assert len(set(keys)) == 1 and keys[0]
        stored = db.cursor().execute("SELECT value FROM server_keys").fetchall()
        assert stored == [(keys[0],)]
