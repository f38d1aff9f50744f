"""The ingest journal: accepted rows made durable (Arrow IPC + fsync) before DuckDB has them.

A DuckDB commit of a few thousand rows costs ~4 us per row (WAL serialisation), a bulk insert
of 100k+ rows ~1.4 us, an fsynced Arrow append ~0.3 us. So the writer acknowledges after the
journal append and a mover thread inserts the journal into DuckDB in large transactions,
deleting each segment only after its rows are committed there.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc as ipc


class Journal:
    """Numbered append-only segment files in one directory."""

    def __init__(self, directory: Path, schema: pa.Schema):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self._file = None
        self._writer: ipc.RecordBatchStreamWriter | None = None
        self._path: Path | None = None
        existing = self.segments()
        self._next = int(existing[-1].stem.split("-")[1]) + 1 if existing else 1

    def segments(self) -> list[Path]:
        """Segment files on disk, oldest first (any left over from a crash included)."""
        return sorted(self.directory.glob("segment-*.arrow"))

    def append(self, rows: pa.Table) -> None:
        """Write the rows to the open segment and fsync: after this they survive a crash."""
        if self._writer is None:
            self._path = self.directory / f"segment-{self._next:09d}.arrow"
            self._next += 1
            self._file = open(self._path, "wb")  # noqa: SIM115 - kept open across appends
            self._writer = ipc.new_stream(self._file, self.schema)
        assert self._file is not None
        self._writer.write_table(rows.cast(self.schema))
        self._file.flush()
        os.fsync(self._file.fileno())

    def rotate(self) -> Path | None:
        """Close the open segment and return it (the next append starts a new one)."""
        if self._writer is None:
            return None
        self._writer.close()
        assert self._file is not None
        self._file.close()
        path, self._writer, self._file, self._path = self._path, None, None, None
        return path

    def close(self) -> None:
        """Close the open segment, if any, keeping it on disk."""
        self.rotate()

    @staticmethod
    def read(path: Path) -> pa.Table | None:
        """All complete batches of a segment; a torn last batch (crash mid-append) is skipped.

        Such a batch was never fsynced, so it was never acknowledged either."""
        batches = []
        schema = None
        try:
            with open(path, "rb") as fh:
                reader = ipc.open_stream(fh)
                schema = reader.schema
                while True:
                    try:
                        batches.append(reader.read_next_batch())
                    except StopIteration:
                        break
        except (pa.ArrowInvalid, OSError, EOFError):
            pass
        if schema is None:
            return None
        return pa.Table.from_batches(batches, schema=schema)
