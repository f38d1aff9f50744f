"""One engine, one answer: the settings and commands of each demo engine are the same from the
recommendation service, the seasonal report's whole-day build, `tokenshape recommend` and the
weekly email; the status words are the same on the fleet table, the Overview and the email;
a max_num_tokens below the median prompt is warned about with the model's TTFT."""

from __future__ import annotations

import html as html_lib
import json
import re
from datetime import datetime, timedelta

import pytest

from app.config import Settings
from app.dashboard.pages.overview import money_outputs
from app.dashboard.pages.rightsizing import fleet_rows, query_problems
from app.jobs.schedule import week_bounds
from app.reports.build import build_report
from app.reports.render import render
from app.services.demo import DEMO_PROFILES
from app.services.rightsizing import recommend, seasonal, window_to
from app.sizing.slo import Fleet
from app.sizing.status import LABELS, engine_status
from app.storage.database import Database
from tests.support.cli import cli
from tests.support.database import copy_database
from tests.support.reports import NOW, WEEK


def _fleet(path) -> Fleet:
    return Fleet.of(Settings(db=path, _env_file=None))


def _text(component) -> str:
    """Every string inside a Dash component tree."""
    if component is None:
        return ""
    if isinstance(component, str | int | float):
        return str(component)
    if isinstance(component, list | tuple):
        return " ".join(_text(c) for c in component)
    return _text(getattr(component, "children", None)) + " " + str(getattr(component, "title", ""))


@pytest.fixture(scope="module")
def week_db(tmp_path_factory, demo_template):
    template = demo_template(requests=20000, days=14, end=NOW)
    return copy_database(template, tmp_path_factory.mktemp("one") / "r.duckdb")


def test_service_seasonal_whole_day_and_email_say_the_same_settings(week_db):
    start, end = week_bounds(WEEK, "UTC")
    fleet = _fleet(week_db)
    with Database(week_db, read_only=True).open() as db:
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1, fleet=fleet)
        html, text = render(report)
        for engine in DEMO_PROFILES:
            rec = recommend(db, engine, start=start, end=end, tz="UTC", fleet=fleet)
            season = seasonal(db, engine, now=end, tz="UTC", weeks=1, threshold=0.1, fleet=fleet)
            assert rec.status == "ok" and rec.commands
            whole = season.whole_day
            assert whole is not None
            assert whole.recommended == rec.recommended and whole.commands == rec.commands
            # Plans (a) and (b) are that one build.
            assert season.result is not None
            static = season.result.static.configs[0]
            assert static.max_seq_len == rec.recommended.max_seq_len
            first = next(iter(rec.commands))
            assert html_lib.escape(rec.commands[first], quote=False) in html.replace("&#39;", "'")
            assert rec.commands[first] in text
            # A per-window build is labelled as one, never shown as the engine's settings.
            for block in season.commands:
                assert block["build"] == f"per-window build, {block['window']}"
                framework = next(iter(block))
                assert block[framework] != rec.commands[framework] or (
                    len(season.result.split.configs) == 2  # same bounds in both windows
                )


def test_the_cli_prints_the_services_whole_day_build(tmp_path, demo_template):
    template = demo_template(requests=20000, days=14, end=None)
    path = copy_database(template, tmp_path / "c.duckdb")
    for engine in DEMO_PROFILES:
        out = cli("recommend", "--engine", engine, "--db", str(path)).stdout
        window = next(line for line in out.splitlines() if line.startswith("  window: "))
        a, b = window.removeprefix("  window: ").split(" to ")
        start, end = datetime.fromisoformat(a), datetime.fromisoformat(b)
        assert end - start == timedelta(days=7) and end.second == 0
        with Database(path, read_only=True).open() as db:
            rec = recommend(db, engine, start=start, end=end, tz="UTC", fleet=_fleet(path))
        assert "  whole-day build:" in out
        for framework, script in rec.commands.items():
            block = "\n".join(f"    {line}" for line in script.splitlines())
            assert f"  {framework}:\n{block}\n" in out
        state = engine_status(rec)
        assert f"  status: {state.label} ({state.reason})" in out
        as_json = json.loads(
            cli("recommend", "--engine", engine, "--db", str(path), "--json").stdout
        )
        assert as_json["status"] == state.key and as_json["status_label"] == state.label


