"""Dash requests as the browser sends them: callback payloads for the rightsizing and admin
pages, and the pages and API routes an access check walks."""

from __future__ import annotations

import json

import httpx

from app.dashboard.pages.rightsizing import NUMBER_FIELDS, SELECT_FIELDS

PAGES = ("/", "/shapes", "/latency", "/traffic", "/rightsizing", "/seasonal", "/reports", "/admin")


def save_payload(engine: str) -> dict:
    """The rightsizing page's save callback, for a profile of `engine`."""
    states = [{"id": "rightsizing-engine", "property": "data", "value": engine}]
    names = [n for n, _, _ in SELECT_FIELDS] + [n for n, _ in NUMBER_FIELDS]
    names += ["hf_model", "hf_config", "startup_log"]
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


def chosen(store: str, choice: str, by: str) -> dict:
    """An admin action's input: the store its click fills in the browser with the native
    select's value (`choice`) and the button clicked (`by`)."""
    return {"id": store, "property": "data", "value": {"choice": choice, "by": by, "at": 1}}


def create_token_payload(gateway: str) -> dict:
    """The admin page's create-token callback, for an ingest token of `gateway`."""
    return {
        "output": "..admin-result.children@x...admin-tokens-box.children@x...admin-token-id"
        ".children@x..",
        "outputs": [
            {"id": "admin-result", "property": "children@x"},
            {"id": "admin-tokens-box", "property": "children@x"},
            {"id": "admin-token-id", "property": "children@x"},
        ],
        "inputs": [chosen("admin-scope-chosen", "ingest", "admin-create")],
        "changedPropIds": ["admin-scope-chosen.data"],
        "state": [{"id": "admin-gateway", "property": "value", "value": gateway}],
    }


def dash_post(client: httpx.Client, payload: dict) -> httpx.Response:
    """Post a callback with the output names the server's Dash gives its first input."""
    # Dash's hashed output names for allow_duplicate outputs: ask the server for them.
    deps = client.get("/_dash-dependencies").json()
    wanted = payload["inputs"][0]["id"]
    for dep in deps:
        # The server's callback, not a browser-side one on the same input.
        if dep.get("clientside_function") is None and any(i["id"] == wanted for i in dep["inputs"]):
            payload = {**payload, "output": dep["output"]}
            outs = dep["output"].strip(".").split("...")
            payload["outputs"] = [
                {"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]} for o in outs
            ]
            break
    return client.post("/_dash-update-component", json=payload)


def api_get_routes(client: httpx.Client) -> list[str]:
    """Every GET route under /api/ but health, from the OpenAPI schema, with names filled in."""
    schema = client.get("/openapi.json").json()
    paths = []
    for path, ops in schema["paths"].items():
        if path.startswith("/api/") and "get" in ops and path != "/api/health":
            paths.append(path.replace("{name}", "chat-8b").replace("{token_id}", "x"))
    return paths


def page_layout(client: httpx.Client, path: str, search: str = "") -> str:
    """A page's layout as JSON text (non-ASCII kept as is), from Dash's routing callback."""
    payload = {
        "output": ".._pages_content.children..._pages_store.data..",
        "outputs": [
            {"id": "_pages_content", "property": "children"},
            {"id": "_pages_store", "property": "data"},
        ],
        "inputs": [
            {"id": "_pages_location", "property": "pathname", "value": path},
            {"id": "_pages_location", "property": "search", "value": search},
        ],
        "changedPropIds": ["_pages_location.pathname"],
        "state": [],
    }
    answer = client.post("/_dash-update-component", json=payload, timeout=300)
    assert answer.status_code == 200, answer.text
    return json.dumps(answer.json()["response"]["_pages_content"]["children"], ensure_ascii=False)


def store_callback(client: httpx.Client, output: str, store: str, data: dict) -> str:
    """The callback filling `output`.children from the store `store` holding `data`, as JSON
    text (non-ASCII kept)."""
    payload = {
        "output": f"{output}.children",
        "outputs": {"id": output, "property": "children"},
        "inputs": [{"id": store, "property": "data", "value": data}],
        "changedPropIds": [f"{store}.data"],
        "state": [],
    }
    answer = client.post("/_dash-update-component", json=payload, timeout=300)
    assert answer.status_code == 200, answer.text
    return json.dumps(answer.json()["response"][output]["children"], ensure_ascii=False)
