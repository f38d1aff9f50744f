"""The one DuckDB instance of the process: opening, migrating, and per-thread read cursors.

Before the server opens it, app/storage/recovery checks the file and its WAL, and quarantines
and rebuilds what is damaged (docs/operations.md, "The database file and its WAL").

The file holds password hashes and the cookie-signing key: it and its WAL are 0600 (see
app/storage/files), and one made looser by an older version is tightened when it is opened.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import stat
import threading
from pathlib import Path
from typing import TypeVar

import duckdb
from alembic.config import Config
from alembic.script import ScriptDirectory

from app import __version__
from app.storage import migrate
from app.storage.backup import backup_dir
from app.storage.files import (
    fsync_dir,
    restrict_umask,
    tighten_and_log,
)
from app.storage.offline import connect

log = logging.getLogger("tokenshape.database")
T = TypeVar("T")


class DatabaseLocked(RuntimeError):
    """Another process (usually a running `tokenshape serve`) holds the database file."""

    def __init__(self, path: Path, detail: str):
        holder = re.search(r"PID (\d+)", detail)
        who = f"process {holder.group(1)}" if holder else "another process"
        super().__init__(
            f"{path} is in use by {who} (a running tokenshape server?). "
            "Stop it first, or send the data over HTTP instead: POST /v1/requests."
        )


class DatabaseUnreadable(RuntimeError):
    """The database file exists but cannot be opened as DuckDB: damaged, truncated, empty,
    another format, or of a newer DuckDB."""

    def __init__(self, path: Path, detail: str):
        kind = what_it_is(path)
        first = detail.strip().splitlines()[0] if detail.strip() else "unknown error"
        super().__init__(
            f"{path} cannot be opened as a tokenshape database ({kind}; DuckDB says: {first}). "
            "If TOKENSHAPE_DB points at the wrong file, fix it; if the file is damaged, "
            "`tokenshape serve` moves it and its .wal to the quarantine folder and restores the "
            "newest readable backup from backups/ by itself, or do it by hand (the journal "
            "beside it replays what was acknowledged since; docs/operations.md, Restore)."
        )


class DatabaseTooNew(RuntimeError):
    """The file was written by a newer tokenshape (a schema revision this code does not know)
    or a newer DuckDB: not damaged, so left as it is, and not opened."""

    def __init__(self, path: Path, found: str, *, storage: bool = False):
        if storage:
            what = f"was written by a newer DuckDB than this tokenshape's (DuckDB says: {found})"
        else:
            what = (
                f"is at schema revision {found!r}, which tokenshape {__version__} does not know "
                f"(its newest is {migrate.head_revision()!r}): a newer tokenshape wrote it"
            )
        super().__init__(
            f"{path} {what}. Upgrade tokenshape to the version that wrote it (or a later one), "
            "or restore a backup this version wrote (docs/operations.md, Restore); the file is "
            "left as it is."
        )


class DatabaseReadOnly(RuntimeError):
    """The database file (or its directory, or its WAL) cannot be written by this process."""

    def __init__(self, path: Path, target: Path):
        uid = os.geteuid()
        super().__init__(
            f"{path} cannot be written: {_why_not_writable(target)}; tokenshape writes its "
            "database (ingest, logins, the journal's moves) and does not start on one it "
            f"cannot write. Fix it (e.g. `chown {uid} {target}` or `chmod u+w {target}`, or "
            "mount the volume read-write) and start again; nothing was changed."
        )


def _why_not_writable(target: Path) -> str:
    try:
        st = target.stat()
        if os.statvfs(target).f_flag & os.ST_RDONLY:
            return f"{target} is on a read-only file system"
    except OSError as exc:
        return f"{target} cannot be examined ({exc.strerror})"
    return (
        f"{target} is {stat.filemode(st.st_mode)} owned by uid {st.st_uid} and this process "
        f"runs as uid {os.geteuid()} (or the file is marked immutable: lsattr)"
    )


def check_writable(path: Path) -> None:
    """Raise DatabaseReadOnly unless the file, its directory and its WAL can be written."""
    for target in (path, path.parent, sibling(path, ".wal")):
        if target.exists() and not os.access(target, os.W_OK):
            raise DatabaseReadOnly(path, target)


@functools.cache
def known_revisions() -> frozenset[str]:
    """Every schema revision this code's migrations know (the head and all before it)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(migrate.MIGRATIONS_DIR))
    return frozenset(s.revision for s in ScriptDirectory.from_config(cfg).walk_revisions())


def revision_of(con: duckdb.DuckDBPyConnection) -> str | None:
    """The file's schema revision; None when it has none (never migrated)."""
    try:
        rows = con.execute("SELECT version_num FROM alembic_version").fetchall()
    except duckdb.CatalogException:
        return None
    return str(rows[0][0]) if len(rows) == 1 else None


def check_revision(path: Path, con: duckdb.DuckDBPyConnection) -> str | None:
    """The file's revision; raises DatabaseTooNew when this code does not know it."""
    revision = revision_of(con)
    if revision is not None and revision not in known_revisions():
        raise DatabaseTooNew(path, revision)
    return revision


