"""The lake push job of a serving node (TOKENSHAPE_PUSH_*): a regional server pushes its own
hourly rollups to a central server on a schedule, both real servers on loopback ports. The
central node ends with the regional node's tiers, key for key (tests/integration/
test_lake_import.py's comparison); hours rebuilt later go in a later round; a refusal shows
in health and the log without the token; a round that failed is sent again."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from app.config import Settings
from tests.integration.test_lake_import import assert_same_tiers
from tests.support import http
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.net import free_port
from tests.support.records import record
from tests.support.server import LiveServer, offline_token, served, server_settings

EVERY_S = 0.2
NEW_HOUR = END + timedelta(hours=5)  # after the demo traffic's last hour: a new hour


@pytest.fixture
def regional_db(demo_template, tmp_path: Path) -> Path:
    """The regional node's file: three days of demo traffic (as test_lake_import's node A),
    its 72 hours rolled up from the raw rows."""
    return copy_database(demo_template(requests=5_000, days=3, end=END), tmp_path / "eu.duckdb")


@pytest.fixture
def central_db(db_template: Path, tmp_path: Path) -> Path:
    return copy_database(db_template, tmp_path / "central.duckdb")


def pushing(db: Path, url: str, token: str, **extra) -> Settings:
    """Settings of a regional node pushing to `url` every EVERY_S seconds as eu-west."""
    return server_settings(
        db,
        push_url=url,
        push_token=token,
        push_origin="eu-west",
        push_every_s=EVERY_S,
        rollup_settle_s=0,
        **extra,
    )


def lake_push(live: LiveServer) -> dict:
    """The regional node's /api/health lake_push entry."""
    answer = http.get(live.url + "/api/health", timeout=10)
    assert answer.status_code == 200, answer.text
    return answer.json()["lake_push"]


def wait_for(live: LiveServer, done: Callable[[dict], bool], what: str) -> dict:
    """Poll the lake_push entry until `done(entry)`; fail naming `what` and the last entry."""
    deadline = time.monotonic() + 60
    while True:
        entry = lake_push(live)
        if done(entry):
            return entry
        assert time.monotonic() < deadline, f"no {what} within 60 s: {entry}"
        time.sleep(0.05)


def when(text: str | None) -> datetime | None:
    return datetime.fromisoformat(text) if text else None


def newest_build(live: LiveServer) -> datetime:
    return live.scalar("SELECT max(built_at) FROM rollup_hours")


def origins(live: LiveServer) -> list[tuple]:
    return (
        live.db.cursor()
        .execute("SELECT source, origin, count(*) FROM rollup_hours GROUP BY ALL")
        .fetchall()
    )


