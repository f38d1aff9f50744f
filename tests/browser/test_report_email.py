"""The weekly email's HTML in a real Chromium at a mail client's width."""

from __future__ import annotations

from app.reports.build import build_report
from app.reports.render import render
from tests.support.browser import BROWSER, screenshot
from tests.support.database import open_migrated
from tests.support.reports import WEEK

pytestmark = BROWSER


def test_the_html_renders_at_mail_client_width(report_db, browser, tmp_path):
    with open_migrated(report_db) as db:
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1)
    html, _ = render(report)
    page = browser.new_page(viewport={"width": 600, "height": 800})
    page.set_content(html)
    width = page.evaluate("document.documentElement.scrollWidth")
    screenshot(page, tmp_path, "report")
    assert width <= 620  # no sideways scrolling at a mail client's width
