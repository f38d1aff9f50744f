"""Files that hold secrets, kept durable and private: directory fsyncs and owner-only modes.

The database, its WAL, the ingest journal and the backups hold password hashes, token hashes
and the cookie-signing key, so they are readable by their owner only (files 0600, directories
0700). A file's fsync makes its bytes durable but not its name: a new, renamed or deleted entry
is durable only once its directory is fsynced too.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Iterable
from pathlib import Path

log = logging.getLogger("tokenshape.storage")

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_OTHERS = 0o077  # group and world bits


def fsync_dir(path: Path) -> None:
    """Make the entries of the directory `path` (files created, renamed or deleted) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path: Path) -> None:
    """Make the bytes of the file `path` durable (its name needs fsync_dir of its folder)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def restrict_umask() -> None:
    """Take group and world bits out of the process's umask, for good, so files that DuckDB
    creates by itself later are private too: the WAL is deleted at every checkpoint and created
    again by the next write, where a chmod after the fact cannot follow it.

    The umask is process-wide, so it is never loosened again (a save-and-restore around one
    creation would race with other threads' files); the value between the two calls is the
    strictest one, so no thread ever sees a looser mask than before."""
    old = os.umask(_OTHERS)
    os.umask(old | _OTHERS)


def private_dir(path: Path) -> Path:
    """Create the directory `path` as 0700 (its parents as usual) and make its entry durable;
    an existing one is left as it is (see tighten)."""
    path = Path(path)
    if not path.is_dir():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            pass  # made meanwhile by another thread or process
        else:
            os.chmod(path, PRIVATE_DIR)  # mkdir's mode goes through the umask
            fsync_dir(path.parent)
    return path


def tighten(paths: Iterable[Path]) -> list[Path]:
    """Take the group and world bits off each existing path (files 0600, directories 0700 when
    they were the usual 0644 / 0755); returns the paths that were looser, for one log line."""
    loose = []
    for path in paths:
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            continue
        if stat.S_IMODE(mode) & _OTHERS:
            try:
                os.chmod(path, stat.S_IMODE(mode) & ~_OTHERS)
            except PermissionError:  # another user's file: say so, it is theirs to fix
                log.warning("%s is readable by others and not ours to chmod", path)
                continue
            loose.append(Path(path))
    return loose


def tighten_and_log(paths: Iterable[Path]) -> list[Path]:
    """tighten, and say once which files were readable by others (they held secrets)."""
    loose = tighten(paths)
    if loose:
        log.warning(
            "made %d file(s) holding secrets readable by their owner only (they were readable "
            "by others): %s",
            len(loose),
            ", ".join(str(p) for p in loose),
        )
    return loose
