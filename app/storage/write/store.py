"""Storing batches: dedupe on (gateway, request_id), then the journal or one INSERT per flush."""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from app.storage import quarantine, rollups
from app.storage.batches import Batch, WriteResult, rejects_table
from app.storage.database import sibling
from app.storage.rows import first_row, rollback
from app.storage.schema import REQUEST_COLUMNS, conform_requests
from app.storage.write.journal import Journal, Salvage
from app.storage.write.keys import KeyIndex, key_hashes, stored_key_hashes

_COLS = ", ".join(REQUEST_COLUMNS)
log = logging.getLogger("tokenshape.store")

# Moved segments are kept until a checkpoint puts their rows in the database file (before it,
# a damaged WAL loses them). DuckDB checkpoints by itself every 16 MB of WAL, but a move of a
# whole row group writes its rows to the file's blocks and little WAL, so under steady ingest
# that may take long: past either bound the mover asks for a checkpoint itself.
KEEP_BYTES = 64 * 1024 * 1024
KEEP_S = 300.0
# Rows of hours sealed into the rollups (retention removed their raw rows; a late row is added
# to them and deleted), as a moved segment's rows replayed must skip them: counted already.
_UNSEALED = f"{rollups.UTC_HOUR} NOT IN (SELECT hour FROM rollup_hours WHERE source = 'sealed')"


def _disk_full(exc: BaseException) -> bool:
    text = str(exc)
    return "No space left on device" in text or "Disk quota exceeded" in text


def _line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]


WalFiles = tuple[tuple[int, int], ...]  # (inode, size) of each of DuckDB's WAL files there is


@dataclass
class _Kept:
    """Moved segments waiting for a checkpoint, and where their rows may be until then."""

    paths: list[Path]
    wal: WalFiles | None  # the WAL files right after their COMMIT (None: could not be read)
    since: float  # time.monotonic() of the move
    nbytes: int

    def checkpointed(self, now: WalFiles | None) -> bool:
        """Whether a checkpoint has run since: every WAL file that could hold their commit is
        gone, or shorter than it was (DuckDB deletes or replaces the WAL when a checkpoint
        ends; commits during one go to `.checkpoint.wal`, which then becomes the WAL, so it
        is watched too). Never true by mistake: a file that grew again past the size seen (a
        new WAL with a reused inode) only keeps segments until the next checkpoint."""
        if self.wal is None or now is None:
            return False
        return not any(i == ino and n >= size for ino, size in self.wal for i, n in now)


@dataclass(frozen=True)
class Screened:
    """What `RequestStore.screen` found: each batch's key hashes (None: no rows), and whether
    every row of the flush is new."""

    hashes: list[np.ndarray | None]
    all_new: bool


class PartlyStored(Exception):
    """A flush's valid rows were made durable, but keeping its rejects failed: the senders
    must hear that their valid records are stored (a resend counts them as duplicates)."""

    def __init__(self, cause: Exception, batches: list[Batch], results: list[WriteResult]):
        super().__init__(str(cause))
        self.cause = cause
        self._results = {id(b): r for b, r in zip(batches, results, strict=True)}

    def result_for(self, batch: Batch) -> WriteResult | None:
        """What was stored of one of the flush's batches."""
        return self._results.get(id(batch))


