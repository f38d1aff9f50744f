"""Without logins, the dashboard may change engine profiles only on a loopback bind."""

from __future__ import annotations

from datetime import UTC, datetime

from app import demo
from app.config import Settings
from app.dashboard.pages.rightsizing import NUMBER_FIELDS, READ_ONLY, SELECT_FIELDS
from app.storage.database import Database
from tests.conftest import free_port, serve


def _save_payload(engine: str) -> dict:
    states = [{"id": "rightsizing-engine", "property": "data", "value": engine}]
    names = [n for n, _, _ in SELECT_FIELDS] + [n for n, _ in NUMBER_FIELDS] + ["startup_log"]
    values = {"model": "llama-3.1-8b", "gpu": "H100", "max_input_len": 1024, "max_seq_len": 2048}
    states += [
        {"id": {"name": n, "type": "rs-field"}, "property": "value", "value": values.get(n)}
        for n in names
    ]
    states.append({"id": "rightsizing-reload", "property": "href", "value": None})
    return {
        "output": "..rightsizing-saved.children...rightsizing-reload.href..",
        "outputs": [
            {"id": "rightsizing-saved", "property": "children"},
            {"id": "rightsizing-reload", "property": "href"},
        ],
        "inputs": [{"id": "rightsizing-save", "property": "n_clicks", "value": 1}],
        "changedPropIds": ["rightsizing-save.n_clicks"],
        "state": states,
    }


def test_a_shared_bind_makes_the_profile_editor_read_only(tmp_path):
    settings = Settings(db=tmp_path / "r.duckdb", host="0.0.0.0", port=free_port(), _env_file=None)
    with Database(settings.db).open() as db:
        demo.seed(db, requests=2000, days=14, end=datetime(2026, 11, 23, tzinfo=UTC))
    gen = serve(settings)  # the test server listens on loopback; the app believes 0.0.0.0
    live = next(gen)
    try:
        before = live.scalar("SELECT profile FROM engines WHERE name = 'chat-8b'")
        with live.client() as c:
            page = c.post("/_dash-update-component", json=_save_payload("chat-8b"))
            assert page.status_code == 200, page.text
            answer = page.json()["response"]["rightsizing-saved"]["children"]
            assert answer == READ_ONLY  # the callback refuses on the server, not just the UI
        assert live.scalar("SELECT profile FROM engines WHERE name = 'chat-8b'") == before
    finally:
        gen.close()


def test_a_loopback_bind_saves_through_the_same_callback(live):
    with live.client() as c:
        c.get("/rightsizing")  # Dash registers page callbacks on the first request
        answer = c.post("/_dash-update-component", json=_save_payload("new-engine"))
        assert answer.status_code == 200, answer.text
        assert answer.json()["response"]["rightsizing-saved"]["children"] == "saved"
    stored = live.scalar("SELECT profile FROM engines WHERE name = 'new-engine'")
    assert '"max_seq_len": 2048' in stored
