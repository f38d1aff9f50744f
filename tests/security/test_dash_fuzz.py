"""Every Dash callback of the live server, fuzzed: values of the types it declares (so the
callback itself runs on them) and values of any JSON type, in requests shaped as the renderer
sends them, and malformed requests. None may answer a 5xx; every refusal names what was wrong.

The callbacks come from the server's own /_dash-dependencies, so a new one is fuzzed too."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import dash
import httpx
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from app.dashboard import edge
from tests.support.database import copy_database
from tests.support.server import served, server_settings

# Bounded: ~22 callbacks × these examples keeps the module near a minute on two cores.
TYPED_EXAMPLES = 14
ANY_EXAMPLES = 8
ENVELOPE_EXAMPLES = 60

# Any JSON value, nested a little: what a script (not the renderer) could send for an input.
JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=40),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=12,
)
SETTINGS = dict(
    deadline=None,
    derandomize=True,  # the same cases every run: a failure here is reproducible
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory, demo_template) -> Iterator[tuple[httpx.Client, list[dict]]]:
    """An open-mode server (every caller an admin: the admin callbacks run) over a week of demo
    traffic with the demo engines, its client, and its server-side callbacks."""
    template = demo_template(requests=3000, days=7, end=None)
    db = copy_database(template, tmp_path_factory.mktemp("dash-fuzz") / "f.duckdb")
    with served(server_settings(db)) as live, live.client() as client:
        deps = client.get("/_dash-dependencies").json()
        yield client, [d for d in deps if d.get("clientside_function") is None]


def _outputs(dep: dict, slots: int) -> Any:
    """The outputs as the renderer names them: one dict for a single output, a list for many;
    a pattern output (index ALL) is a list of `slots` components."""
    names = dep["output"][2:-2].split("...") if dep["output"].startswith("..") else None
    parsed = []
    for name in names or [dep["output"]]:
        component, prop = name.rsplit(".", 1)
        if component.startswith("{"):
            pattern = json.loads(component)
            parsed.append(
                [
                    {"id": _concrete(pattern, i), "property": prop.split("@")[0]}
                    for i in range(slots)
                ]
            )
        else:
            parsed.append({"id": component, "property": prop})
    return parsed if names else parsed[0]


def _concrete(pattern: dict, i: int | str) -> dict:
    """A component id matching a pattern id: its ALL keys given the value `i`."""
    return {k: (i if isinstance(v, list) else v) for k, v in pattern.items()}


def _item(declared: dict, value: Any) -> Any:
    """One input or state as sent: a pattern one is a list, one component per value."""
    prop = declared["property"]
    if edge.is_pattern(declared["id"]):
        pattern = json.loads(declared["id"])
        values = value if isinstance(value, list) else [value]
        return [
            {"id": _concrete(pattern, f"k{i}"), "property": prop, "value": v}
            for i, v in enumerate(values)
        ]
    component = json.loads(declared["id"]) if declared["id"].startswith("{") else declared["id"]
    return {"id": component, "property": prop, "value": value}


def _payload(dep: dict, values: list, slots: int) -> dict:
    declared = dep["inputs"] + dep["state"]
    items = [_item(d, v) for d, v in zip(declared, values, strict=True)]
    first = items[0][0] if isinstance(items[0], list) and items[0] else items[0]
    changed = (
        json.dumps(first["id"], sort_keys=True, separators=(",", ":"))
        if isinstance(first, dict) and isinstance(first.get("id"), dict)
        else dep["inputs"][0]["id"]
    )
    return {
        "output": dep["output"],
        "outputs": _outputs(dep, slots),
        "inputs": items[: len(dep["inputs"])],
        "state": items[len(dep["inputs"]) :],
        "changedPropIds": [f"{changed}.{dep['inputs'][0]['property']}"],
    }


def _types(dep: dict) -> list:
    """The types the callback declares for its inputs and state (the server's own edge)."""
    func = dash.get_app().callback_map[dep["output"]]["callback"]
    return edge.arg_types(func, [{"property": d["property"]} for d in dep["inputs"] + dep["state"]])


def _strategy(hint: Any) -> st.SearchStrategy:
    """Values of a declared type; a page query's values are short, a path starts with /."""
    if hint == edge.PROP_TYPES["pathname"]:
        return (
            st.none()
            | st.sampled_from(["/", "/shapes", "/latency", "/admin", "/nope"])
            | st.text(max_size=20).map(lambda s: "/" + s)
        )
    return st.from_type(hint)


def _post(client: httpx.Client, body: Any, raw: bytes | None = None) -> httpx.Response:
    content = raw if raw is not None else json.dumps(body).encode()
    return client.post(
        "/_dash-update-component",
        content=content,
        headers={"Content-Type": "application/json"},
        timeout=120,
    )


def _problem(answer: httpx.Response) -> str | None:
    """What is wrong with an answer: a 5xx, a refusal that names nothing, or a page or panel
    that failed inside (app/dashboard/pages.safe shows "could not be built", logs an ERROR)."""
    if answer.status_code >= 500:
        return f"{answer.status_code}: {answer.text[:300]}"
    if "could not be built" in answer.text or "page-error" in answer.text:
        return f"a failed panel: {answer.text[:300]}"
    if 400 <= answer.status_code < 500:
        detail = (
            answer.json().get("detail")
            if answer.headers.get("content-type", "").startswith("application/json")
            else None
        )
        if not isinstance(detail, str) or len(detail) < 10:
            return f"{answer.status_code} without a message: {answer.text[:200]}"
    return None


def _fuzz(
    client: httpx.Client, dep: dict, values: st.SearchStrategy, examples: int, problems: dict
) -> None:
    """Post `examples` requests of `dep` with generated values; note its first problem."""

    @given(values, st.integers(0, 3))
    @settings(max_examples=examples, **SETTINGS)
    def run(sent: tuple, slots: int) -> None:
        answer = _post(client, _payload(dep, list(sent), slots))
        if problem := _problem(answer):
            problems.setdefault(dep["output"], f"{problem} for {sent!r}"[:600])

    run()


def test_every_callback_takes_any_value_without_a_5xx(fuzzed):
    client, deps = fuzzed
    assert len(deps) >= 20  # every page's callbacks and Dash's page router
    problems: dict[str, str] = {}
    for dep in deps:
        types = _types(dep)
        typed = st.tuples(*[_strategy(t) for t in types])
        untyped = st.tuples(*[JSON for _ in types])
        for values, examples in ((typed, TYPED_EXAMPLES), (untyped, ANY_EXAMPLES)):
            _fuzz(client, dep, values, examples, problems)
    assert not problems, "\n".join(f"{k}: {v}" for k, v in problems.items())


def test_a_value_of_the_wrong_type_is_a_422_naming_the_component(fuzzed):
    client, deps = fuzzed
    dep = next(d for d in deps if d["inputs"][0]["id"] == "admin-scope-chosen")
    answer = _post(client, _payload(dep, [{"choice": "ingest", "by": "admin-create"}, 7], 0))
    assert answer.status_code == 422, answer.text
    assert answer.json()["detail"] == "input admin-gateway.value: Expected `str | null`, got `int`"
    answer = _post(client, _payload(dep, [{"choice": 1, "by": "x"}, "gw"], 0))
    assert answer.json()["detail"] == (
        "input admin-scope-chosen.data: Expected `str`, got `int` - at `value.choice`"
    )


def test_a_well_typed_request_still_runs(fuzzed):
    client, deps = fuzzed
    dep = next(d for d in deps if d["inputs"][0]["id"] == "admin-scope-chosen")
    answer = _post(
        client, _payload(dep, [{"choice": "ingest", "by": "admin-create"}, "fuzz-gw"], 0)
    )
    assert answer.status_code == 200, answer.text
    assert "fuzz-gw" in answer.text  # the token was created for that gateway


def test_cards_for_other_engines_than_the_cards_are_refused(fuzzed):
    client, deps = fuzzed
    dep = next(d for d in deps if "overview-card-status" in d["output"])
    data = {"query": {}, "engines": ["chat-8b", "code-70b"]}
    answer = _post(client, _payload(dep, [data], 3))
    assert answer.status_code == 422
    assert "names 2 engines for 3 cards" in answer.json()["detail"]
    assert _post(client, _payload(dep, [data], 2)).status_code == 200


ENVELOPE = st.fixed_dictionaries(
    {},
    optional={
        "output": JSON | st.text(max_size=30),
        "outputs": JSON,
        "inputs": JSON
        | st.lists(
            st.fixed_dictionaries({"id": JSON, "property": JSON, "value": JSON}), max_size=3
        ),
        "state": JSON,
        "changedPropIds": JSON,
    },
)


def test_malformed_requests_are_a_4xx_naming_the_problem(fuzzed):
    client, deps = fuzzed
    problems: list[str] = []

    @given(st.one_of(ENVELOPE, JSON))
    @settings(max_examples=ENVELOPE_EXAMPLES, **SETTINGS)
    def run(body: Any) -> None:
        if problem := _problem(_post(client, body)):
            problems.append(f"{problem} for {body!r}"[:400])

    run()
    for raw in (b"", b"{", b"[1,", b"\xff\xfe", b"null", b'"text"'):
        if problem := _problem(_post(client, None, raw)):
            problems.append(f"{problem} for {raw!r}")
    # A real callback's request with one part wrong.
    dep = deps[0]
    good = _payload(dep, [None] * (len(dep["inputs"]) + len(dep["state"])), 1)
    for broken in (
        {**good, "inputs": []},
        {**good, "inputs": good["inputs"] + good["inputs"]},
        {**good, "output": good["output"] + "x"},
        {**good, "inputs": [{"id": "not-this", "property": "data", "value": 1}]},
        {**good, "state": "x"},
    ):
        answer = _post(client, broken)
        assert 400 <= answer.status_code < 500, (broken, answer.text)
        if problem := _problem(answer):
            problems.append(problem)
    assert not problems, "\n".join(problems[:20])


PAGES = (
    "/",
    "/shapes",
    "/latency",
    "/traffic",
    "/rightsizing",
    "/seasonal",
    "/reports",
    "/compare",
    "/notes",
    "/admin",
)
# The keys the pages read from their URL, with values near and far from valid ones.
KEYS = (
    "window",
    "start",
    "end",
    "tz",
    "engine",
    "model",
    "tenant",
    "gateway",
    "split",
    "bins",
    "coverage",
    "weeks",
    "days",
    "week",
    "refresh",
    "benchmark",
    "bench_start",
    "bench_end",
    "deleted",
    "saved",
    "restored",
    "exact",
    "namespace",
)
NEAR = st.sampled_from(
    [
        "7d",
        "24h",
        "30d",
        "custom",
        "2026-11-20T08:00",
        "2026-11-20T08:00:00+05:00",
        "0001-01-01T00:00:00+05:00",
        "9999-12-31T23:00:00-05:00",
        "Europe/Berlin",
        "localtime",
        "chat-8b",
        "model",
        "linear",
        "log2",
        "1",
        "0",
        "-1",
        "1e308",
        "2026-W47",
        "2026-W99",
        "true",
    ]
)
QUERIES = st.dictionaries(
    st.sampled_from(KEYS) | st.text(max_size=8), NEAR | st.text(max_size=30), max_size=6
)


def test_every_page_takes_any_url_query_without_a_5xx(fuzzed):
    client, deps = fuzzed
    router = next(d for d in deps if d["output"].startswith(".._pages_content"))
    problems: list[str] = []

    @given(st.sampled_from(PAGES), QUERIES)
    @settings(max_examples=40, **SETTINGS)
    def run(path: str, query: dict) -> None:
        search = "?" + httpx.QueryParams(query).__str__() if query else ""
        answer = _post(client, _payload(router, [path, search], 0))
        if problem := _problem(answer) or (answer.status_code != 200 and f"{answer.status_code}"):
            problems.append(f"{problem} for {path}{search}"[:400])

    run()
    assert not problems, "\n".join(problems[:20])
