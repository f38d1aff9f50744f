"""The weekly email's content (app/reports/build): the subject, the summary, the money line
and the manager's sentences agree with the engineers' body, engine by engine."""

from __future__ import annotations

import re
from collections import Counter
from html import unescape

import pytest

from app.reports.build import build_report, count_shown, headline
from app.reports.render import render
from app.services import demo
from app.services.economics import fleet_money
from app.sizing.slo import money
from app.sizing.status import LABELS, Status
from app.storage.engines import put_profile
from tests.support.database import open_migrated
from tests.support.reports import NOW, WEEK

ENGINE_STATUS = re.compile(
    r'data-report="engine" data-engine="([^"]+)">.*?data-status="([^"]+)"', re.S
)
SENTENCE = re.compile(
    r'data-report="sentence" data-engine="([^"]+)" data-status="([^"]*)">(.*?)</p>', re.S
)


def _text(fragment: str) -> str:
    return unescape(re.sub(r"<[^>]+>", "", fragment)).strip()


def _agree(report) -> None:
    """Subject, summary, money line, sentences and body say the same, engine by engine."""
    html, text = render(report)
    assert report.subject == f"tokenshape {report.week}: {report.summary}"
    shown = re.search(r'data-report="summary">(.*?)</td>', html, re.S)
    assert shown and _text(shown.group(1)) == report.summary
    assert text.splitlines()[1] == report.summary
    # The statuses the engineers' sections show, engine by engine, in the one vocabulary.
    body = dict(ENGINE_STATUS.findall(html))
    sentences = {name: (key, _text(words)) for name, key, words in SENTENCE.findall(html)}
    assert set(body) == set(sentences) == {e.name for e in report.engines}
    for e in report.engines:
        assert e.status is not None
        assert body[e.name] == sentences[e.name][0] == e.status.key, e.name
        assert e.sentence.startswith(f"{e.name} ({e.status.label})"), e.sentence
        assert sentences[e.name][1] == e.sentence
        assert f"- {e.sentence}" in text and f"Status: {e.status.label}" in text
    # The summary counts exactly those statuses, in their words.
    n = len(report.engines)
    counts = count_shown([e.status for e in report.engines if e.status])
    assert f": {n} engine{'s' if n != 1 else ''}, {counts}" in report.summary
    assert sum(int(w.split()[0]) for w in counts.split(", ")) == n
    critical = sum(f.severity == "critical" for e in report.engines for f in e.findings)
    assert (f", {critical} critical drift finding" in report.summary) == bool(critical)
    assert text.count("[CRITICAL]") == critical
    # The money line is the sum of the engines' plan tables, and the subject's headline its.
    assert report.fleet is not None and report.money_line in text
    assert report.summary.startswith(headline(report.fleet))
    priced = [e.money for e in report.engines if e.money and e.money.baseline]
    if report.fleet.now_month is not None:
        now = sum(m.baseline.cost_month for m in priced)
        best = sum(m.best.cost_month for m in priced)
        assert report.fleet.now_month == pytest.approx(now)
        assert money(now) in report.money_line and money(best) in report.money_line


def test_subject_summary_and_body_agree_for_every_demo_engine(report_db):
    with open_migrated(report_db) as db:
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1)
        # The money line is the Rightsizing page's fleet total (economics.fleet_money) over
        # the report's week.
        page = fleet_money(db, now=report.end, tz="UTC", weeks=1)
    assert {e.name for e in report.engines} == set(demo.DEMO_PROFILES)
    _agree(report)
    assert report.fleet.now_month == pytest.approx(page.now_month)
    assert report.fleet.best_month == pytest.approx(page.best_month)
    assert report.summary.startswith("saves $") and " within the SLO: 4 engines, " in report.summary
    assert report.money_line.startswith("Fleet: $") and " a month now → $" in report.money_line


def test_they_agree_with_a_failing_engine_and_no_prices(report_db):
    with open_migrated(report_db) as db:
        cur = db.cursor()
        # An engine whose model the catalog cannot size, and one without a cost per GPU-hour.
        put_profile(cur, "broken", {"model": "no-such-model", "gpu": "H100"}, NOW)
        guard = {k: v for k, v in demo.DEMO_PROFILES["guard-8b"].items() if "cost" not in k}
        put_profile(cur, "guard-8b", guard, NOW)
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1)
    _agree(report)
    broken = next(e for e in report.engines if e.name == "broken")
    assert broken.status.key == "cannot-be-sized" and "cannot be sized" in report.summary
    assert "Left out (no plan): broken." in report.money_line


def test_an_override_label_is_counted_under_its_own_word():
    statuses = [
        Status("misses-slo", "r", "short of replicas"),
        Status("misses-slo", "r"),
        Status("fits", "r"),
        Status("fits", "r"),
    ]
    assert count_shown(statuses) == "2 fit, 1 misses SLO, 1 short of replicas"
    # Every word is one of app/sizing/status.py's (or its override).
    words = Counter(s.label for s in statuses)
    assert set(words) <= set(LABELS.values()) | {"short of replicas"}
