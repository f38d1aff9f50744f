"""Backups and restores: an online copy while ingest goes on, stop-and-copy, and a server that
serves the restored file (tokens, dedupe and all), as docs/operations.md describes them."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.support import http
from tests.support.cli import clean_env, cli
from tests.support.files import mode, usual_umask
from tests.support.paths import ROOT
from tests.support.records import batch
from tests.support.server import serve, server_settings


def _restore(backup: Path, db: Path) -> None:
    """The documented restore, with the server stopped: the old file and its WAL moved aside
    (the WAL belongs to the old file), the backup copied into the file's place."""
    aside = db.parent / "before-restore"
    aside.mkdir()
    for old in (db, db.with_name(db.name + ".wal")):
        if old.exists():
            old.rename(aside / old.name)
    shutil.copyfile(backup, db)


def test_an_online_backup_during_ingest_restores_into_a_serving_server(settings):
    gen = serve(settings)
    live = next(gen)
    try:
        ingest, admin = live.token("ingest"), live.token("admin")
        with live.client(ingest) as c:
            assert c.post("/v1/requests", json=batch(300, "before")).status_code == 200
        codes: list[int] = []
        stop = threading.Event()

        def keep_shipping() -> None:
            with live.client(ingest) as c:
                k = 0
                while not stop.is_set():
                    codes.append(c.post("/v1/requests", json=batch(50, f"during{k}")).status_code)
                    k += 1

        shipper = threading.Thread(target=keep_shipping)
        shipper.start()
        try:
            deadline = time.monotonic() + 30
            while not codes and time.monotonic() < deadline:  # ingest is flowing first
                time.sleep(0.01)
            with live.client(admin) as c:
                r = c.post("/api/admin/backup")
            shipped = len(codes)
            while len(codes) == shipped and time.monotonic() < deadline:  # and after it
                time.sleep(0.01)
        finally:
            stop.set()
            shipper.join()
        assert r.status_code == 200, r.text
        out = r.json()
        path = Path(out["path"])
        assert path.parent == settings.db.parent / "backups" and path.exists()
        assert out["bytes"] == path.stat().st_size and out["requests"] >= 300
        assert sorted(p.name for p in path.parent.iterdir()) == [path.name]  # no .partial/.wal
        assert codes and set(codes) == {200}  # ingest went on during the copy
        with live.client(ingest) as c:
            denied = c.post("/api/admin/backup")
        assert denied.status_code == 403 and "needs an admin token" in denied.json()["detail"]
        assert http.post(live.url + "/api/admin/backup").status_code == 401
    finally:
        gen.close()

    _restore(path, settings.db)
    gen = serve(settings)
    live = next(gen)
    try:
        # Exactly the snapshot: what the backup counted, the first batch whole.
        assert live.scalar("SELECT count(*) FROM requests") == out["requests"]
        assert live.scalar("SELECT count(*) FROM requests WHERE request_id LIKE 'before-%'") == 300
        health = http.get(live.url + "/api/health").json()
        assert health["database"]["requests"] == out["requests"]
        with live.client(ingest) as c:  # the restored tokens work; dedupe knows the rows
            again = c.post("/v1/requests", json=batch(300, "before")).json()
            assert again["accepted"] == 0 and again["duplicates"] == 300
            assert c.post("/v1/requests", json=batch(5, "after")).json()["accepted"] == 5
    finally:
        gen.close()