def what_it_is(path: Path) -> str:
    """The file's format from its first bytes, for the one line an operator reads."""
    try:
        with path.open("rb") as f:
            head = f.read(16)
        size = path.stat().st_size
    except OSError as exc:
        return f"unreadable: {exc.strerror}"
    if size == 0:
        return "the file is empty"
    if head.startswith(b"SQLite format 3"):
        return "it is a SQLite file"
    if head.startswith(b"PAR1"):
        return "it is a Parquet file"
    if head[8:12] == b"DUCK":
        return f"a DuckDB file of {size:,} bytes, damaged, truncated or from a newer DuckDB"
    return f"not a DuckDB file: {size:,} bytes without DuckDB's header"


class Database:
    """Owns the DuckDB connection; hands out one cursor per thread for reads."""

    def __init__(self, path: Path, *, read_only: bool = False):
        self.path = Path(path)
        self.read_only = read_only
        self._con: duckdb.DuckDBPyConnection | None = None
        self._local = threading.local()
        self._cursors: list[duckdb.DuckDBPyConnection] = []
        self._lock = threading.Lock()
        self.revision = ""

    def open(self, *, run_migrations: bool = True) -> Database:
        """Migrate (unless read-only) and open the file; raises DatabaseLocked if it is held."""
        restrict_umask()  # before DuckDB makes the file, its WAL or a spill file: all private
        created = not self.path.exists()
        if not self.read_only:
            check_writable(self.path)
        try:
            if run_migrations and not self.read_only:
                self._con = self._connect_if_current()
                if self._con is None:
                    self.revision = migrate.upgrade(self.path)
            if self._con is None:
                self._con = connect(str(self.path), read_only=self.read_only)
                if self.read_only or not run_migrations:
                    self.revision = check_revision(self.path, self._con) or ""
        except DatabaseTooNew:
            self.close()
            raise
        except duckdb.IOException as exc:
            if "lock" in str(exc).lower():
                raise DatabaseLocked(self.path, str(exc)) from None
            if NEWER_DUCKDB in str(exc):
                raise DatabaseTooNew(self.path, first_line(exc), storage=True) from None
            if self.path.is_file():
                raise DatabaseUnreadable(self.path, str(exc)) from None
            raise
        except Exception as exc:  # SQLAlchemy wraps DuckDB's lock error during migration
            if "lock" in str(exc).lower() and "conflicting" in str(exc).lower():
                raise DatabaseLocked(self.path, str(exc)) from None
            if NEWER_DUCKDB in str(exc):
                raise DatabaseTooNew(self.path, first_line(exc), storage=True) from None
            if isinstance(getattr(exc, "orig", exc), duckdb.Error) and self.path.is_file():
                detail = str(getattr(exc, "orig", exc))
                raise DatabaseUnreadable(self.path, detail.split("] ", 1)[-1]) from None
            raise
        if created and self.path.exists():
            fsync_dir(self.path.parent)  # the new file's name is durable, not only its bytes
        if not self.read_only:
            self._tighten()
        return self

    def _tighten(self) -> None:
        """Make the file, its WAL and the backups beside it owner-only if they were not."""
        backups = backup_dir(self.path)
        tighten_and_log(
            [
                self.path,
                self.path.with_name(self.path.name + ".wal"),
                backups,
                *(sorted(backups.glob("*.duckdb")) if backups.is_dir() else []),
            ]
        )

    def _connect_if_current(self) -> duckdb.DuckDBPyConnection | None:
        """The file's connection when it is at the newest revision already, where Alembic would
        change nothing (its run costs ~40 ms at every start and command); else None, and the
        migration runs as always, with its own errors for a locked or damaged file."""
        if not self.path.is_file():
            return None
        try:
            con = connect(str(self.path))
        except duckdb.Error:
            return None
        try:
            revision = check_revision(self.path, con)
            if revision == migrate.head_revision():
                self.revision = revision
                return con
        except duckdb.Error:  # damaged: the migration's own open names it
            pass
        except DatabaseTooNew:
            con.close()
            raise
        con.close()
        return None

    @property
    def is_open(self) -> bool:
        """True between open() and close()."""
        return self._con is not None

    @property
    def connection(self) -> duckdb.DuckDBPyConnection:
        """The root connection; only the writer (or a CLI bulk load) writes through it."""
        if self._con is None:
            raise RuntimeError("database is not open")
        return self._con

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """A cursor private to the calling thread (DuckDB connections are not thread-safe)."""
        cur = getattr(self._local, "cursor", None)
        if cur is None:
            cur = self.connection.cursor()
            self._local.cursor = cur
            with self._lock:
                self._cursors.append(cur)
        return cur

    def new_cursor(self) -> duckdb.DuckDBPyConnection:
        """A fresh connection to the same instance, for a thread that owns it (the writer)."""
        return self.connection.cursor()

    def close(self) -> None:
        """Close every cursor and the instance (checkpoints the WAL)."""
        with self._lock:
            for cur in self._cursors:
                try:
                    cur.close()
                except duckdb.Error:
                    pass
            self._cursors.clear()
        if self._con is not None:
            self._con.close()
            self._con = None
        self._local = threading.local()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


NEWER_DUCKDB = "Trying to read a database file with version number"


def first_line(exc: BaseException | str) -> str:
    """The first line of a DuckDB error, its WAL path shortened, for the one line shown."""
    text = re.sub(r'Failure while replaying WAL file "([^"]*)": ', r"replaying \1: ", str(exc))
    return (text.strip().splitlines() or [type(exc).__name__])[0][:300]


def sibling(path: Path, suffix: str) -> Path:
    """The file beside `path` named with `suffix` appended (its WAL, say)."""
    return path.with_name(path.name + suffix)
