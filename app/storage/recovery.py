"""The database file and its WAL checked before the server opens them: a damaged WAL or file
is moved to the quarantine folder with a note, everything readable in it is kept (the longest
run of whole WAL transactions; every table that still reads, on top of the newest readable
backup), and the start goes on (docs/operations.md, "The database file and its WAL")."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypeVar

import duckdb

from app.storage import migrate, quarantine, rollups, wal
from app.storage.backup import backup_dir
from app.storage.database import (
    NEWER_DUCKDB,
    DatabaseLocked,
    DatabaseReadOnly,
    DatabaseTooNew,
    DatabaseUnreadable,
    check_revision,
    check_writable,
    first_line,
    known_revisions,
    revision_of,
    sibling,
    what_it_is,
)
from app.storage.files import PRIVATE_FILE, fsync_dir, fsync_file, restrict_umask
from app.storage.offline import connect
from app.storage.rows import rollback

log = logging.getLogger("tokenshape.database")
T = TypeVar("T")

WAL_SUFFIXES = (".wal", ".checkpoint.wal", ".recovery.wal")  # DuckDB's WAL, and its checkpoint's
_CHUNK = 122_880  # rows copied per statement from a damaged file: DuckDB's row group
_SMALLEST = 2_048  # a damaged chunk is halved down to this (DuckDB's vector) before it is lost
_VIEWS = ".tokenshape-check-"  # temporary directories beside the file, for reading it apart


_Wal = bytes | Literal["real"] | None  # how a check sees the WAL: these bytes, the real files, none


class _Unopenable(Exception):
    """DuckDB cannot open the file (as it would be seen with some WAL): `reason` says why."""


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    # ATTACH takes no bound parameters; the paths are ours (temporary views), quoted all the same.
    return "'" + text.replace("'", "''") + "'"


def recover(path: Path) -> list[quarantine.Damage]:
    """Before the server opens its database: a damaged WAL or file is moved to the quarantine
    folder with a note (ERROR names it, health shows it), everything readable in it is kept,
    and the start goes on. Raises DatabaseTooNew, DatabaseReadOnly or DatabaseLocked (one
    line each, the file untouched); returns what was quarantined."""
    return _Recovery(Path(path)).run()


#####
def _tables(con: duckdb.DuckDBPyConnection, database: str | None = None) -> list[str]:
    where = "database_name = current_database()" if database is None else "database_name = ?"
    rows = con.execute(
        f"SELECT table_name FROM duckdb_tables() WHERE {where} AND schema_name = 'main' "
        "ORDER BY table_name",
        [] if database is None else [database],
    ).fetchall()
    return [r[0] for r in rows]


def _columns(con: duckdb.DuckDBPyConnection, database: str, table: str) -> list[str]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE database_name = ? "
        "AND schema_name = 'main' AND table_name = ? ORDER BY column_index",
        [database, table],
    ).fetchall()
    return [r[0] for r in rows]


def _verify(con: duckdb.DuckDBPyConnection) -> list[str]:
    """What cannot be read: every column of every table is read once, which checks the
    checksum of every block in use (DuckDB reads blocks only when a query needs them, so a
    damaged one would otherwise fail a page or the writer's start much later)."""
    try:
        database = str(con.execute("SELECT current_database()").fetchall()[0][0])
        tables = _tables(con)
    except duckdb.Error as exc:
        return [f"its catalog cannot be read ({first_line(exc)})"]
    problems = []
    for table in tables:
        try:
            cols = _columns(con, database, table)
            reads = ", ".join(f"min(hash({_ident(c)}))" for c in cols)
            con.execute(f"SELECT count(*), {reads} FROM {_ident(table)}").fetchall()
        except duckdb.Error as exc:
            problems.append(f"table {table} cannot be read ({first_line(exc)})")
    return problems


def _count(con: duckdb.DuckDBPyConnection, table: str = "requests") -> int | None:
    try:
        row = con.execute(f"SELECT count(*) FROM {table}").fetchone()
    except duckdb.Error:
        return None
    return int(row[0]) if row else 0


@dataclass
class _Copied:
    """What a rebuilt database took from where."""

    total: int | None = None  # requests in the damaged file (None: its catalog is unreadable)
    from_damaged: int = 0
    unread: int | None = 0  # requests of the damaged file in parts that cannot be read
    from_backup: int = 0
    not_read: list[str] = field(default_factory=list)  # tables (or groups) not read from it
    whole: bool = False  # every table came from the damaged file

    def unreadable(self, rows: int | None) -> None:
        """Count rows of the damaged file that cannot be read (None: uncountable)."""
        self.unread = None if rows is None or self.unread is None else self.unread + rows


@dataclass
class _Backup:
    """The newest readable backup, copied and migrated beside the database."""

    path: Path  # the migrated copy (removed once used)
    name: str
    requests: int


class _Recovery:
    """One start's check of the database file and its WAL, and the repair of what is damaged."""

    def __init__(self, path: Path):
        self.path = path
        self.wal = sibling(path, ".wal")
        self.folder = quarantine.folder_for(path)
        self.found: list[quarantine.Damage] = []
        self.skipped: list[str] = []  # backups that could not be used, and why

    def wal_files(self) -> list[Path]:
        """The WAL and DuckDB's checkpoint WALs beside the file, those that exist."""
        return [p for p in (sibling(self.path, s) for s in WAL_SUFFIXES) if p.exists()]

    def run(self) -> list[quarantine.Damage]:
        """Check, repair, and return what was quarantined; a repair that fails (a full disk,
        say) is one line naming the file, which is left as it was."""
        try:
            return self._run()
        except (DatabaseTooNew, DatabaseReadOnly, DatabaseLocked):
            raise
        except Exception as exc:
            log.exception("recovering %s failed", self.path)
            detail = f"recovering it failed: {first_line(exc)}"
            raise DatabaseUnreadable(self.path, detail) from None

    def _run(self) -> list[quarantine.Damage]:
        restrict_umask()
        self._finish_interrupted()
        if not self.path.exists():
            return []
        check_writable(self.path)
        if self.wal.is_file() and self.wal.stat().st_size:
            problem = wal.layout_of(self.wal.read_bytes()).problem
            if problem is not None:  # DuckDB would drop what follows it without a word
                self._salvage_wal(problem)
        opened, problem = self._check("real")
        if not opened and self.wal.exists() and self._opens(None):
            self._salvage_wal(f"it cannot be replayed ({self._open_error('real')})")
            opened, problem = self._check("real")
        if problem is not None:
            self._replace(problem)
        return self.found

    def _finish_interrupted(self) -> None:
        """Complete a repair a crash cut short: a rebuilt file or a salvaged WAL left ready
        under its temporary name is moved into place; half-made ones are removed."""
        ready = sibling(self.path, ".restored")
        if ready.exists() and not self.path.exists():
            os.replace(ready, self.path)
            fsync_dir(self.path.parent)
        salvaged = sibling(self.path, ".wal.salvaged")
        if salvaged.exists() and not self.wal.exists() and self.path.exists():
            os.replace(salvaged, self.wal)
            fsync_dir(self.path.parent)
        for stale in (".restored", ".wal.salvaged", ".restoring", ".backup-restore"):
            for leftover in (sibling(self.path, stale), sibling(self.path, stale + ".wal")):
                leftover.unlink(missing_ok=True)
        for views in self.path.parent.glob(_VIEWS + "*"):
            shutil.rmtree(views, ignore_errors=True)

    @contextmanager
    def _view(self, wal: _Wal) -> Iterator[Path]:
        """The file as DuckDB would see it with `wal`: as it is (its own WAL files; read-only,
        so nothing is written, which a full disk needs), or with these bytes or no WAL, then
        hard-linked into a private directory beside it, so the real WAL is never touched
        (DuckDB follows a symbolic link to the real file and its WAL; a hard link it cannot)."""
        if wal == "real":
            yield self.path
            return
        with tempfile.TemporaryDirectory(prefix=_VIEWS, dir=self.path.parent) as tmp:
            view = Path(tmp) / self.path.name
            _link(self.path, view)
            if wal:
                sibling(view, ".wal").write_bytes(wal)
            yield view

    def _read(self, wal: _Wal, fn: Callable[[duckdb.DuckDBPyConnection], T]) -> T:
        """`fn` over a read-only connection to the file as seen with `wal`; _Unopenable when
        DuckDB cannot open it (DatabaseLocked and DatabaseTooNew are raised as they are)."""
        with self._view(wal) as view:
            try:
                con = connect(str(view), read_only=True)
            except duckdb.Error as exc:
                text = str(exc)
                if "lock" in text.lower() and ("conflicting" in text or "set lock" in text):
                    raise DatabaseLocked(self.path, text) from None
                if NEWER_DUCKDB in text:
                    raise DatabaseTooNew(self.path, first_line(exc), storage=True) from None
                raise _Unopenable(first_line(text.replace(str(view), str(self.path)))) from None
            try:
                return fn(con)
            finally:
                con.close()

    def _open_error(self, wal: _Wal) -> str:
        try:
            self._read(wal, lambda con: True)
        except _Unopenable as exc:
            return str(exc)
        return "it opens"

    def _opens(self, wal: _Wal) -> bool:
        try:
            return self._read(wal, lambda con: True)
        except _Unopenable:
            return False

    def _check(self, wal: _Wal) -> tuple[bool, str | None]:
        """(whether DuckDB opens the file with `wal`, what is wrong with it or None)."""

        def verify(con: duckdb.DuckDBPyConnection) -> list[str]:
            try:
                check_revision(self.path, con)
            except duckdb.Error:
                pass  # an unreadable alembic_version is listed by _verify
            return _verify(con)

        try:
            problems = self._read(wal, verify)
        except _Unopenable as exc:
            return False, f"it cannot be opened ({what_it_is(self.path)}; DuckDB says: {exc})"
        return True, "; ".join(problems) or None

    # -- a damaged WAL: keep the transactions before the damage --------------------------------

    def _salvage_wal(self, problem: str) -> None:
        """Keep the longest run of whole entries DuckDB replays, quarantine the WAL as it was."""
        data = self.wal.read_bytes()
        # A header that reads but names another database file is never rebuilt: its entries
        # may be another file's (a WAL left behind when a backup was copied into place).
        layout = wal.layout_of(data)
        best = self._longest_replay(layout)
        kept = layout.body[: layout.cuts[best]] if best >= 0 else b""
        before = self._requests(None)
        after = self._requests(kept) if kept else before
        recovered = max(0, after - before) if after is not None and before is not None else 0
        shift = len(layout.body) - len(data)  # a rebuilt header's size against the damaged one's
        cut = layout.cuts[best] - shift if best >= 0 else 0
        if layout.body is not data and best == len(layout.cuts) - 1 and len(data) - cut < 16:
            lost: int | None = 0
            what = f"{problem}; a new header was put before its entries and all of them replayed"
        else:
            # Uncountable here: the requests among them that the journal moved in are stored
            # again after this, by the writer's start (RequestStore._recover logs how many).
            lost = None
            what = (
                f"{problem}; the transactions after byte {cut:,} of its {len(data):,} are lost "
                "(committed after the database's last checkpoint); requests the journal moved "
                "in since then are stored again from it at this start (a segment is kept until "
                "a checkpoint has its rows), any other change among them is lost"
            )
        salvaged = sibling(self.path, ".wal.salvaged")
        if kept:
            _write_private(salvaged, kept)
        companions = [p for p in self.wal_files() if p != self.wal]
        self.found.append(
            quarantine.quarantine(
                self.folder,
                self.wal,
                kind="database WAL",
                problem=what,
                recovered_rows=recovered,
                lost_rows=lost,
                companions=companions,
            )
        )
        if kept:
            os.replace(salvaged, self.wal)
        fsync_dir(self.path.parent)

    def _longest_replay(self, layout: wal.WalLayout) -> int:
        """The index of the last cut up to which DuckDB replays the WAL, or -1: replaying is
        monotone (every prefix before the damage replays), so a bisection finds it."""
        best, lo, hi = -1, 0, len(layout.cuts) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self._opens(layout.body[: layout.cuts[mid]]):
                best, lo = mid, mid + 1
            else:
                hi = mid - 1
        return best

    def _requests(self, wal: bytes | None) -> int | None:
        try:
            return self._read(wal, _count)
        except _Unopenable:
            return None

    # -- a damaged file: rebuild it from what reads, a backup and a fresh schema ---------------

    def _replace(self, problem: str) -> None:
        """Build a new file from the newest readable backup (else an empty one at the newest
        revision) and every table or part of one that still reads in the damaged file, then
        quarantine the damaged file with its WAL and put the new one in its place."""
        backup = self._newest_backup()
        fresh = sibling(self.path, ".restoring")
        migrate.upgrade(fresh)
        con = connect(str(fresh))
        try:
            with self._view("real" if self._opens("real") else None) as view:
                try:
                    con.execute(f"ATTACH {_literal(str(view))} AS damaged (READ_ONLY)")
                    attached = True
                except duckdb.Error:
                    attached = False
                if backup is not None:
                    con.execute(f"ATTACH {_literal(str(backup.path))} AS restored (READ_ONLY)")
                copied = _copy_all(con, attached, backup is not None)
                for alias, there in (("damaged", attached), ("restored", backup is not None)):
                    if there:
                        con.execute(f"DETACH {alias}")
            con.execute("CHECKPOINT")
        finally:
            con.close()
        if backup is not None:
            backup.path.unlink(missing_ok=True)
        os.chmod(fresh, PRIVATE_FILE)
        fsync_file(fresh)
        ready = sibling(self.path, ".restored")
        os.replace(fresh, ready)
        fsync_dir(self.path.parent)
        self.found.append(
            quarantine.quarantine(
                self.folder,
                self.path,
                kind="database file",
                problem=self._what_was_done(problem, attached, backup, copied),
                recovered_rows=copied.from_damaged + copied.from_backup,
                lost_rows=copied.unread if attached else None,
                companions=self.wal_files(),
            )
        )
        os.replace(ready, self.path)
        fsync_dir(self.path.parent)

    def _what_was_done(
        self, problem: str, attached: bool, backup: _Backup | None, copied: _Copied
    ) -> str:
        parts = [problem]
        if not attached:
            parts.append("nothing in it could be read")
        elif copied.whole:
            parts.append(f"every table was read from it ({copied.from_damaged:,} requests)")
        else:
            unread = "an uncountable number" if copied.unread is None else f"{copied.unread:,}"
            total = "?" if copied.total is None else f"{copied.total:,}"
            parts.append(
                f"{copied.from_damaged:,} of its {total} requests were read, {unread} were in "
                "unreadable parts (counted as lost, though the backup may hold some of them); "
                f"not read from it: {', '.join(copied.not_read) or 'nothing'}"
            )
        if backup is not None and not copied.whole:
            parts.append(
                f"the backup {backup.name} was restored under it ({copied.from_backup:,} "
                "requests from it); what changed after it and could not be read is lost"
            )
        elif not copied.whole:
            parts.append("no readable backup in backups/: what could not be read is lost")
        if not copied.whole:
            parts.append("journaled requests not yet stored are replayed on top")
        if self.skipped:
            parts.append(f"backups not usable: {'; '.join(self.skipped)}")
        return "; ".join(parts)

    def _newest_backup(self) -> _Backup | None:
        """The newest backup of this database that opens, reads whole and has a revision this
        code knows, copied beside the database and migrated to the newest revision."""
        folder = backup_dir(self.path)
        if not folder.is_dir():
            return None
        found = sorted(
            folder.glob(f"{self.path.stem}-*.duckdb"),
            key=lambda p: (p.stat().st_mtime, p.name),
            reverse=True,
        )
        for candidate in found:
            try:
                con = connect(str(candidate), read_only=True)
            except duckdb.Error as exc:
                self.skipped.append(f"{candidate.name} ({first_line(exc)})")
                continue
            try:
                revision = revision_of(con)
                problems = _verify(con)
                requests = _count(con) or 0
            except duckdb.Error as exc:
                problems, revision, requests = [first_line(exc)], None, 0
            finally:
                con.close()
            if revision is not None and revision not in known_revisions():
                problems.append(f"schema revision {revision!r} is newer than this tokenshape")
            if problems:
                self.skipped.append(f"{candidate.name} ({'; '.join(problems)})")
                continue
            copy = sibling(self.path, ".backup-restore")
            shutil.copyfile(candidate, copy)
            os.chmod(copy, PRIVATE_FILE)
            if revision != migrate.head_revision():
                migrate.upgrade(copy)
            return _Backup(copy, candidate.name, requests)
        return None


def _link(source: Path, target: Path) -> None:
    """`target` as another name of `source`; a copy where the file system has no hard links."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copyfile(source, target)


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def _insert(
    con: duckdb.DuckDBPyConnection, table: str, source: str, where: str = "", anti: str = ""
) -> int:
    """Copy `source`.`table` into the new file's table, by the columns both have; how many."""
    mine = _columns(con, str(con.execute("SELECT current_database()").fetchall()[0][0]), table)
    theirs = set(_columns(con, source, table))
    if not theirs:
        return 0  # an older file without this table
    cols = ", ".join(_ident(c) for c in mine if c in theirs)
    picked = f"SELECT {cols} FROM {source}.{_ident(table)} {where}"
    if anti:
        picked = f"SELECT s.* FROM ({picked}) s ANTI JOIN main.{_ident(table)} r ON {anti}"
    row = con.execute(f"INSERT INTO {_ident(table)} ({cols}) {picked}").fetchone()
    return int(row[0]) if row else 0


def _fill(con: duckdb.DuckDBPyConnection, group: list[str], sources: list[str]) -> str | None:
    """Fill the tables of `group` together from the first source where all of them read."""
    for source in sources:
        con.execute("BEGIN TRANSACTION")
        try:
            for table in group:
                _insert(con, table, source)
            con.execute("COMMIT")
            return source
        except duckdb.Error:
            rollback(con)
    return None


def _copy_all(con: duckdb.DuckDBPyConnection, damaged: bool, restored: bool) -> _Copied:
    """Every table of the new file, from the damaged file where it reads, else the backup."""
    copied = _Copied()
    sources = [s for s, there in (("damaged", damaged), ("restored", restored)) if there]
    tables = [t for t in _tables(con) if t != "alembic_version"]
    rollup_group = [t for t in tables if t.startswith("rollup_")]
    whole = damaged
    for table in [t for t in tables if t not in rollup_group and t != "requests"]:
        if _fill(con, [table], sources) != "damaged" and damaged:
            copied.not_read.append(table)
            whole = False
    # Rollups are one unit: cells from two files would not add up to either one's raw rows.
    rollups_from = _fill(con, rollup_group, sources) if rollup_group else "damaged"
    if rollups_from != "damaged" and damaged:
        copied.not_read.append("rollups")
        whole = False
    if "requests" in tables:
        full = damaged and _copy_requests(con, copied)
        whole = whole and full
        if restored and not full:
            copied.from_backup = _from_backup(con)
        if not (full and rollups_from == "damaged"):
            # Whatever the mix, the rollups are rebuilt from the raw rows now stored.
            con.execute("BEGIN TRANSACTION")
            try:
                rollups.mark_inserted(con, "requests")
                con.execute("COMMIT")
            except BaseException:
                rollback(con)
                raise
    copied.whole = whole
    return copied


def _copy_requests(con: duckdb.DuckDBPyConnection, copied: _Copied) -> bool:
    """Requests from the damaged file, in chunks by row id, halving an unreadable chunk until
    what is lost is the damaged blocks' rows only; True when every one was read."""
    copied.total = _count(con, "damaged.requests")
    try:
        row = con.execute("SELECT max(rowid) FROM damaged.requests").fetchone()
        end = int(row[0]) + 1 if row and row[0] is not None else 0
    except duckdb.Error:
        copied.unreadable(copied.total)
        copied.not_read.append("requests")
        return False
    complete = True

    def take(lo: int, hi: int) -> None:
        nonlocal complete
        con.execute("BEGIN TRANSACTION")
        try:
            copied.from_damaged += _insert(
                con, "requests", "damaged", f"WHERE rowid >= {lo} AND rowid < {hi}"
            )
            con.execute("COMMIT")
            return
        except duckdb.Error:
            rollback(con)
        if hi - lo > _SMALLEST:
            mid = lo + (hi - lo) // 2
            take(lo, mid)
            take(mid, hi)
            return
        complete = False
        copied.unreadable(_count(con, f"damaged.requests WHERE rowid >= {lo} AND rowid < {hi}"))

    for start in range(0, end, _CHUNK):
        take(start, min(start + _CHUNK, end))
    if not complete:
        copied.not_read.append("part of requests")
    return complete


def _from_backup(con: duckdb.DuckDBPyConnection) -> int:
    """The backup's requests that are not stored yet, except in hours the rollups hold sealed
    (their raw rows were counted into the rollups and pruned since the backup)."""
    sealed = ""
    if "rollup_hours" in _tables(con):
        sealed = (
            f"WHERE {rollups.UTC_HOUR} NOT IN "
            "(SELECT hour FROM main.rollup_hours WHERE source = 'sealed')"
        )
    con.execute("BEGIN TRANSACTION")
    try:
        n = _insert(
            con,
            "requests",
            "restored",
            sealed,
            anti="r.gateway = s.gateway AND r.request_id = s.request_id",
        )
        con.execute("COMMIT")
    except BaseException:
        rollback(con)
        raise
    return n
