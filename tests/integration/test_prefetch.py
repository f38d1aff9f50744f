"""A page's layout starts with the browser's HTML request and is taken by Dash's layout
request for the same URL and caller: same content, used once, never across callers."""

from __future__ import annotations

import json
import re
import threading

from app.dashboard.speedups import prefetched
from tests.support.database import copy_database
from tests.support.server import serve

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


def test_the_html_request_starts_the_layout_that_dash_then_takes(
    settings, demo_template, monkeypatch
):
    copy_database(demo_template(requests=5000, days=14), settings.db)
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


def _first_layout(client, referer: str | None) -> dict:
    """Dash's `_dash-layout` answer as the browser asks for it (its Referer is the page)."""
    headers = {"Referer": client.base_url.join(referer).__str__()} if referer else {}
    answer = client.get("/_dash-layout", headers=headers)
    assert answer.status_code == 200, answer.text
    return answer.json()


def _find(node, component_id: str) -> dict | None:
    """The component with this id anywhere in a serialised Dash layout."""
    if isinstance(node, list):
        return next((f for n in node if (f := _find(n, component_id)) is not None), None)
    if not isinstance(node, dict) or "props" not in node:
        return None
    if node["props"].get("id") == component_id:
        return node
    return _find(list(node["props"].values()), component_id)


def test_the_first_layout_already_holds_the_page_its_referer_names(settings, demo_template):
    copy_database(demo_template(requests=5000, days=14), settings.db)
    for live in serve(settings):
        total = live.scalar("SELECT count(*) FROM requests")
        with live.client() as c:
            c.get("/shapes?window=all&bins=log2", headers={"Accept": "text/html"})
            layout = _first_layout(c, "/shapes?window=all&bins=log2")
            assert not prefetched._pending  # the HTML request's build was taken, not redone
            # The location matches the browser's own, so Dash's routing callback stays quiet.
            location = _find(layout, "_pages_location")["props"]
            assert (location["pathname"], location["search"]) == (
                "/shapes",
                "?window=all&bins=log2",
            )
            assert _find(layout, "shapes-heatmap") is not None
            assert _find(layout, "shapes-total")["props"]["children"] == f"{total:,}"
            assert _find(layout, "_pages_store")["props"]["data"] == {
                "title": "tokenshape · Shapes"
            }
            # A Referer cut to the origin ("/", the Overview) while the browser is on another
            # page: no build of that URL was started by an HTML request, so no page rides in.
            c.get("/latency?window=all", headers={"Accept": "text/html"})
            cut = _first_layout(c, "/")
            assert not _find(cut, "_pages_content")["props"].get("children")
            assert "pathname" not in _find(cut, "_pages_location")["props"]
            # No Referer (or not a page): Dash's empty container, filled by its callback.
            for referer in (None, "/api/health", "/nowhere"):
                content = _find(_first_layout(c, referer), "_pages_content")["props"]
                assert not content.get("children")
                assert (
                    "pathname" not in _find(_first_layout(c, referer), "_pages_location")["props"]
                )


def test_the_first_layout_never_holds_the_admin_page_for_a_viewer(secured):
    with secured.login("vic") as viewer:
        assert viewer.get("/admin", headers={"Accept": "text/html"}).status_code == 403
        layout = _first_layout(viewer, "/admin")
        assert not _find(layout, "_pages_content")["props"].get("children")
        assert "admin-form" not in json.dumps(layout)
    with secured.login("ada") as admin:
        admin.get("/admin", headers={"Accept": "text/html"})
        assert "admin-form" in json.dumps(_first_layout(admin, "/admin"))


def test_a_slow_page_comes_by_the_callback_and_still_uses_its_started_build(
    settings, demo_template, monkeypatch
):
    """The first layout waits only PAGE_WAIT_S for its page (the bar and a loading state show
    meanwhile); the routing callback then takes the build the HTML request started.

    The build is held back until the first layout has been answered, so "did not wait for
    the whole build" is a fact about order, not a race against a wall clock."""
    copy_database(demo_template(requests=5000, days=14), settings.db)
    builds: list[dict] = []
    release, finished = threading.Event(), threading.Event()
    for live in serve(settings):
        build = prefetched.pages["/shapes"]

        def slow(build=build, **query):
            builds.append(query)
            release.wait(60)  # held back until the test lets it go on
            try:
                return build(**query)
            finally:
                finished.set()

        monkeypatch.setitem(prefetched.pages, "/shapes", slow)
        try:
            with live.client() as c:
                c.get("/shapes?window=all", headers={"Accept": "text/html"})
                layout = _first_layout(c, "/shapes?window=all")
                assert not finished.is_set()  # answered while the build is still held back
                assert not _find(layout, "_pages_content")["props"].get("children")
                assert _find(layout, "shapes-heatmap") is None
                release.set()
                page = _layout(c, "/shapes", "?window=all")
                assert _find(page, "shapes-heatmap") is not None
                assert len(builds) == 1  # the callback took the started build, not a second one
        finally:
            release.set()  # never leave a worker thread waiting


def test_a_burst_of_html_requests_from_one_client_starts_at_most_a_few_builds(
    settings, demo_template
):
    """60 GETs of / that no layout request follows (issue 26, class 4): PER_CALLER builds
    start, the rest are never started, and what is not taken is cancelled as it goes stale."""
    copy_database(demo_template(requests=2000, days=7), settings.db)
    for live in serve(settings):
        with live.client() as c:
            html = {"Accept": "text/html"}
            for i in range(60):
                r = c.get("/", params={"window": "7d", "n": str(i)}, headers=html)
                assert r.status_code == 200
            pending = list(prefetched._pending.values())
            assert len(pending) <= prefetched.PER_CALLER
            started = [f for _, f, _ in pending if f.running() or f.done()]
            assert len(started) <= prefetched.WORKERS
