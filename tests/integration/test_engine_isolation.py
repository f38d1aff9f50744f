"""One broken engine never breaks the others (issue 22): profiles stored before a bound existed
(written here straight into the database, past validation) show as error rows on the
Rightsizing page's fleet table, in GET /api/money and the Overview's money, on the Reports
page and in the weekly email, while every good engine is computed and shown."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from app.dashboard import ids
from app.reports.build import report_for
from app.reports.render import render
from app.services import overview
from app.services.demo import DEMO_PROFILES
from app.sizing.slo import Fleet
from app.storage.engines import put_profile
from tests.support.dash import page_layout, store_callback
from tests.support.database import copy_database
from tests.support.server import LiveServer, serve, server_settings

GOOD = ("code-7b", "guard-8b")
# 1e308 GiB per GPU (accepted before the bounds; an OverflowError deep in the estimate), and a
# tensor_parallel no code can multiply (a TypeError in the tables that counted GPUs from it).
POISON = {"chat-8b": {"gpu_memory_gib": 1e308}, "llm-70b": {"tensor_parallel": {"x": 1}}}


@pytest.fixture(scope="module")
def broken_live(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """The app over two weeks of demo traffic, two of its four engines' profiles poisoned."""
    template = demo_template(requests=5000, days=14)
    db = copy_database(template, tmp_path_factory.mktemp("isolation") / "t.duckdb")
    for live in serve(server_settings(db), wait=False):
        now = datetime(2026, 11, 20, tzinfo=UTC)
        for engine, poison in POISON.items():
            put_profile(live.db.cursor(), engine, DEMO_PROFILES[engine] | poison, now)
        yield live


def test_money_has_an_error_row_for_each_broken_engine_and_totals_the_good(broken_live):
    with broken_live.client() as c:
        answer = c.get("/api/money")
    assert answer.status_code == 200, answer.text
    m = answer.json()
    rows = {e["engine"]: e for e in m["engines"]}
    assert set(rows) == set(DEMO_PROFILES)
    assert "gpu_memory_gib" in rows["chat-8b"]["error"] and "4096" in rows["chat-8b"]["error"]
    assert "save it again" in rows["chat-8b"]["error"]
    assert "tensor_parallel" in rows["llm-70b"]["error"]
    for bad in POISON:
        assert rows[bad]["plans"] == [] and rows[bad]["best"] is None
    for good in GOOD:
        assert rows[good]["error"] is None and rows[good]["best"]["gpu_hours_month"] > 0
    # The fleet's totals are the good engines' alone.
    assert m["best_month"] == pytest.approx(
        sum(rows[g]["best"]["cost_month"] for g in GOOD), abs=0.05
    )
    # The Overview's money chart draws the good engines and names the broken ones.
    fleet = Fleet.of(broken_live.app.state.runtime.settings)
    o = overview.money(broken_live.db, now=datetime.now(UTC), tz="UTC", fleet=fleet)
    assert sorted(o.frame["engine"]) == sorted(GOOD)
    assert {line.split(":")[0] for line in o.left_out} == set(POISON)


def test_the_fleet_table_shows_error_rows_and_the_good_engines(broken_live):
    with broken_live.client() as c:
        listed = page_layout(c, "/rightsizing", "?window=30d")
        filled = store_callback(
            c, ids.RIGHTSIZING_FLEET, ids.RIGHTSIZING_FLEET_QUERY, {"window": "30d"}
        )
        page = c.get("/api/engines/chat-8b/recommendation")
        own = {e: page_layout(c, "/rightsizing", f"?engine={e}") for e in POISON}
        good = page_layout(c, "/rightsizing", "?engine=code-7b&window=30d")
    assert "could not be built" not in listed and all(e in listed for e in DEMO_PROFILES)
    for engine, shown in own.items():  # its own error, and the editor to fix it with
        assert "save it again" in shown and ids.RIGHTSIZING_EDITOR in shown, engine
    assert "could not be" not in good and ids.RIGHTSIZING_BOUNDS in good
    for engine in DEMO_PROFILES:
        assert engine in filled
    assert "gpu_memory_gib" in filled and "tensor_parallel" in filled
    assert "save it again" in filled and "?× H100" in filled  # its GPUs cannot be counted
    assert "$" in filled and "a month now" in filled  # the good engines' money, the total
    assert page.status_code == 404 and "save it again" in page.json()["detail"]


def test_the_reports_page_and_the_email_report_the_good_engines(broken_live):
    settings = broken_live.app.state.runtime.settings
    report = report_for(broken_live.db, settings, "2026-W47")
    sections = {s.name: s for s in report.engines}
    assert set(sections) == set(DEMO_PROFILES)
    for bad in POISON:
        assert sections[bad].problem and "save it again" in sections[bad].problem
    for good in GOOD:
        assert sections[good].problem is None and sections[good].money.best is not None
    assert "2 cannot be sized" in report.subject
    html, text = render(report)
    assert "gpu_memory_gib" in text and "Money: " in text
    assert text.count("Money: ") == len(GOOD)
    assert "gpu_memory_gib" in html
    with broken_live.client() as c:
        shown = page_layout(c, "/reports", "?week=2026-W47")
    assert "could not be built" not in shown
    assert "2 cannot be sized" in shown and "gpu_memory_gib" in shown


def test_a_failure_that_is_not_the_profiles_says_so_and_is_a_500(tmp_path, demo_template, caplog):
    """A database error (here: the requests table gone under the running server) is not the
    profile's to fix: the money row and the page say "could not be computed … see the server
    log" (no "fix its profile"), the engine's API answer is the error handler's 500 (not a
    422), and the log has the traceback, once per engine and kind of error."""
    db = copy_database(demo_template(requests=5000, days=14), tmp_path / "gone.duckdb")
    for live in serve(server_settings(db), wait=False):
        live.db.cursor().execute("ALTER TABLE requests RENAME TO requests_elsewhere")
        with live.client() as c:  # the server closes a connection whose request raised
            api = c.get("/api/engines/chat-8b/recommendation")
        with caplog.at_level("WARNING", logger="tokenshape.profiles"), live.client() as c:
            money = c.get("/api/money")
            again = c.get("/api/money")
            shown = store_callback(
                c, ids.RIGHTSIZING_FLEET, ids.RIGHTSIZING_FLEET_QUERY, {"window": "30d"}
            )
    assert api.status_code == 500, api.text
    assert "see the server log" in api.json()["detail"]
    assert money.status_code == 200 and again.status_code == 200, money.text
    for row in money.json()["engines"]:
        error = row["error"]
        assert error.startswith(f"{row['engine']}: could not be computed (CatalogException: ")
        assert error.endswith("see the server log") and "profile" not in error
    assert "could not be computed (CatalogException" in shown and "fix its profile" not in shown
    logged = [r for r in caplog.records if "could not be computed" in r.getMessage()]
    assert logged and all(r.exc_info for r in logged)
    engines = [r.getMessage().split("'")[1] for r in logged]
    assert sorted(engines) == sorted(set(engines))  # once per engine and kind, not per view
