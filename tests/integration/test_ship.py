"""`tokenshape ship`: retries that honour Retry-After and give up at a deadline, and a resume
after kill -9 that stores every record exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from app.cli.ship import GAVE_UP
from ingest.ship import ShipError, ShipGaveUp, ship
from tests.support import http
from tests.support.net import free_port
from tests.support.paths import ROOT
from tests.support.records import ndjson, record


def _busy_server(busy_for: int, retry_after: str | None = "2"):
    """A server that answers 503 (with Retry-After, if given) to the first `busy_for` batches,
    then takes every batch; yields its URL and the sizes of the bodies it saw."""
    app = FastAPI()
    seen: list[int] = []

    @app.post("/v1/requests")
    async def take(request: Request):
        body = await request.body()
        seen.append(len(body))
        if len(seen) <= busy_for:
            headers = {"Retry-After": retry_after} if retry_after else {}
            return JSONResponse({"detail": "busy"}, status_code=503, headers=headers)
        return {"accepted": 3, "duplicates": 0, "rejected": 0, "errors": []}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}", seen
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture
def flaky():
    """A server that answers 503 with Retry-After twice, then takes every batch."""
    yield from _busy_server(2)


@pytest.fixture
def down():
    """A server that answers 503 with `Retry-After: 4` to every batch."""
    yield from _busy_server(10**9, "4")


def _ship_cli(*args: str) -> subprocess.CompletedProcess:
    """`tokenshape ship ARGS` as a user runs it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSHAPE_")}
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "ship", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # a guard: the run gives up after two seconds
    )


def test_the_shipper_waits_for_retry_after_and_succeeds(flaky, tmp_path):
    url, seen = flaky
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(i) for i in range(3)]))
    waits: list[float] = []
    stats = ship(path, url, "tks_x", sleep=waits.append, checkpoint=tmp_path / "cp")
    assert stats.accepted == 3 and stats.retries == 2 and len(seen) == 3
    assert all(2.0 <= w <= 2.5 for w in waits) and len(waits) == 2  # Retry-After, with jitter
    assert json.loads((tmp_path / "cp").read_text())["offset"] == path.stat().st_size


def test_a_final_answer_stops_with_its_reason(live, tmp_path):
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(0)]))
    with pytest.raises(ShipError, match="401: the token is not valid"):
        ship(path, live.url, "tks_unknown", sleep=lambda s: None)


def test_a_killed_shipper_resumes_and_every_record_lands_once(live, tmp_path):
    token = live.token()
    path = tmp_path / "big.ndjson"
    n = 4000
    path.write_bytes(ndjson([record(i, "k") for i in range(n)]))
    checkpoint = path.with_name(path.name + ".tokenshape-ship")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOKENSHAPE_")}
    cmd = [
        sys.executable,
        "-m",
        "app.cli",
        "ship",
        str(path),
        "--url",
        live.url,
        "--token",
        token,
        "--batch",
        "50",
    ]
    first = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if checkpoint.exists() and json.loads(checkpoint.read_text())["offset"] > 0:
            break
        time.sleep(0.01)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    partial = json.loads(checkpoint.read_text())["offset"]
    assert 0 < partial < path.stat().st_size  # killed mid-file
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "accepted" in done.stdout
    live.settle()
    assert live.scalar("SELECT count(*) FROM requests") == n
    assert live.scalar("SELECT count(DISTINCT request_id) FROM requests") == n
    with http.client() as c:  # nothing left to send: a third run sends nothing new
        assert c.get(live.url + "/api/health").status_code == 200


def test_follow_keeps_shipping_across_a_rotation(live, tmp_path):
    token = live.token()
    path = tmp_path / "gateway.log"
    path.write_bytes(ndjson([record(i, "f") for i in range(10)]))
    result: list = []

    def landed() -> bool:
        return live.scalar("SELECT count(*) FROM requests") >= 25

    def run():
        result.append(
            ship(path, live.url, token, follow=True, checkpoint=tmp_path / "cp", idle_stop=landed)
        )

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 30
    while live.scalar("SELECT count(*) FROM requests") < 10 and time.monotonic() < deadline:
        time.sleep(0.05)
    with path.open("ab") as fh:  # appended while followed
        fh.write(ndjson([record(i, "f") for i in range(10, 15)]))
    time.sleep(1.0)
    path.rename(tmp_path / "gateway.log.1")  # rotated: a new file under the same name
    path.write_bytes(ndjson([record(i, "g") for i in range(10)]))
    thread.join(timeout=60)
    assert not thread.is_alive()
    assert result[0].accepted == 25
    assert live.scalar("SELECT count(DISTINCT request_id) FROM requests") == 25


def test_a_last_line_without_newline_is_shipped_and_a_bad_url_is_named(live, tmp_path):
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(0, "t"), record(1, "t")]).rstrip(b"\n"))
    stats = ship(path, live.url, live.token(), sleep=lambda s: None)
    assert stats.accepted == 2
    with pytest.raises(ShipError, match="the URL is not usable"):
        ship(path, "localhost:8050", "tks_x", sleep=lambda s: None)


def test_a_dead_url_is_given_up_with_its_own_exit_status(tmp_path):
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(0)]))
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    done = _ship_cli(str(path), "--url", url, "--token", "tks_x", "--give-up-after", "2")
    assert done.returncode == GAVE_UP == 3, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert f"gave up on {url}/v1/requests after " in last and "s of retries" in last, last
    assert "the last try failed with: ConnectError" in last, last
    # Nothing was acknowledged, so no checkpoint: a rerun sends it all.
    assert not (tmp_path / "log.ndjson.tokenshape-ship").exists()


def test_503_twice_then_200_ships_from_the_command_line(flaky, tmp_path):
    url, seen = flaky
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(i) for i in range(3)]))
    done = _ship_cli(str(path), "--url", url, "--token", "tks_x", "--give-up-after", "60")
    assert done.returncode == 0, done.stderr
    assert "3 accepted" in done.stdout and "(2 retries)" in done.stdout and len(seen) == 3


def test_the_deadline_counts_the_waits_and_tries_once_more_at_it(down, tmp_path):
    url, seen = down
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(0)]))
    now = [0.0]  # the clock: it moves only by the shipper's own waits

    def sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(ShipGaveUp) as gave_up:
        ship(path, url, "tks_x", sleep=sleep, clock=lambda: now[0], give_up_after=10)
    # Retry-After 4 (+ up to 25% jitter): tries at 0, ~4, ~8, and a last one at 10 sharp.
    assert gave_up.value.seconds == 10.0 and len(seen) == 4
    assert "HTTP 503" in gave_up.value.last and url + "/v1/requests" in str(gave_up.value)


def test_final_answers_stop_at_once_with_exit_status_1(live, tmp_path):
    path = tmp_path / "log.ndjson"
    path.write_bytes(ndjson([record(0)]))
    done = _ship_cli(str(path), "--url", live.url, "--token", "tks_unknown")
    assert done.returncode == 1 and "401: the token is not valid" in done.stderr
    bad = _ship_cli(str(path), "--url", live.url, "--token", "x", "--give-up-after", "-1")
    assert bad.returncode == 2 and "0 or more" in bad.stderr
