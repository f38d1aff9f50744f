"""CSV answers of the JSON data routes: `format=csv` on a route answers its table as text/csv
(a header row, then the same numbers as its JSON), and every JSON answer links to that CSV."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal
from urllib.parse import urlencode

from fastapi import Query, Request
from fastapi.responses import Response
from pydantic import BaseModel

Format = Literal["json", "csv"]
FORMAT_HELP = (
    "json (the default) or csv: the answer's table as text/csv with a header row, the same "
    "numbers as the JSON (`links.csv` of a JSON answer is this request with format=csv). Cells "
    "that start with = + - @, a tab or a carriage return are text and get a leading ' so a "
    "spreadsheet never runs them as a formula; numbers are written as numbers."
)
FormatQuery = Annotated[Format, Query(description=FORMAT_HELP)]
MEDIA_TYPE = "text/csv; charset=utf-8"
# The 200 answer's second form, so the OpenAPI document (and clients checking content types
# against it) knows format=csv answers text/csv.
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "JSON; with format=csv, the table as text/csv (a header row first).",
        "content": {"text/csv": {"schema": {"type": "string"}}},
    }
}
# A spreadsheet reads a cell starting with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def links(request: Request, tables: Sequence[str] = ()) -> dict[str, str]:
    """`{"csv": <this path and query with format=csv>}`, plus `csv_<table>` for each of
    `tables` (the route's other tables, asked with table=<table>); relative URLs."""
    kept = [(k, v) for k, v in request.query_params.multi_items() if k not in ("format", "table")]

    def url(*extra: tuple[str, str]) -> str:
        return f"{request.url.path}?{urlencode([*kept, ('format', 'csv'), *extra])}"

    return {"csv": url(), **{f"csv_{t}": url(("table", t)) for t in tables}}


def columns(model: type[BaseModel], first: Sequence[str] = ()) -> list[str]:
    """The JSON names of a model's fields (aliases where set), `first` ones first."""
    names = [f.alias or name for name, f in model.model_fields.items()]
    return [*first, *(n for n in names if n not in first)]


def safe(value: Any) -> Any:
    """One cell: empty for null, JSON text for nested values, true/false for booleans, and a
    leading ' on text a spreadsheet would run as a formula; numbers stay as they are."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return value
    if isinstance(value, Mapping | list | tuple):
        value = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    text = str(value)
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def text(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """A header row and the rows as CSV (RFC 4180: CRLF line ends, quoted where needed)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([safe(h) for h in header])
    writer.writerows([safe(v) for v in row] for row in rows)
    return out.getvalue()


def records(header: Sequence[str], items: Iterable[Mapping[str, Any]]) -> list[list[Any]]:
    """Each JSON object as a row of `header`'s keys (absent: empty)."""
    return [[item.get(h) for h in header] for item in items]


def answer(name: str, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Response:
    """The table as a text/csv download named `name`.csv."""
    return Response(
        text(header, rows),
        media_type=MEDIA_TYPE,
        headers={"Content-Disposition": f'attachment; filename="{name}.csv"'},
    )


def dumped(body: BaseModel) -> dict[str, Any]:
    """A response model as its JSON answer holds it (aliases, ISO times), so the CSV's cells
    are the JSON's values."""
    return body.model_dump(mode="json", by_alias=True)


def listed(name: str, body: BaseModel, key: str, model: type[BaseModel]) -> Response:
    """The CSV of one list of a JSON answer (`body`'s `key`): a row per item, a column per
    field of the item `model`."""
    header = columns(model)
    return answer(name, header, records(header, dumped(body)[key]))
