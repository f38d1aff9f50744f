"""Durability across kill -9 of a served process: every acknowledged record survives."""

from __future__ import annotations

import os
import signal
import threading
import time

import duckdb
import httpx

from bench._server import start_server
from tests.support import http
from tests.support.database import copy_database
from tests.support.net import free_port
from tests.support.records import batch
from tests.support.server import offline_token


def test_every_acknowledged_record_survives_kill_9(db_template, tmp_path):
    db = copy_database(db_template, tmp_path / "c.duckdb")
    token = offline_token(db, "crash")  # made before the server process owns the file
    port = free_port()
    server = start_server(db, port)
    acked: list[str] = []
    stop = threading.Event()

    def ship() -> None:
        with http.client(
            base_url=f"http://127.0.0.1:{port}",
            timeout=5,
            headers={"Authorization": f"Bearer {token}"},
        ) as c:
            n = 0
            while not stop.is_set():
                recs = batch(50, "k", start=n * 50)
                n += 1
                try:
                    r = c.post("/v1/requests", json=recs)
                except httpx.HTTPError:
                    continue
                if r.status_code == 200 and r.json()["accepted"] == 50:
                    acked.extend(rec["request_id"] for rec in recs)

    threads = [threading.Thread(target=ship) for _ in range(1)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 60
    while len(acked) < 2000 and time.monotonic() < deadline:
        time.sleep(0.01)
    os.kill(server.pid, signal.SIGKILL)  # mid-stream: batches are in flight
    server.wait()
    stop.set()
    for t in threads:
        t.join()
    assert len(acked) >= 2000
    server = start_server(db, port)  # recovers from the WAL
    try:
        with http.client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {token}"}
        ) as c:
            assert c.post("/v1/requests", json=batch(1, "after")).json()["accepted"] == 1
    finally:
        server.terminate()
        server.wait(timeout=30)
    con = duckdb.connect(str(db), read_only=True)
    con.execute("CREATE TEMP TABLE acked (request_id VARCHAR)")
    con.executemany("INSERT INTO acked VALUES (?)", [[a] for a in acked])
    missing = con.execute(
        "SELECT count(*) FROM acked a ANTI JOIN requests r USING (request_id)"
    ).fetchone()[0]
    twice = con.execute(
        "SELECT count(*) FROM (SELECT request_id FROM requests GROUP BY 1 HAVING count(*) > 1)"
    ).fetchone()[0]
    assert (missing, twice) == (0, 0)