class RequestStore:
    """Writes batches through one connection; keeps the dedupe index in step with what is durable.

    With a journal (the server's writer), accepted rows are durable once appended to it and
    `move` later inserts them into DuckDB in large transactions; without one (CLI imports, the
    demo), each write is one DuckDB transaction."""

    def __init__(
        self, con: duckdb.DuckDBPyConnection, raw_chars: int = 4096, journal: Journal | None = None
    ):
        self.con = con
        self.raw_chars = raw_chars
        self.journal = journal
        self._lock = threading.Lock()
        self._pending: list[pa.Table] = []  # journaled, not yet in DuckDB
        self._moving: list[pa.Table] = []  # being inserted into DuckDB now
        self._segments: list = []  # closed journal segments whose rows are not in DuckDB yet
        self._kept: list[_Kept] = []  # moved segments, until a checkpoint (the mover's)
        self._checkpoint_error: str | None = None  # the last failed checkpoint's, said once
        self.keep_bytes, self.keep_s = KEEP_BYTES, KEEP_S  # past either, the mover checkpoints
        self.moved_rows = 0  # rows moved from the journal into DuckDB since start
        self.damage: list[quarantine.Damage] = []  # segments quarantined at start
        self._file = _database_file(con)
        self._wal_paths = _wal_paths(self._file)
        if journal is not None:
            self.recovered = self._recover(journal)
        self.keys = KeyIndex(stored_key_hashes(con))
        self._recorded: list[np.ndarray] | None = None  # hashes added while a reindex runs
        self._unindexed: list[np.ndarray] = []  # durable, not in `keys` yet: see index_later

    def _remember(self, hashes: np.ndarray) -> None:
        """Add the hashes of rows just made durable; `write` kept only rows that are new."""
        self.keys.add(hashes, known_new=True)
        if self._recorded is not None:
            self._recorded.append(hashes)

    def index_pending(self) -> None:
        """Add to the index what `write(index_later=True)` left out (writer thread)."""
        while self._unindexed:
            self._remember(self._unindexed[0])
            # Taken off only once indexed: while it is listed, screen() never says all-new.
            self._unindexed.pop(0)

    # Rebuilding the dedupe index after a prune, so it forgets deleted keys (else it grows
    # 16-32 bytes per request received since start). The table is read off the writer thread;
    # the writer thread only marks the start and swaps the result in.
    def begin_reindex(self) -> None:
        """Start recording keys stored from now on (call on the writer thread)."""
        self.index_pending()
        self._recorded = []

    def live_hashes(self, con: duckdb.DuckDBPyConnection) -> np.ndarray:
        """Hashes of every stored key, journaled or in the table (any thread, own cursor).

        The journaled rows are taken before the table is read: a row leaves the journal's
        list only after its move committed, so each row is seen in one place or the other."""
        with self._lock:
            unmoved = list(self._pending + self._moving)
        return np.concatenate([*(key_hashes(t) for t in unmoved), stored_key_hashes(con)])

    def finish_reindex(self, hashes: np.ndarray | None) -> int:
        """Swap in the rebuilt index (None: give up); returns its size (writer thread)."""
        try:
            self.index_pending()  # recorded, so in the new index, and never added twice
        finally:  # recording stops whatever happens: else every later flush's keys pile up
            recorded, self._recorded = self._recorded or [], None
        if hashes is not None:
            self.keys = KeyIndex(np.concatenate([hashes, *recorded]))
        return len(self.keys)

    @property
    def unmoved_rows(self) -> int:
        """Rows acknowledged (journaled) but not yet visible in DuckDB (moved segments kept
        for a checkpoint are not counted: their rows are in DuckDB)."""
        with self._lock:
            return sum(t.num_rows for t in self._pending + self._moving)

    @property
    def kept_bytes(self) -> int:
        """Bytes of moved segments kept until a checkpoint (not a backlog: already in DuckDB)."""
        return sum(k.nbytes for k in self._kept)

    def _recover(self, journal: Journal) -> int:
        """Store rows a crash left in journal segments (unless already stored), and rows of
        moved segments the database lost (its WAL damaged or cut short after their move).

        A damaged segment never stops the start: every readable row in it is stored, the
        file is moved to the quarantine folder with a note of what was lost, and an ERROR
        names it (`damage` lists it for health). A disk too full to store them leaves the
        segments where they are, their rows pending for the mover, which stores them when
        space returns; the server starts and serves reads meanwhile. Segments whose rows are
        stored are kept as moved ones: DuckDB does not checkpoint a WAL it replays at open,
        so until a checkpoint they may be in the WAL only.

        Moved segments are replayed only into the file they were moved into: one put in its
        place (a backup restored; a damaged file rebuilt) holds what it holds, as before."""
        restored = again = 0
        here = _identity(self._file)
        moved = journal.moved()  # before the loop below adds the segments it stores
        if moved and (here is None or journal.database() != here):
            log.info(
                "%d moved journal segments were moved into another database file (a backup "
                "restored in its place, say): not replayed, deleted after a checkpoint",
                len(moved),
            )
            kept, moved = moved, []
        else:
            kept = []
        for path in journal.segments():
            n, keep = self._replay(journal, path, self._salvage(journal, path), moved=False)
            restored += n
            if keep is not None:
                kept.extend(journal.mark_moved([keep]))
        intact: list[tuple[Path, pa.Table]] = []
        for path in moved:
            found = self._salvage(journal, path)
            if found.problems or found.table is None:
                n, keep = self._replay(journal, path, found, moved=True)
                again += n
                if keep is not None:
                    kept.append(keep)
            else:
                intact.append((path, found.table))
        # One look at the table for all of them: a look per segment (one per move) would scan
        # the table's keys hundreds of times, ~1 s each at 20M rows.
        lost = self._lost_from(intact)
        for i, (path, rows) in enumerate(intact):
            if i in lost:
                n, keep = self._replay(journal, path, Salvage(rows), moved=True)
                again += n
                if keep is not None:
                    kept.append(keep)
            else:
                kept.append(path)
        if kept:
            self._kept.append(_Kept(kept, self._wal_files(), time.monotonic(), _size(kept)))
        if here is not None:
            try:
                journal.claim(here)
            except OSError as exc:  # a full disk: the start goes on
                log.warning(
                    "cannot record in %s which database file its segments move into (%s): "
                    "a damaged WAL at the next start may lose this run's last moved requests",
                    journal.directory,
                    exc,
                )
        if restored:
            log.info("recovered %d journaled requests into the database", restored)
        if again:
            log.warning(
                "stored again %d journaled requests the database had lost (its WAL was damaged "
                "or cut short after they were moved into it)",
                again,
            )
        return restored + again

    def _salvage(self, journal: Journal, path: Path) -> Salvage:
        try:
            return Journal.salvage(path, journal.schema)
        except OSError as exc:
            return Salvage(None, [f"it cannot be read ({exc.strerror or exc})"], None)

    def _replay(
        self, journal: Journal, path: Path, found: Salvage, *, moved: bool
    ) -> tuple[int, Path | None]:
        """Store a segment's rows not stored yet (a moved one's: not of sealed hours); returns
        how many, and the segment to keep until a checkpoint (None: quarantined or deferred)."""
        rows = found.table
        read_back = rows.num_rows if rows is not None else 0
        stored = 0
        if read_back:
            assert rows is not None
            try:
                rows = conform_requests(rows)  # a segment from before a column was added
                stored = self._store_recovered(rows, moved=moved)
            except (duckdb.Error, pa.ArrowException) as exc:
                if isinstance(exc, duckdb.Error) and _disk_full(exc):
                    self._defer(path, rows, exc, moved=moved)
                    return 0, None
                found.problems.append(f"its rows could not be stored ({_line(exc)})")
                found.lose(read_back)
                read_back = 0
        if found.problems:
            self.damage.append(
                quarantine.quarantine(
                    quarantine.folder_for(journal.directory),
                    path,
                    kind="journal segment",
                    problem="; ".join(found.problems),
                    recovered_rows=read_back,
                    lost_rows=found.lost_rows,
                )
            )
            return stored, None
        return stored, path

    def _lost_from(self, segments: list[tuple[Path, pa.Table]]) -> set[int]:
        """Which moved segments hold rows the table lacks (outside sealed hours): after a
        clean stop or a crash, none; after a damaged WAL, those moved since its damage."""
        keys = [
            t.select(["gateway", "request_id", "started_at"]).append_column(
                "seg", pa.array(np.full(t.num_rows, i, dtype=np.int32))
            )
            for i, (_, t) in enumerate(segments)
            if t.num_rows
        ]
        if not keys:
            return set()
        self.con.register("probe", pa.concat_tables(keys, promote_options="permissive"))
        try:
            found = self.con.execute(
                f"SELECT DISTINCT s.seg FROM (SELECT * FROM probe WHERE {_UNSEALED}) s "
                "ANTI JOIN requests r ON r.gateway = s.gateway AND r.request_id = s.request_id"
            ).fetchall()
        finally:
            self.con.unregister("probe")
        return {int(r[0]) for r in found}

    def _store_recovered(self, rows: pa.Table, *, moved: bool = False) -> int:
        """Insert the rows not stored yet, in one transaction; how many were inserted.

        moved: the segment's rows were stored once; one missing since was lost by the
        database, or deleted into a sealed hour's rollups (those are skipped, as a backup's
        are when restored: in doubt, counted once rather than twice)."""
        self.con.execute("BEGIN TRANSACTION")
        try:
            self.con.register("staged", rows)
            row = first_row(
                self.con,
                f"INSERT INTO requests ({_COLS}) SELECT {_COLS} FROM {_source(moved)} s "
                "ANTI JOIN requests r ON r.gateway = s.gateway AND r.request_id = s.request_id",
            )
            rollups.mark_inserted(self.con, "staged")
            self.con.execute("COMMIT")
        except BaseException:
            rollback(self.con)
            raise
        finally:
            self.con.unregister("staged")
        return int(row[0]) if row else 0

    def _defer(self, path: Path, rows: pa.Table, exc: BaseException, *, moved: bool) -> None:
        """Leave a segment for the mover: its rows not stored yet wait as pending (the dedupe
        sees them there), the file stays until the mover has stored them."""
        self.con.register("staged", rows)
        try:
            fresh = self.con.sql(
                f"SELECT {_COLS} FROM {_source(moved)} s ANTI JOIN requests r "
                "ON r.gateway = s.gateway AND r.request_id = s.request_id"
            ).to_arrow_table()
            assert fresh is not None
        finally:
            self.con.unregister("staged")
        self._pending.append(fresh.cast(rows.schema) if fresh.schema != rows.schema else fresh)
        self._segments.append(path)
        log.error(
            "cannot store %d journaled requests from %s at start (%s): they wait in the journal, "
            "reads are served, and they are stored as soon as the disk has room",
            fresh.num_rows,
            path,
            _line(exc),
        )

    def screen(self, batches: list[Batch]) -> Screened:
        """Each batch's key hashes, and whether no row of the flush can be a duplicate (the
        common case: no key repeats within it and none is in the index).

        Quick numpy work, so the writer runs it on the event loop, where it needs no GIL
        hand-offs with the loop's parsing; only `write` (the journal, DuckDB) goes to the
        writer thread. The index changes in `write` and `index_pending` (the writer thread).
        The writer awaits both before a screen; if one still runs (a flush failed after its
        journal write, an add failed), `_unindexed` is non-empty throughout it, because
        `index_pending` takes an entry off only after adding it, and it is checked before
        the index is read, so a screen never reads a half-built table."""
        hashes = [_hashes_of(b) for b in batches]
        known = [h for h in hashes if h is not None]
        flat = np.concatenate(known) if known else np.empty(0, dtype=np.uint64)
        ordered = np.sort(flat)
        repeats = bool((ordered[1:] == ordered[:-1]).any())
        # Keys not indexed yet could be repeated here unseen: then write checks every row.
        unsure = repeats or bool(self._unindexed)
        return Screened(hashes, not unsure and not self.keys.any_of(flat))

    def write(
        self, batches: list[Batch], screened: Screened | None = None, *, index_later: bool = False
    ) -> list[WriteResult]:
        """Store every batch in one transaction; returns per-batch counts, in order.

        index_later: rows made durable in the journal are added to the dedupe index by a
        later `index_pending()`, so the caller can answer first (a 4,000-row add takes ~1 ms);
        it must run that before the next `screen`.

        `screened` is what `screen` said of these batches (screened here when not given).
        Unless every row is new, each is checked against the flush, the index and, on an
        index hit, exactly against the journal and the table. One INSERT for all rows of the
        flush and one for all rejects: DuckDB's cost is mostly per statement.
        """
        self.index_pending()  # dedupe below needs every stored key in the index
        if screened is None:
            screened = self.screen(batches)
        results: list[WriteResult] = []
        kept_rows: list[pa.Table] = []
        kept_hashes: list[np.ndarray] = []
        for batch, batch_hashes in zip(batches, screened.hashes, strict=True):
            rows = batch.rows
            accepted = 0
            if rows is not None and batch_hashes is not None:
                if not screened.all_new:
                    keep = self._fresh_mask(rows, batch_hashes, kept_rows, kept_hashes)
                    if not keep.all():
                        rows = rows.filter(pa.array(keep))
                        batch_hashes = batch_hashes[keep]
                if rows.num_rows:
                    kept_rows.append(rows)
                    kept_hashes.append(batch_hashes)
                accepted = rows.num_rows
            total = 0 if batch.rows is None else batch.rows.num_rows
            results.append(WriteResult(accepted, total - accepted, len(batch.rejects)))
        rejects = [rejects_table(b, self.raw_chars) for b in batches if b.rejects]
        journaled = False
        if self.journal is not None and kept_rows:
            rows = pa.concat_tables(kept_rows)
            with self._lock:  # the mover rotates segments under the same lock
                self.journal.append(rows)
                self._pending.append(rows)
            # Durable now, whatever happens to the rejects below.
            if index_later:
                self._unindexed.append(np.concatenate(kept_hashes))
            else:
                self._remember(np.concatenate(kept_hashes))
            kept_rows, kept_hashes = [], []
            journaled = True
        if not kept_rows and not rejects:
            return results
        self.con.execute("BEGIN TRANSACTION")
        try:
            if kept_rows:
                self._insert("requests", _COLS, pa.concat_tables(kept_rows))
            if rejects:
                self._insert("rejects", "*", pa.concat_tables(rejects))
            self.con.execute("COMMIT")
        except BaseException as exc:
            rollback(self.con)
            if journaled and isinstance(exc, Exception):  # the valid rows are durable
                raise PartlyStored(exc, batches, results) from exc
            raise
        if kept_hashes:  # only now are these rows durable
            self._remember(np.concatenate(kept_hashes))
        return results

    def _insert(self, table: str, cols: str, rows: pa.Table, con=None) -> None:
        con = con or self.con
        con.register("staged", rows)
        try:
            target = f"{table} ({cols})" if cols != "*" else table
            con.execute(f"INSERT INTO {target} SELECT {cols} FROM staged")
            if table == "requests":  # same transaction: their hours' rollups are stale now
                rollups.mark_inserted(con, "staged")
        finally:
            con.unregister("staged")

    def move(self, con: duckdb.DuckDBPyConnection) -> int:
        """Insert every journaled row into DuckDB in one transaction (call from one thread);
        its segments are kept until a checkpoint, and those an earlier one covers deleted."""
        assert self.journal is not None
        with self._lock:
            tables, self._pending = self._pending, []
            self._moving = tables
            self._segments.extend(self.journal.rotate())
            segments = list(self._segments)
        try:
            if tables:
                con.execute("BEGIN TRANSACTION")
                try:
                    # One chunk: DuckDB scans a many-chunk Arrow table with all its threads,
                    # which measured twice the CPU per row (4.2-4.9 us against 2.3) and was
                    # no faster.
                    rows = pa.concat_tables(tables).combine_chunks()
                    self._insert("requests", _COLS, rows, con)
                    con.execute("COMMIT")
                except BaseException:
                    rollback(con)
                    raise
        except BaseException:
            with self._lock:  # keep them pending; their segments stay on disk
                self._pending = tables + self._pending
                self._moving = []
            raise
        wal = self._wal_files()  # after the COMMIT: the WAL files it can be in
        moved = sum(t.num_rows for t in tables)
        with self._lock:  # counted in the same step that makes them no longer "unmoved"
            self._moving = []
            self.moved_rows += moved
            self._segments = [s for s in self._segments if s not in segments]
        if segments:
            kept = self.journal.mark_moved(segments)
            nbytes = sum(t.nbytes for t in tables)
            self._kept.append(_Kept(kept, wal, time.monotonic(), nbytes))
        self._release(con, wal)
        return moved

    def _release(self, con: duckdb.DuckDBPyConnection, wal: WalFiles | None) -> None:
        """Delete the moved segments a checkpoint has put in the database file; past
        `keep_bytes` or `keep_s`, ask for a checkpoint (one that fails is tried again at the
        next move). `wal`: the WAL files as just seen. Never raises: the rows are stored."""
        if not self._kept:
            return
        self._drop_checkpointed(wal)
        kept = self._kept
        if kept and (
            self.kept_bytes >= self.keep_bytes or time.monotonic() - kept[0].since >= self.keep_s
        ):
            if self.checkpoint(con):
                self._drop_checkpointed(self._wal_files())

    def checkpoint(self, con: duckdb.DuckDBPyConnection) -> bool:
        """A plain CHECKPOINT; False if DuckDB declined it.

        Measured on DuckDB 2.0.1: it runs beside open readers and writers (they are not
        aborted), commits wait while it runs, and it fails at once while another checkpoint
        runs, where FORCE CHECKPOINT waits for that one to end (2.1 s behind one of 2.4 s):
        the mover would stall."""
        try:
            con.execute("CHECKPOINT")
        except duckdb.Error as exc:
            error = _line(exc)
            if error != self._checkpoint_error:  # once, not at every move while it lasts
                log.info(
                    "checkpoint for the journal's %d moved segments declined (%s); tried again "
                    "at the next move",
                    sum(len(k.paths) for k in self._kept),
                    error,
                )
            self._checkpoint_error = error
            return False
        self._checkpoint_error = None
        return True

    def _drop_checkpointed(self, now: WalFiles | None) -> None:
        done = [k for k in self._kept if k.checkpointed(now)]
        if not done:
            return
        self._kept = [k for k in self._kept if k not in done]
        for k in done:
            for path in k.paths:
                try:
                    path.unlink(missing_ok=True)
                except OSError as exc:  # kept on disk: the next start skips its stored rows
                    log.warning("cannot delete the moved journal segment %s: %s", path, exc)

    def close(self) -> None:
        """After the last move (the writer stopping): close the journal and checkpoint, so
        the moved segments can go (call on the thread that owns `con`)."""
        if self.journal is None:
            return
        self.journal.close()
        if self._kept and self.checkpoint(self.con):
            self._drop_checkpointed(self._wal_files())

    def _wal_files(self) -> WalFiles | None:
        """(inode, size) of each of the database's WAL files there is: two stats."""
        out = []
        for path in self._wal_paths:
            try:
                st = os.stat(path)
            except FileNotFoundError:
                continue
            except OSError:
                return None
            out.append((st.st_ino, st.st_size))
        return tuple(out)

    def _fresh_mask(
        self,
        rows: pa.Table,
        hashes: np.ndarray,
        earlier_rows: list[pa.Table],
        earlier_hashes: list[np.ndarray],
    ) -> np.ndarray:
        """True for rows to insert: not stored yet and first of their key in this flush."""
        keep = np.ones(len(hashes), dtype=bool)
        gw: list | None = None
        rid: list | None = None
        # Within the batch: a repeated hash is a repeated key unless the strings differ.
        _, first = np.unique(hashes, return_index=True)
        if len(first) < len(hashes):
            keep[:] = False
            keep[first] = True
            seen: set[tuple[str, str]] = set()
            gw, rid = rows.column("gateway").to_pylist(), rows.column("request_id").to_pylist()
            for i in np.flatnonzero(np.isin(hashes, hashes[~keep])):
                key = (gw[i], rid[i])
                keep[i] = key not in seen
                seen.add(key)
        # Against earlier batches of this flush, which are not in the table yet.
        if earlier_hashes:
            hit = np.isin(hashes, np.concatenate(earlier_hashes)) & keep
            if hit.any():
                if gw is None or rid is None:
                    gw = rows.column("gateway").to_pylist()
                    rid = rows.column("request_id").to_pylist()
                prev = {
                    key
                    for t in earlier_rows
                    for key in zip(
                        t.column("gateway").to_pylist(),
                        t.column("request_id").to_pylist(),
                        strict=True,
                    )
                }
                for i in np.flatnonzero(hit):
                    keep[i] = (gw[i], rid[i]) not in prev
        # Against stored rows: every index hit is confirmed exactly before it counts.
        maybe = self.keys.contains(hashes) & keep
        if maybe.any():
            idx = np.flatnonzero(maybe)
            cand = rows.take(pa.array(idx)).select(["gateway", "request_id"])
            # The journal first: a row the mover commits between the two looks is then still
            # in this snapshot, or already visible to the table query that follows.
            journaled = self._journaled(cand)
            stored = journaled | self._stored(cand)
            keep[idx[stored]] = False
        return keep

    def _journaled(self, cand: pa.Table) -> np.ndarray:
        """Exact check: which candidate keys are acknowledged but not yet moved into DuckDB."""
        with self._lock:
            tables = self._pending + self._moving
        found: set[tuple[str, str]] = set()
        keys = list(
            zip(
                cand.column("gateway").to_pylist(),
                cand.column("request_id").to_pylist(),
                strict=True,
            )
        )
        wanted = set(keys)
        ids = pa.array([k[1] for k in keys], pa.string())
        for t in tables:
            hit = t.filter(pc.is_in(t.column("request_id"), value_set=ids))
            for key in zip(
                hit.column("gateway").to_pylist(), hit.column("request_id").to_pylist(), strict=True
            ):
                if key in wanted:
                    found.add(key)
        return np.array([k in found for k in keys], dtype=bool)

    def _stored(self, cand: pa.Table) -> np.ndarray:
        """Exact check: which candidate keys are already in `requests`."""
        cand = cand.append_column("i", pa.array(np.arange(cand.num_rows, dtype=np.int64)))
        self.con.register("cand", cand)
        try:
            hits = self.con.execute(
                "SELECT c.i FROM cand c SEMI JOIN requests r "
                "ON r.gateway = c.gateway AND r.request_id = c.request_id"
            ).fetchnumpy()["i"]
        finally:
            self.con.unregister("cand")
        mask = np.zeros(cand.num_rows, dtype=bool)
        mask[np.asarray(hits, dtype=np.int64)] = True
        return mask


