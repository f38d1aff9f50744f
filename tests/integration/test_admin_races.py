"""Admin writes cannot race (issue 26, class 3): 20 threads at once on one token or one user
get one winner and clear answers for the rest, never a 500 and never two live credentials
where one is promised, never a live token after a revoke has answered."""

from __future__ import annotations

from collections import Counter

import pytest

from tests.support.races import at_once
from tests.support.server import LiveServer

THREADS = 20


@pytest.fixture(scope="module")
def live(module_live: LiveServer) -> LiveServer:
    """One server; each test works on tokens and users of its own."""
    return module_live


def _live_tokens(live: LiveServer, gateway: str) -> int:
    return live.scalar(
        "SELECT count(*) FROM tokens WHERE gateway = ? AND revoked_at IS NULL", [gateway]
    )


def test_racing_rotations_of_one_token_leave_exactly_one_live_token(live):
    admin = live.token("admin", gateway="race-admin")
    with live.client(admin) as c:
        made = c.post("/api/tokens", json={"gateway": "race-rotate", "scope": "ingest"}).json()
        token_id = made["info"]["id"]
        answers = at_once(THREADS, lambda _: c.post(f"/api/tokens/{token_id}/rotate"))
    codes = Counter(r.status_code for r in answers)
    assert codes == {200: 1, 404: THREADS - 1}, codes
    assert all("no live token" in r.json()["detail"] for r in answers if r.status_code == 404)
    assert _live_tokens(live, "race-rotate") == 1
    winner = next(r.json()["token"] for r in answers if r.status_code == 200)
    with live.client(winner) as ingest:  # the one live token is the one handed out
        assert ingest.post("/v1/requests", json=[]).status_code != 401


@pytest.mark.parametrize("round_", range(6))
def test_a_revoke_racing_a_rotation_never_leaves_a_live_token_once_it_answered(live, round_):
    gateway = f"race-revoke-{round_}"
    admin = live.token("admin", gateway="race-admin")
    with live.client(admin) as c:
        token_id = c.post("/api/tokens", json={"gateway": gateway, "scope": "read"}).json()["info"][
            "id"
        ]

        def act(i: int):
            if i % 2:
                return c.delete(f"/api/tokens/{token_id}")
            return c.post(f"/api/tokens/{token_id}/rotate")

        answers = at_once(THREADS, act)
    assert all(r.status_code in (200, 204, 404) for r in answers), [r.text for r in answers]
    won = [r for r in answers if r.status_code in (200, 204)]
    assert len(won) == 1  # the old token is live for one action only
    live_left = _live_tokens(live, gateway)
    if won[0].status_code == 204:  # the revoke won: nothing of this token's lives on
        assert live_left == 0
    else:  # the rotation won: its new token is the only live one; every revoke said 404
        assert live_left == 1


def test_racing_creations_of_one_user_make_one_and_answer_409_to_the_rest(live):
    admin = live.token("admin", gateway="race-admin")
    body = {"name": "racer", "password": "correct horse battery staple", "role": "viewer"}
    with live.client(admin) as c:
        answers = at_once(10, lambda _: c.post("/api/users", json=body))
    codes = Counter(r.status_code for r in answers)
    assert codes == {201: 1, 409: 9}, [r.text for r in answers]
    assert all("already exists" in r.json()["detail"] for r in answers if r.status_code == 409)
    assert live.scalar("SELECT count(*) FROM users WHERE name = 'racer'") == 1


def test_racing_removals_of_one_user_remove_it_once_and_answer_404_to_the_rest(live):
    admin = live.token("admin", gateway="race-admin")
    body = {"name": "mover", "password": "correct horse battery staple", "role": "viewer"}
    with live.client(admin) as c:
        assert c.post("/api/users", json=body).status_code == 201
        answers = at_once(THREADS, lambda _: c.delete("/api/users/mover"))
    codes = Counter(r.status_code for r in answers)
    assert codes == {204: 1, 404: THREADS - 1}, codes


def test_racing_puts_of_one_engine_profile_all_succeed_and_one_of_them_is_stored(live):
    from app.services.demo import DEMO_PROFILES

    admin = live.token("admin", gateway="race-admin")
    bodies = [DEMO_PROFILES["chat-8b"] | {"replicas": 1 + i} for i in range(THREADS)]
    with live.client(admin) as c:
        answers = at_once(THREADS, lambda i: c.put("/api/engines/race-8b", json=bodies[i]))
        assert all(r.status_code in (200, 201) for r in answers), [
            (r.status_code, r.text[:120]) for r in answers if r.status_code >= 300
        ]
        stored = c.get("/api/engines/race-8b").json()["profile"]
        history = c.get("/api/engines/race-8b/history").json()
    assert stored["replicas"] in {b["replicas"] for b in bodies}
    # Every change that answered is in the history, in one order, none twice.
    seqs = [v["seq"] for v in (history if isinstance(history, list) else history["versions"])]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))
