"""Names from the data are escaped in the weekly email's HTML."""

from __future__ import annotations

from app.reports.build import build_report
from app.reports.render import render
from app.storage.engines import put_profile
from tests.support.database import open_migrated
from tests.support.reports import NOW, WEEK


def test_names_from_the_data_are_escaped_in_the_html(report_db):
    with open_migrated(report_db) as db:
        put_profile(
            db.cursor(),
            "<script>alert(1)</script>",
            {"model": "llama-3.1-8b", "gpu": "H100"},
            NOW,
        )
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1)
        html, _ = render(report)
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<script" not in html.lower()  # and no script of its own
