"""A server started over a damaged journal segment (issue 26, class 1): it starts, stores
every readable row, and /api/health and /metrics show the quarantined file until an operator
acknowledges it (over the API or with `tokenshape quarantine ack`)."""

from __future__ import annotations

import subprocess
import sys

from app.storage import quarantine
from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.journal import Journal
from tests.support.database import copy_database
from tests.support.records import request_rows
from tests.support.server import serve, server_settings


def test_a_damaged_segment_is_recovered_shown_and_acknowledged(db_template, tmp_path):
    db = copy_database(db_template, tmp_path / "t.duckdb")
    journal = Journal(db.with_name(db.name + ".journal"), REQUESTS_SCHEMA)
    journal.append(request_rows([f"a{i}" for i in range(10)], gateway="edge"))
    journal.append(request_rows([f"b{i}" for i in range(10)], gateway="edge"))
    (segment,) = journal.rotate()
    data = bytearray(segment.read_bytes())
    at = data.find(b"b3")
    data[at : at + 2] = b"\xc3\x28"  # two bytes of a request id: invalid UTF-8
    segment.write_bytes(bytes(data))
    for live in serve(server_settings(db)):
        assert live.scalar("SELECT count(*) FROM requests WHERE gateway = 'edge'") == 19
        with live.client() as c:
            health = c.get("/api/health")
            assert health.status_code == 200  # still serving: a balancer keeps the node
            body = health.json()
            assert body["status"] == "warning" and "quarantine" in body["problem"]
            (damage,) = body["damage"]
            assert (damage["recovered_rows"], damage["lost_rows"]) == (19, 1)
            assert damage["original"].endswith(segment.name)
            metrics = c.get("/metrics").text
            assert 'tokenshape_quarantined_files{kind="journal segment"} 1.0' in metrics
        admin = live.token("admin", gateway="ops")
        with live.client(admin) as c:
            assert c.post("/api/health/acknowledge", params={"name": "nope"}).status_code == 404
            assert c.post("/api/health/acknowledge").json() == {"acknowledged": 1}
            assert c.get("/api/health").json()["status"] == "ok"
            assert (
                'tokenshape_quarantined_files{kind="journal segment"} 0.0' in c.get("/metrics").text
            )
    folder = quarantine.folder_for(db)
    assert (folder / damage["name"]).read_bytes() == bytes(data)  # kept for the operator


def test_the_cli_lists_and_acknowledges_quarantined_files(tmp_path):
    db = tmp_path / "c.duckdb"
    segment = tmp_path / "segment-000000001.arrow"
    segment.write_bytes(b"damaged")
    quarantine.quarantine(
        quarantine.folder_for(db),
        segment,
        kind="journal segment",
        problem="its header is unreadable",
        recovered_rows=0,
        lost_rows=None,
    )

    def cli(*args: str) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "app.cli", "quarantine", *args, "--db", str(db)]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=60)

    listed = cli("list")
    assert listed.returncode == 1 and "NOT acknowledged" in listed.stdout
    assert "an uncountable number of rows lost" in listed.stdout
    assert cli("ack").returncode == 0
    assert cli("list").returncode == 0
