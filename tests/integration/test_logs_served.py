"""The logs of a served process: JSON lines, secrets and tokens redacted."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

from app.storage import tokens
from bench._server import start_server
from tests.support import http
from tests.support.database import open_migrated
from tests.support.net import free_port
from tests.support.records import batch

PASSWORD = "hunter2-Plaintext"

WRONG = "tks_" + "Z" * 38  # well formed, never issued


def test_served_process_logs_json_lines_without_tokens(tmp_path: Path, db_path: Path):
    with open_migrated(db_path) as db:
        token, _ = tokens.create(db.cursor(), "gw-a", "ingest")
    port = free_port()
    err_path = tmp_path / "stderr.log"
    with err_path.open("wb") as err:
        proc = start_server(
            db_path,
            port,
            err,
            stdout=subprocess.DEVNULL,
            TOKENSHAPE_LOG_FORMAT="json",
            TOKENSHAPE_LOG_LEVEL="info",
        )
        try:
            url = f"http://127.0.0.1:{port}"
            ok = http.post(
                url + "/v1/requests",
                json=batch(2),
                headers={"Authorization": f"Bearer {token}"},
            )
            wrong = http.post(
                url + "/v1/requests", json=batch(1), headers={"Authorization": f"Bearer {WRONG}"}
            )
            leaky = http.get(
                url + "/metrics", params={"token": token, "password": PASSWORD, "t2": WRONG}
            )
            assert (ok.status_code, wrong.status_code, leaky.status_code) == (200, 401, 200)
        finally:
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)

    text = err_path.read_text()
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    assert token not in text and WRONG not in text and PASSWORD not in text
    access = [line for line in lines if line["logger"] == "uvicorn.access"]
    statuses = {(a["method"], a["path"], a["status"]) for a in access}
    assert ("POST", "/v1/requests", 200) in statuses
    assert ("POST", "/v1/requests", 401) in statuses
    leaked = [a["path"] for a in access if a["path"].startswith("/metrics?")]
    assert leaked == [
        f"/metrics?token={token[:12]}…[redacted]&password=[redacted]&t2={WRONG[:12]}…[redacted]"
    ]
    assert any(line["logger"] == "tokenshape" and "serving" in line["message"] for line in lines)
