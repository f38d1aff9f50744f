"""schemathesis against the live server's OpenAPI schema: every route, valid and invalid input,
no 5xx and every response as the schema declares it (status, content type, body, headers)."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import Failure, FailureGroup
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.records import batch

CONFORMANCE = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
# Bounded: a few examples per operation and mode keeps the whole run near half a minute.
EXAMPLES = {GenerationMode.POSITIVE: 6, GenerationMode.NEGATIVE: 4}


@pytest.fixture
def seeded(live):
    """The live server with some traffic and one engine profile, so routes have data."""
    with live.client(live.token("ingest", gateway="schema")) as c:
        assert c.post("/v1/requests", json=batch(200, "schema")).status_code == 200
        profile = {"model": "llama-3.1-8b", "gpu": "L40S", "max_input_len": 4096}
        admin = {"Authorization": f"Bearer {live.token('admin')}"}
        assert c.put("/api/engines/chat-8b", json=profile, headers=admin).status_code == 200
    return live


def _run(operation, mode: GenerationMode, url: str, headers: dict[str, str]) -> list[str]:
    """Drive one operation with generated cases; the distinct failures it found."""
    failures: dict[str, str] = {}

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=EXAMPLES[mode],
        deadline=None,
        derandomize=True,  # the same cases every run: a failure here is reproducible
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(case) -> None:
        try:
            case.call_and_validate(base_url=url, headers=headers, checks=CONFORMANCE, timeout=30)
        except (FailureGroup, Failure) as exc:  # go on: report every operation's problems
            for failure in exc.exceptions if isinstance(exc, FailureGroup) else (exc,):
                text = f"{failure.title}: {failure.message}"
                failures.setdefault(text.splitlines()[0], text[:1500])

    try:
        run()
    except Unsatisfiable:  # nothing to make invalid (an operation without parameters or body)
        assert mode is GenerationMode.NEGATIVE
    return [f"{operation.label} [{mode.value}]: {text}" for text in failures.values()]


def test_every_route_answers_as_its_schema_says(seeded):
    live = seeded
    schema = schemathesis.openapi.from_url(live.url + "/openapi.json", timeout=30)
    operations = [result.ok() for result in schema.get_all_operations()]
    labels = {op.label for op in operations}
    # Every kind of route is under test: ingest, analytics, engines, health, metrics.
    for label in ("POST /v1/requests", "GET /api/heatmap", "PUT /api/engines/{name}"):
        assert label in labels
    assert len(operations) >= 20
    failures: list[str] = []
    for op in operations:
        # A fresh admin token per operation: one that revokes or rotates tokens must not leave
        # the rest of the run answered 401.
        headers = {"Authorization": f"Bearer {live.token('admin', gateway='schemathesis')}"}
        for mode in EXAMPLES:
            failures += _run(op, mode, live.url, headers)
    assert not failures, "\n\n".join(failures)
    with live.client() as c:  # and the server still serves
        assert c.get("/api/health").status_code == 200