def test_one_status_vocabulary_on_the_fleet_table_the_overview_and_the_email(week_db):
    fleet = _fleet(week_db)
    now = NOW
    start, end = window_to(now)
    with Database(week_db, read_only=True).open() as db:
        expected = {
            e: engine_status(recommend(db, e, start=start, end=end, tz="UTC", fleet=fleet))
            for e in DEMO_PROFILES
        }
        table = _text(fleet_rows(db, {}, now, "UTC", fleet))
        _, note, _, _ = money_outputs(db, now, "UTC", fleet)
        overview = _text(note)
        report = build_report(db, WEEK, tz="UTC", public_url="http://x", threshold=0.1, fleet=fleet)
        html, _ = render(report)
        week_start, week_end = week_bounds(WEEK, "UTC")
        weekly = {
            e: engine_status(
                recommend(db, e, start=week_start, end=week_end, tz="UTC", fleet=fleet)
            )
            for e in DEMO_PROFILES
        }
    assert "verdict" in table  # the verdict column has its header
    for engine, state in expected.items():
        assert state.label in LABELS.values() or state.label == "short of replicas"
        assert f"{state.label} {state.reason}" in table
        item = re.split(rf"{re.escape(engine)}\s+:\s+", overview, maxsplit=1)[1]
        assert item.lstrip().startswith(state.label) and state.reason in item
    for section in report.engines:
        assert section.status == weekly[section.name]
        assert f'data-status="{section.status.key}"' in html
        assert html_lib.escape(section.status.label) in html
    # The summary counts in the same words, never "need a rebuild" nor "ok".
    assert "need a rebuild" not in report.summary and " ok" not in report.summary
    labels = [s.status.label for s in report.engines if s.status]
    assert any(label in report.summary or label[:4] in report.summary for label in labels)


def test_a_step_below_the_median_prompt_is_warned_with_the_predicted_ttft(week_db):
    start, end = week_bounds(WEEK, "UTC")
    with Database(week_db, read_only=True).open() as db:
        rec = recommend(db, "llm-70b", start=start, end=end, tz="UTC", fleet=_fleet(week_db))
    median = rec.traffic.quantiles["isl"]["p50"]
    assert rec.recommended is not None and rec.recommended.max_num_tokens is not None
    if rec.recommended.max_num_tokens >= median:
        pytest.skip("the demo's llm-70b step holds its median prompt this week")
    first, *more = rec.warnings
    assert f"max_num_tokens {rec.recommended.max_num_tokens:,} is below the median prompt" in first
    assert more and "predicts a mean TTFT" in more[0] and " ms with max_num_tokens" in more[0]
    # Said once, of the final step: no note about a step the SLO replaced.
    steps = [n for n in rec.notes if n.startswith("prompts longer than max_num_tokens")]
    assert steps == [
        f"prompts longer than max_num_tokens ({rec.recommended.max_num_tokens:,}) are "
        "prefilled in chunks: on by default in vLLM; TensorRT-LLM needs paged context FMHA "
        "and chunked context"
    ]


def test_bad_query_parameters_of_the_rightsizing_page_are_named():
    now = NOW
    (coverage,) = query_problems({"coverage": "0.5"}, now)
    assert coverage.startswith("coverage: '0.5' is not allowed") and "0.999 (99.9%)" in coverage
    (window,) = query_problems({"window": "3y"}, now)
    assert window.startswith("window: '3y'") and "24h, 7d, 30d" in window
    (span,) = query_problems({"start": "yesterday"}, now)
    assert span.startswith("start and end:")
    assert query_problems({"coverage": "0.99", "window": "30d"}, now) == []
