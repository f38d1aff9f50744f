"""Profile history, undo of a delete and annotations over real HTTP (/api/engines/{name}/…,
/api/annotations), a dashboard session reading them, and the CLI (`tokenshape annotate`,
`annotations list|delete`, `engine delete|history|restore`) on a file."""

from __future__ import annotations

import json

from tests.support.cli import cli
from tests.support.database import copy_database

PROFILE = {"model": "llama-3.1-8b", "gpu": "L40S", "max_input_len": 4096}


def test_profile_changes_are_versions_and_a_delete_is_undone(live):
    with live.client(live.token("admin", gateway="ops")) as c:
        assert c.put("/api/engines/chat-8b", json=PROFILE).status_code == 200
        edited = c.put("/api/engines/chat-8b", json=PROFILE | {"max_input_len": 8192})
        assert edited.status_code == 200
        assert c.delete("/api/engines/chat-8b").status_code == 204
        history = c.get("/api/engines/chat-8b/history").json()
        assert [v["action"] for v in history] == ["delete", "edit", "create"]
        assert history[1]["summary"] == "max_input_len 4,096 → 8,192"
        assert history[0]["author"].startswith("token ops/")
        assert history[0]["before"]["max_input_len"] == 8192 and history[0]["after"] is None
        restored = c.post("/api/engines/chat-8b/restore")
        assert restored.status_code == 200 and restored.json()["action"] == "restore"
        assert c.get("/api/engines/chat-8b").json()["profile"]["max_input_len"] == 8192
        again = c.post("/api/engines/chat-8b/restore")
        assert again.status_code == 409
        assert "has a newer profile" in again.json()["detail"]
        assert "edit the current profile instead" in again.json()["detail"]
        never = c.post("/api/engines/never/restore")
        assert never.status_code == 404 and "no deleted profile" in never.json()["detail"]
    with live.client(live.token("read")) as reader:
        assert reader.post("/api/engines/chat-8b/restore").status_code == 403
        assert len(reader.get("/api/engines/chat-8b/history").json()) == 4
    with live.client() as anon:
        assert anon.post("/api/engines/chat-8b/restore").status_code == 401


def test_notes_need_an_admin_to_write_and_name_their_errors(live):
    with live.client() as anon:
        assert anon.post("/api/annotations", json={"text": "x"}).status_code == 401
    with live.client(live.token("read")) as reader:
        assert reader.post("/api/annotations", json={"text": "x"}).status_code == 403
    with live.client(live.token("admin", gateway="ops")) as c:
        c.put("/api/engines/chat-8b", json=PROFILE)
        long = c.post("/api/annotations", json={"text": "x" * 600})
        assert long.status_code == 422 and "at most 500" in long.json()["detail"]
        bad_at = c.post("/api/annotations", json={"text": "x", "at": "yesterday"})
        assert bad_at.status_code == 422 and "at" in bad_at.text
        far = c.post("/api/annotations", json={"text": "x", "at": "2300-01-01T00:00:00Z"})
        assert far.status_code == 422 and "outside the supported range" in far.text
        made = c.post(
            "/api/annotations",
            json={"text": "deployed vLLM 0.33", "at": "2026-11-20T08:00:00Z", "engine": "chat-8b"},
        )
        assert made.status_code == 201, made.text
        note = made.json()
        assert note["author"].startswith("token ops/") and note["deletable"]
        listed = c.get(
            "/api/annotations", params={"start": "2000-01-01T00:00:00Z", "end": "2100-01-01"}
        ).json()
        kinds = {a["kind"] for a in listed}
        assert kinds == {"note", "profile"} and note["id"] in {a["id"] for a in listed}
        profile_id = next(a["id"] for a in listed if a["kind"] == "profile")
        bad_start = c.get("/api/annotations", params={"start": "soon"})
        assert bad_start.status_code == 422 and "start" in bad_start.text
        backwards = c.get(
            "/api/annotations", params={"start": "2026-11-21T00:00Z", "end": "2026-11-20T00:00Z"}
        )
        assert backwards.status_code == 422 and "start: must be before end" in backwards.text
        kept = c.delete(f"/api/annotations/{profile_id}")
        assert kept.status_code == 409 and "stays in the engine's history" in kept.text
        assert c.delete(f"/api/annotations/{note['id']}").status_code == 204
        gone = c.delete(f"/api/annotations/{note['id']}")
        assert gone.status_code == 404 and "no note has id" in gone.json()["detail"]


def test_a_dashboard_session_reads_annotations_but_cannot_write_them(secured):
    with secured.client(secured.token("admin")) as c:
        assert c.post("/api/annotations", json={"text": "maintenance"}).status_code == 201
    with secured.login("vic") as viewer:
        listed = viewer.get("/api/annotations")
        assert listed.status_code == 200, listed.text
        assert [a["text"] for a in listed.json()] == ["maintenance"]
        assert viewer.post("/api/annotations", json={"text": "x"}).status_code == 401
    with secured.client() as anon:
        assert anon.get("/api/annotations").status_code == 401


def test_the_command_line_adds_lists_deletes_and_restores(db_template, tmp_path):
    db = copy_database(db_template, tmp_path / "cli.duckdb")
    env = {"TOKENSHAPE_DB": str(db)}
    cli("engine", "set", "chat-8b", "model=llama-3.1-8b", "gpu=H100", "max_input_len=4096", env=env)
    cli("engine", "set", "chat-8b", "max_input_len=8192", env=env)
    deleted = cli("engine", "delete", "chat-8b", env=env)
    assert "engine restore chat-8b" in deleted.stdout
    restored = cli("engine", "restore", "chat-8b", env=env)
    assert "restored the profile deleted" in restored.stdout
    refused = cli("engine", "restore", "chat-8b", env=env, check=False)
    assert refused.returncode == 1 and "has a newer profile" in refused.stderr
    history = cli("engine", "history", "chat-8b", env=env).stdout.splitlines()
    assert [line.split("\t")[1:3] for line in history] == [
        ["cli", "restore"],
        ["cli", "delete"],
        ["cli", "edit"],
        ["cli", "create"],
    ]
    assert history[2].endswith("max_input_len 4,096 → 8,192")
    added = cli("annotate", "deployed vLLM 0.33", "--engine", "chat-8b", env=env)
    note_id = added.stdout.split("\t")[0]
    bad = cli("annotate", "x", "--at", "soon", env=env, check=False)
    assert bad.returncode == 2 and "ISO 8601" in bad.stderr
    long = cli("annotate", "x" * 501, env=env, check=False)
    assert long.returncode == 2 and "at most 500" in long.stderr
    listed = json.loads(cli("annotations", "list", "--json", env=env).stdout)
    assert {a["kind"] for a in listed} == {"note", "profile"}
    assert cli("annotations", "delete", note_id, env=env).stdout.startswith("deleted note")
    again = cli("annotations", "delete", note_id, env=env, check=False)
    assert again.returncode == 1 and "no note has id" in again.stderr
