"""The edge of Dash's callback route: every request to /_dash-update-component is checked for
its shape and for the types its callback declares before any callback runs, and refused with a
4xx that names the field (a browser never sends such a request; a script or a stale tab can).

Each server callback declares the type of every input and state in its signature (the types
below, or plain ones such as `int | None`); Dash's own page router declares none, so its two
inputs are typed by their property (PROP_TYPES). A callback left without a type fails
tests/security/test_dash_fuzz.py, which fuzzes every callback the server has."""

from __future__ import annotations

import functools
import inspect
import json
import typing
from collections.abc import Callable
from typing import Annotated, Any, NotRequired, TypedDict

import msgspec
from fastapi import HTTPException

# A page's URL query as Dash hands it to a layout: a repeated key is a list of its values.
Query = dict[str, str | list[str]]


class CardsData(TypedDict):
    """The Overview's engine cards' store: the page's query, the Rightsizing link's and the
    engines the cards show, in order."""

    query: Query
    rightsizing: NotRequired[Query]
    engines: list[str]


class MoneyWeeks(TypedDict):
    """The Overview's money chart's store: how many weeks it shows."""

    weeks: int


class EngineData(TypedDict):
    """A store naming one engine (the Rightsizing page's money panel)."""

    engine: str


class Chosen(TypedDict):
    """What an Admin button's browser-side callback stores: the select's value, the button."""

    choice: str
    by: str
    at: NotRequired[float]


class ShapesView(TypedDict):
    """The Shapes page's store: its query and the time the page was built at."""

    query: Query
    now: str


# A field of the Rightsizing form: a select's or text box's string, a number box's number.
FieldValue = str | int | float | None

# Types of the properties Dash's own callbacks read (its page router's inputs); a path is
# absolute, as the browser's location always is.
PROP_TYPES: dict[str, Any] = {
    "pathname": Annotated[str, msgspec.Meta(pattern="^/")] | None,
    "search": str | None,
    "hash": str | None,
    "href": str | None,
}

# Longest text in a message about a value the client sent.
_SHOWN = 80


class _Prop(msgspec.Struct, forbid_unknown_fields=False):
    """One input, state or output as the renderer names it."""

    id: str | dict[str, str | int | float | bool]
    property: str
    value: Any = None


_Item = _Prop | list[_Prop]


class _Envelope(msgspec.Struct, forbid_unknown_fields=False):
    """The body of a callback request."""

    output: str
    outputs: _Prop | list[_Item]
    inputs: list[_Item]
    state: list[_Item] = []
    changedPropIds: list[str] = []  # noqa: N815  # Dash's own key


def refuse(status: int, message: str) -> HTTPException:
    """The 4xx answered for a callback request that cannot be run, naming what was wrong."""
    return HTTPException(status_code=status, detail=message)


def check_envelope(body: object, callbacks: dict[str, dict]) -> None:
    """Refuse a body that is not a callback request Dash's renderer would send (400), or one for
    an output no callback has (404)."""
    if not isinstance(body, dict):
        raise refuse(
            400,
            "the body must be a JSON object naming the callback's output, outputs, inputs and "
            "state, sent with Content-Type: application/json (as the dashboard's pages send it)",
        )
    try:
        envelope = msgspec.convert(body, _Envelope)
    except msgspec.ValidationError as exc:
        raise refuse(400, f"the callback request is malformed: {_where(exc)}") from None
    spec = callbacks.get(envelope.output)
    if spec is None:
        raise refuse(
            404,
            f"no callback has the output {_short(envelope.output)}: reload the page (the "
            "server may have been upgraded since it was loaded)",
        )
    _check_items("inputs", envelope.inputs, spec.get("inputs", []))
    _check_items("state", envelope.state, spec.get("state", []))


def _check_items(part: str, sent: list, declared: list[dict]) -> None:
    """The inputs (or state) sent are the ones the callback declares, in order."""
    if len(sent) != len(declared):
        raise refuse(
            400, f"the callback takes {len(declared)} {part}, the request sent {len(sent)}"
        )
    for position, (item, want) in enumerate(zip(sent, declared, strict=True)):
        pattern = is_pattern(want["id"])
        items = item if isinstance(item, list) else [item]
        if pattern != isinstance(item, list):
            kind = "a list of matching components" if pattern else "one component"
            raise refuse(400, f"{part}[{position}] must be {kind} ({_name(want)})")
        for one in items:
            if one.property != want["property"] or (not pattern and _id_text(one.id) != want["id"]):
                raise refuse(
                    400,
                    f"{part}[{position}] is {_short(_id_text(one.id))}.{_short(one.property)}; "
                    f"the callback takes {_name(want)} there",
                )


def is_pattern(declared_id: str) -> bool:
    """Whether a declared component id (as Dash writes it) is a wildcard one (ALL, MATCH,
    ALLSMALLER), which the request fills with a list of matching components."""
    if not declared_id.startswith("{"):
        return False
    try:
        parsed = json.loads(declared_id)
    except ValueError:
        return False
    return isinstance(parsed, dict) and any(isinstance(v, list) for v in parsed.values())


def check_args(func: Callable, sent: list, args: list) -> None:
    """Refuse (422) a value whose type is not what the callback declares for it, naming the
    component and property it came from."""
    for position, (value, expected) in enumerate(zip(args, arg_types(func, sent), strict=True)):
        try:
            msgspec.convert(value, expected, strict=True)
        except msgspec.ValidationError as exc:
            raise refuse(422, f"{_field(sent[position])}: {_where(exc)}") from None


def arg_types(func: Callable, sent: list) -> list[Any]:
    """The declared type of each input and state of `func`, in order (`sent` names them): its
    signature's, or its property's for a callback that declares none (Dash's page router)."""
    original = inspect.unwrap(func)
    hints, positional, rest = _signature(original)
    types: list[Any] = []
    for position, item in enumerate(sent):
        param = positional[position] if position < len(positional) else rest
        if param is not None and param.name in hints:
            types.append(hints[param.name])
            continue
        prop = (item[0] if isinstance(item, list) and item else item).get("property")
        if isinstance(item, dict) and prop in PROP_TYPES:
            types.append(PROP_TYPES[prop])
            continue
        raise TypeError(f"{original.__qualname__} declares no type for {_field(item)}")
    return types


@functools.cache
def _signature(
    original: Callable,
) -> tuple[dict[str, Any], list[inspect.Parameter], inspect.Parameter | None]:
    """A callback's type hints, positional parameters and *rest, read once per callback (not
    at every request: resolving the hints costs more than checking the values)."""
    hints = typing.get_type_hints(original)
    params = list(inspect.signature(original).parameters.values())
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    rest = next((p for p in params if p.kind is p.VAR_POSITIONAL), None)
    return hints, positional, rest


def _field(item: object) -> str:
    """`component.property` of a sent input, for a message."""
    one = item[0] if isinstance(item, list) and item else item
    if not isinstance(one, dict):
        return "an input"
    return f"input {_short(_id_text(one.get('id')))}.{_short(str(one.get('property')))}"


def _name(declared: dict) -> str:
    return f"{declared['id']}.{declared['property']}"


def _id_text(component: object) -> str:
    """A component id as Dash writes it in its dependencies (a dict id as sorted JSON)."""
    if isinstance(component, dict):
        return json.dumps(component, sort_keys=True, separators=(",", ":"))
    return str(component)


def _where(exc: msgspec.ValidationError) -> str:
    """msgspec's message ("Expected `str`, got `int` - at `$.query`") with `$` read as the
    value, so the path names where in it the problem is."""
    return str(exc).replace("`$", "`value")


def _short(text: str) -> str:
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
