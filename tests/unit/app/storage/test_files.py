"""Private, durable files (app/storage/files) on a real directory."""

from __future__ import annotations

import logging
import os

import pytest

from app.storage.files import fsync_dir, fsync_file, private_dir, restrict_umask, tighten_and_log
from tests.support.files import mode


def test_fsync_dir_takes_a_directory_and_only_one(tmp_path):
    (tmp_path / "f").write_bytes(b"x")
    fsync_dir(tmp_path)  # a real fsync of a real directory: nothing to observe but no error
    fsync_file(tmp_path / "f")
    with pytest.raises(NotADirectoryError):
        fsync_dir(tmp_path / "f")


def test_a_private_dir_is_0700_whatever_the_umask(tmp_path, usual_umask):
    made = private_dir(tmp_path / "a" / "b")
    assert made.is_dir() and mode(made) == 0o700
    assert mode(tmp_path / "a") == 0o755  # parents are the caller's: as usual
    private_dir(made)  # there already: fine


def test_looser_files_are_tightened_and_named_once(tmp_path, caplog):
    folder, file = tmp_path / "d", tmp_path / "d" / "f"
    folder.mkdir()
    file.write_bytes(b"secret")
    os.chmod(folder, 0o755)
    os.chmod(file, 0o644)
    with caplog.at_level(logging.WARNING, "tokenshape.storage"):
        assert tighten_and_log([folder, file, tmp_path / "missing"]) == [folder, file]
        assert mode(folder) == 0o700 and mode(file) == 0o600
        assert tighten_and_log([folder, file]) == []  # already private: nothing to say
    assert len(caplog.records) == 1 and str(file) in caplog.text


def test_after_restrict_umask_new_files_are_private(tmp_path, usual_umask):
    restrict_umask()
    (tmp_path / "new").write_bytes(b"x")  # as DuckDB makes its WAL: plain open(), mode 0666
    os.mkdir(tmp_path / "dir")
    assert mode(tmp_path / "new") == 0o600 and mode(tmp_path / "dir") == 0o700
    restrict_umask()  # only ever stricter: a stricter umask stays as it is
    assert os.umask(0o077) == 0o077
