"""The reference schema (app/storage/schema): sample_rate last, and rows of an older layout
conformed to it (a journal segment an upgrade finds)."""

from __future__ import annotations

from app.storage import schema
from app.storage.write.journal import Journal
from app.storage.write.store import RequestStore
from tests.support.database import copy_database, open_migrated
from tests.support.records import request_rows


def test_sample_rate_is_the_last_column_and_the_one_weight_expression_reads_it():
    assert schema.REQUEST_COLUMNS[-1] == "sample_rate"
    assert str(schema.REQUESTS_SCHEMA.field("sample_rate").type) == "double"
    assert schema.WEIGHT == "(1.0 / coalesce(sample_rate, 1.0))"
    from app.analytics.filters import WEIGHT

    assert WEIGHT is schema.WEIGHT


def test_a_journal_segment_from_before_sample_rate_is_recovered(db_template, tmp_path):
    old = schema.REQUESTS_SCHEMA.remove(schema.REQUESTS_SCHEMA.get_field_index("sample_rate"))
    rows = request_rows(["a", "b"]).drop_columns(["sample_rate"])
    assert rows.schema == old and schema.conform_requests(rows).schema == schema.REQUESTS_SCHEMA
    jdir = tmp_path / "o.journal"
    journal = Journal(jdir, old)  # as the older release left it after a crash
    journal.append(rows)
    journal.close()
    path = copy_database(db_template, tmp_path / "o.duckdb")
    with open_migrated(path) as db:
        store = RequestStore(db.new_cursor(), journal=Journal(jdir, schema.REQUESTS_SCHEMA))
        assert store.recovered == 2
        got = db.cursor().execute("SELECT request_id, sample_rate FROM requests ORDER BY 1")
        assert got.fetchall() == [("a", None), ("b", None)]
