"""The Dash callback edge: requests of the wrong shape or type are refused, naming the field."""

from __future__ import annotations

import pytest
from fastapi import HTTPException

from app.dashboard import edge

CALLBACKS = {
    "out.children": {
        "inputs": [{"id": "box", "property": "value"}],
        "state": [
            {"id": '{"index":["ALL"],"type":"row"}', "property": "n_clicks"},
            {"id": '{"name":"gpu","type":"field"}', "property": "value"},
        ],
    }
}


def _body(**changes: object) -> dict:
    body = {
        "output": "out.children",
        "outputs": {"id": "out", "property": "children"},
        "inputs": [{"id": "box", "property": "value", "value": "x"}],
        "state": [
            [{"id": {"type": "row", "index": 1}, "property": "n_clicks", "value": 2}],
            {"id": {"type": "field", "name": "gpu"}, "property": "value", "value": "H100"},
        ],
        "changedPropIds": ["box.value"],
    }
    return body | changes


def _refusal(body: object) -> HTTPException:
    with pytest.raises(HTTPException) as caught:
        edge.check_envelope(body, CALLBACKS)
    return caught.value


def test_a_request_as_the_renderer_sends_it_passes():
    edge.check_envelope(_body(), CALLBACKS)


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        (None, 400, "must be a JSON object"),
        ([1], 400, "must be a JSON object"),
        ({"output": 1}, 400, "Expected `str`, got `int` - at `value.output`"),
        (_body(output="gone.children"), 404, "no callback has the output gone.children"),
        (_body(inputs=[]), 400, "takes 1 inputs, the request sent 0"),
        (_body(state=[{"id": "row", "property": "n_clicks"}] * 2), 400, "a list of matching"),
        (_body(state=[[], []]), 400, "state[1] must be one component"),
        (
            _body(state=[[], {"id": {"name": "cpu", "type": "field"}, "property": "value"}]),
            400,
            "is {",
        ),
        (_body(inputs=[{"id": "other", "property": "value"}]), 400, "the callback takes box.value"),
        (_body(inputs=[{"id": "box", "property": "data"}]), 400, "is box.data"),
    ],
)
def test_a_request_of_another_shape_is_refused_naming_the_part(body, status, words):
    refusal = _refusal(body)
    assert refusal.status_code == status
    assert words in refusal.detail


def _typed(box: str | None, clicks: list[int | None]) -> None:
    """A callback declaring its types."""


def _untyped(pathname_, search_):  # type: ignore[no-untyped-def]
    """A callback declaring none, as Dash's page router."""


def test_values_are_checked_against_the_declared_types():
    sent = [{"id": "box", "property": "value"}, [{"id": {"i": 1}, "property": "n_clicks"}]]
    edge.check_args(_typed, sent, ["x", [1, None]])
    with pytest.raises(HTTPException) as caught:
        edge.check_args(_typed, sent, ["x", [1, "2"]])
    assert caught.value.status_code == 422
    assert caught.value.detail == (
        'input {"i":1}.n_clicks: Expected `int | null`, got `str` - at `value[1]`'
    )


def test_an_untyped_callback_is_typed_by_its_properties_or_not_at_all():
    sent = [{"id": "_pages_location", "property": p} for p in ("pathname", "search")]
    edge.check_args(_untyped, sent, ["/shapes", "?a=1"])
    with pytest.raises(HTTPException) as caught:
        edge.check_args(_untyped, sent, ["shapes", None])
    assert "_pages_location.pathname" in caught.value.detail
    with pytest.raises(TypeError, match="declares no type"):
        edge.check_args(_untyped, [{"id": "x", "property": "value"}] * 2, [1, 2])