def test_stop_and_copy_restores_too(settings, tmp_path):
    gen = serve(settings)
    live = next(gen)
    try:
        token = live.token("ingest")
        with live.client(token) as c:
            assert c.post("/v1/requests", json=batch(120, "s")).status_code == 200
    finally:
        gen.close()  # stop first: one process owns the file while it runs
    # Backup: the file, its WAL and its journal directory, copied together while stopped.
    saved = tmp_path / "saved"
    names = [settings.db.name + s for s in ("", ".wal", ".journal")]
    saved.mkdir()
    for name in names:
        source = settings.db.parent / name
        if source.is_dir():
            shutil.copytree(source, saved / name)
        elif source.exists():
            shutil.copy2(source, saved / name)
    # Loss, then restore: everything of the database replaced by the copies.
    for name in names:
        lost = settings.db.parent / name
        shutil.rmtree(lost) if lost.is_dir() else lost.unlink(missing_ok=True)
    for copy in saved.iterdir():
        target = settings.db.parent / copy.name
        shutil.copytree(copy, target) if copy.is_dir() else shutil.copy2(copy, target)
    gen = serve(settings)
    live = next(gen)
    try:
        assert live.scalar("SELECT count(*) FROM requests") == 120
        with live.client(token) as c:
            assert c.post("/v1/requests", json=batch(120, "s")).json()["duplicates"] == 120
    finally:
        gen.close()


def test_the_backup_command_online_and_offline(settings):
    gen = serve(settings)
    live = next(gen)
    try:
        with live.client(live.token("ingest")) as c:
            assert c.post("/v1/requests", json=batch(40, "c")).status_code == 200
        live.settle()
        admin = live.token("admin")
        online = cli("backup", "--url", live.url, "--token", admin, check=False)
        assert online.returncode == 0, online.stderr
        assert "backup written by the server:" in online.stdout and "40 requests" in online.stdout
        held = cli("backup", "--db", str(settings.db), check=False)
        assert held.returncode == 2 and "tokenshape backup --url" in held.stderr
        wrong = cli("backup", "--url", live.url, "--token", live.token("read"), check=False)
        assert wrong.returncode == 1 and "403" in wrong.stderr
    finally:
        gen.close()
    offline = cli("backup", "--db", str(settings.db), check=False)
    assert offline.returncode == 0, offline.stderr
    assert "backup written:" in offline.stdout and "40 requests" in offline.stdout
    files = sorted((settings.db.parent / "backups").iterdir())
    assert len(files) == 2 and all(p.suffix == ".duckdb" for p in files)


def test_files_holding_secrets_are_private_whatever_the_umask(tmp_path, caplog):
    db = tmp_path / "data" / "fresh.duckdb"
    migrate = [sys.executable, "-m", "app.cli", "migrate", "--db", str(db)]
    # A login shell's usual umask, under which DuckDB's own files come out 0644.
    done = subprocess.run(
        migrate, cwd=ROOT, env=clean_env(), umask=0o022, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert mode(db) == 0o600
    # What an older version left: a world-readable file and backups.
    os.chmod(db, 0o644)
    old_backups = db.parent / "backups"
    old_backups.mkdir(mode=0o755)
    os.chmod(old_backups, 0o755)
    old_backup = old_backups / "fresh-20260101T000000Z.duckdb"
    shutil.copyfile(db, old_backup)
    os.chmod(old_backup, 0o644)
    with usual_umask():  # the server runs in this process: under the usual umask too
        with caplog.at_level(logging.WARNING, "tokenshape.storage"):
            gen = serve(server_settings(db))
            live = next(gen)
        try:
            assert mode(db) == 0o600  # tightened at start, and said so once
            assert mode(old_backups) == 0o700 and mode(old_backup) == 0o600
            assert "readable by their owner only" in caplog.text
            assert str(old_backup) in caplog.text
            with live.client(live.token("ingest")) as c:
                assert c.post("/v1/requests", json=batch(30, "m")).status_code == 200
            live.settle()
            wal = db.with_name(db.name + ".wal")  # made by DuckDB after the last checkpoint
            assert wal.exists() and mode(wal) == 0o600
            assert mode(db.with_name(db.name + ".journal")) == 0o700
            with live.client(live.token("admin")) as c:
                r = c.post("/api/admin/backup")
            assert r.status_code == 200, r.text
            assert mode(Path(r.json()["path"])) == 0o600
        finally:
            gen.close()
