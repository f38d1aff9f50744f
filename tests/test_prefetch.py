"""A page's layout starts with the browser's HTML request and is taken by Dash's layout
request for the same URL and caller: same content, used once, never across callers."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

from app import demo
from app.dashboard import prefetched
from app.storage.database import Database

PAGES_PAYLOAD = {
    "output": ".._pages_content.children..._pages_store.data..",
    "outputs": [
        {"id": "_pages_content", "property": "children"},
        {"id": "_pages_store", "property": "data"},
    ],
    "changedPropIds": ["_pages_location.pathname"],
    "state": [],
}


def _layout(client, path: str, search: str) -> dict:
    payload = {
        **PAGES_PAYLOAD,
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": path},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
    }
    answer = client.post("/_dash-update-component", json=payload)
    assert answer.status_code == 200, answer.text
    return answer.json()["response"]["_pages_content"]["children"]


def _same(a: dict, b: dict) -> bool:
    def strip(layout: dict) -> str:
        return re.sub(r'"now": ?"[^"]+"', '"now"', json.dumps(layout, sort_keys=True))

    return strip(a) == strip(b)


def test_the_html_request_starts_the_layout_that_dash_then_takes(settings, monkeypatch):
    from tests.conftest import serve

    with Database(settings.db).open() as db:
        demo.seed(db, requests=2000, days=7, end=datetime(2026, 11, 23, tzinfo=UTC))
    taken: list[bool] = []
    real_take = prefetched.take

    def spy(path, query):
        found = real_take(path, query)
        taken.append(found is not None)
        return found

    monkeypatch.setattr(prefetched, "take", spy)
    for live in serve(settings):
        with live.client() as c:
            fresh = _layout(c, "/shapes", "?window=all")  # nothing started: built now
            assert taken == [False]
            c.get("/shapes?window=all", headers={"Accept": "text/html"})
            assert len(prefetched._pending) == 1
            # The same page, but for its `now` stamp (taken when each build ran).
            assert _same(_layout(c, "/shapes", "?window=all"), fresh)
            assert taken == [False, True] and not prefetched._pending
            # Another URL does not take it; an API client's GET starts nothing.
            c.get("/shapes?window=7d", headers={"Accept": "text/html"})
            _layout(c, "/shapes", "?window=all")
            assert taken[-1] is False and len(prefetched._pending) == 1
            c.get("/shapes?window=30d", headers={"Accept": "application/json"})
            assert len(prefetched._pending) == 1


def test_a_prefetched_layout_is_never_served_to_another_caller(secured):
    secured.user("ana", "admin", "another long secret")
    with secured.login("vic") as viewer, secured.login("ana", "another long secret") as admin:
        viewer.get("/rightsizing", headers={"Accept": "text/html"})
        assert len(prefetched._pending) == 1
        _layout(admin, "/rightsizing", "")
        assert len(prefetched._pending) == 1  # the admin's request built its own
        _layout(viewer, "/rightsizing", "")
        assert not prefetched._pending