def test_a_serving_node_pushes_its_rollups_and_later_rebuilds_on_a_schedule(
    central_db, regional_db
):
    with served(server_settings(central_db)) as central:
        token = central.token("ingest", gateway="region-eu")
        with served(pushing(regional_db, central.url, token)) as regional:
            first = wait_for(regional, lambda e: e["last_success"] is not None, "pushed round")
            # The first round: every clean full-grain hour; the later ones found nothing new.
            assert first["hours_pushed"] == 72 and first["consecutive_failures"] == 0
            assert first["last_error"] is None and first["origin"] == "eu-west"
            assert first["url"] == central.url and first["every_s"] == EVERY_S
            assert when(first["built_after"]) == newest_build(regional)
            assert origins(central) == [("lake", "eu-west", 72)]
            assert lake_push(central) is None  # no TOKENSHAPE_PUSH_URL there
            compared = assert_same_tiers(regional.db.cursor(), central.db.cursor())
            assert compared > 10_000

            # Later traffic at the regional node: rebuilt there, then pushed by a later round.
            recs = [
                record(i, "late", started_at=(NEW_HOUR + timedelta(seconds=37 * i)).isoformat())
                for i in range(60)
            ]
            with regional.client(regional.token("ingest", gateway="gw-eu")) as client:
                assert client.post("/v1/requests", json=recs).json()["accepted"] == 60
            deadline = time.monotonic() + 60
            while not regional.scalar(
                "SELECT count(*) FROM rollup_hours r WHERE hour = ? AND NOT EXISTS "
                "(SELECT 1 FROM rollup_dirty d WHERE d.hour = r.hour)",
                [NEW_HOUR],
            ):
                assert time.monotonic() < deadline, "the regional node did not roll up the hour"
                time.sleep(0.05)
            built = newest_build(regional)
            later = wait_for(
                regional,
                lambda e: when(e["built_after"]) is not None and when(e["built_after"]) >= built,
                "round covering the new hour",
            )
            assert later["hours_pushed"] >= 73 and later["rounds"] > first["rounds"]
            assert origins(central) == [("lake", "eu-west", 73)]
            assert central.scalar("SELECT origin FROM rollup_hours WHERE hour = ?", [NEW_HOUR])
            assert assert_same_tiers(regional.db.cursor(), central.db.cursor()) > compared
            gateways = central.db.cursor().execute(
                "SELECT DISTINCT gateway FROM rollup_shapes WHERE hour = ?", [NEW_HOUR]
            )
            assert gateways.fetchall() == [("gw-eu",)]


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        ("unknown", "401: the token is not valid there"),
        ("read", "403: the token lacks the ingest scope there"),
    ],
)
def test_a_refused_token_shows_in_health_and_the_log_without_the_token(
    central_db, regional_db, caplog, kind, reason
):
    with served(server_settings(central_db)) as central:
        if kind == "read":
            token = central.token("read", gateway="region-eu")
        else:
            token = "tks_" + "NotAKnownToken" * 3
        with served(pushing(regional_db, central.url, token)) as regional:
            entry = wait_for(regional, lambda e: e["consecutive_failures"] >= 2, "failed rounds")
            assert reason in entry["last_error"] and token not in entry["last_error"]
            assert entry["last_success"] is None and entry["hours_pushed"] == 0
            assert entry["built_after"] is None  # the next round sends every hour again
            status = http.get(regional.url + "/api/health", timeout=10).json()["status"]
            assert status == "ok"  # the node itself serves on
            metrics = http.get(regional.url + "/metrics", timeout=10).text
            assert 'tokenshape_lake_push_rounds_total{outcome="failed"}' in metrics
            assert "tokenshape_lake_push_last_success_timestamp_seconds" not in metrics
        assert central.scalar("SELECT count(*) FROM rollup_hours") == 0
    errors = [r for r in caplog.records if r.name == "tokenshape.push"]
    assert errors and all(r.levelno == logging.ERROR for r in errors)
    for r in errors:
        line = r.getMessage()
        assert central.url in line and reason in line and token not in line


def test_rounds_that_failed_are_sent_again_once_the_central_node_answers(
    central_db, regional_db, caplog
):
    caplog.set_level(logging.INFO, logger="tokenshape.push")
    token = offline_token(central_db, "region-eu")  # before the central node holds its file
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    # Nothing listens there yet: each round gives up after 0.5 s of retries.
    with served(pushing(regional_db, url, token, push_give_up_s=0.5)) as regional:
        down = wait_for(regional, lambda e: e["consecutive_failures"] >= 2, "failed rounds")
        assert f"gave up on {url}/v1/rollups after" in down["last_error"]
        assert down["built_after"] is None and down["hours_pushed"] == 0
        with served(server_settings(central_db).model_copy(update={"port": port})) as central:
            up = wait_for(regional, lambda e: e["last_success"] is not None, "pushed round")
            assert up["last_error"] is None and up["consecutive_failures"] == 0
            assert up["hours_pushed"] == 72  # every hour of the failed rounds, once
            assert origins(central) == [("lake", "eu-west", 72)]
            assert_same_tiers(regional.db.cursor(), central.db.cursor())
    lines = [r.getMessage() for r in caplog.records if r.name == "tokenshape.push"]
    assert f"lake push to {url} works again (failures before: " in "\n".join(lines)
    assert any(line.startswith("lake push: 72 hours (2026-11-20 00:00 to ") for line in lines)
