"""The journal's files on disk: a private directory, private segments, old loose ones fixed.

Each new segment's directory entry is fsynced before its first rows are acknowledged (see
Journal.append). That an fsync reached the disk cannot be observed short of cutting the
power, so what is tested is what can be: the helper works on a real directory
(tests/unit/app/storage/test_files.py) and the journal still appends, reads and rotates."""

from __future__ import annotations

import logging
import os

from app.storage.schema import REQUESTS_SCHEMA
from app.storage.write.journal import Journal
from tests.support.files import mode
from tests.support.records import request_rows


def test_a_new_journal_is_private(tmp_path, usual_umask):
    journal = Journal(tmp_path / "t.duckdb.journal", REQUESTS_SCHEMA)
    assert mode(journal.directory) == 0o700
    journal.append(request_rows(["a", "b"]))
    (segment,) = journal.segments()
    assert mode(segment) == 0o600
    journal.append(request_rows(["c"]))  # the same segment, still private
    assert journal.rotate() == [segment]
    journal.append(request_rows(["d"]))  # a second segment: private from its creation
    second = journal.segments()[-1]
    assert second != segment and mode(second) == 0o600
    journal.close()
    table = Journal.read(segment)
    assert table is not None and table.num_rows == 3


def test_a_journal_left_loose_by_an_older_version_is_tightened(tmp_path, usual_umask, caplog):
    folder = tmp_path / "t.duckdb.journal"
    old = Journal(folder, REQUESTS_SCHEMA)
    old.append(request_rows(["a"]))
    old.close()
    (segment,) = old.segments()
    os.chmod(folder, 0o755)  # as the version before this one left them
    os.chmod(segment, 0o644)
    with caplog.at_level(logging.WARNING, "tokenshape.storage"):
        journal = Journal(folder, REQUESTS_SCHEMA)
    assert mode(folder) == 0o700 and mode(segment) == 0o600
    assert "readable by their owner only" in caplog.text and str(segment) in caplog.text
    assert journal.segments() == [segment]