def _database_file(con: duckdb.DuckDBPyConnection) -> Path | None:
    """The connection's database file (None: in memory)."""
    row = first_row(
        con, "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
    )
    return Path(row[0]) if row and row[0] else None


def _wal_paths(db: Path | None) -> tuple[Path, ...]:
    """The checkpoint's WAL and DuckDB's WAL beside the database file (none: in memory).

    In this order: a checkpoint ends by renaming the first to the second, so a look at both
    in turn sees such a file under one name or the other, never under neither."""
    if db is None:
        return ()
    return tuple(sibling(db, suffix) for suffix in (".checkpoint.wal", ".wal"))


def _identity(db: Path | None) -> str | None:
    """Which file the database is (device and inode): a backup copied into its place is
    another one, a WAL salvaged at start leaves it the same."""
    if db is None:
        return None
    try:
        st = db.stat()
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}"


def _source(moved: bool) -> str:
    """The staged rows a replay may store: a moved segment's skip sealed hours."""
    return f"(SELECT * FROM staged WHERE {_UNSEALED})" if moved else "staged"


def _size(paths: list[Path]) -> int:
    total = 0
    for path in paths:
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def _hashes_of(batch: Batch) -> np.ndarray | None:
    """The batch's key hashes (None: no rows); the parser's own when it made them."""
    rows = batch.rows
    if rows is None or not rows.num_rows:
        return None
    if batch.hashes is not None and len(batch.hashes) == rows.num_rows:
        return batch.hashes
    return key_hashes(rows)


def count_rows(con: duckdb.DuckDBPyConnection, table: str) -> int:
    """Row count of one of our tables (name checked against a fixed list)."""
    if table not in {"requests", "rejects", "tokens", "engines", "report_runs"}:
        raise ValueError(f"unknown table {table!r}")
    row = first_row(con, f"SELECT count(*) FROM {table}")
    return int(row[0]) if row else 0
