"""Constants the export keeps in more than one layer, held equal (app/services/export.py)."""

from __future__ import annotations

from app.sizing import replay


def test_the_export_query_numbers_cells_as_sizing_does() -> None:
    """analytics.export may not import sizing, so it repeats the cell numbering: kept equal."""
    from app.analytics import export

    assert export.CELL_BASE == replay.CELL_BASE


def test_the_cli_and_the_api_offer_what_the_service_writes() -> None:
    """The CLI keeps its own copy of the formats (it imports the service lazily, to start fast)
    and the API a Literal: both held equal to the service's."""
    from typing import get_args

    from app.api import export as api
    from app.cli import export as cli
    from app.services import export as service

    assert cli.FORMATS == service.FORMATS
    assert cli.HASH_BLOCK == service.DEFAULT_HASH_BLOCK
    assert get_args(get_args(api.Format)[0]) == service.FORMATS
