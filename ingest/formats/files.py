"""Files into batches: native NDJSON, CSV, Parquet, the Azure trace CSV, GenAI-Perf, AIPerf.

Bytes to records only; `ingest.importer` stores them."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from app.storage.batches import Batch, Reject
from app.storage.schema import AZURE_GATEWAY
from ingest.formats import benchmarks
from ingest.formats.native import EnvelopeError, parse
from ingest.records import FIELDS, RecordIn, describe_error, to_rows

FORMATS = ("ndjson", "csv", "parquet", "azure", "genai-perf", "aiperf")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
CHUNK_ROWS = 50_000
_TEXT_COLUMNS = ("request_id", "started_at", "model", "engine", "tenant", "status", "error_type")


def detect(path: Path) -> str:
    """Guess the format from the extension and, for CSV, the header line."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return "parquet"
    if suffix in (".ndjson", ".jsonl", ".json"):
        return "ndjson"
    if suffix == ".csv":
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            header = fh.readline().strip().split(",")
        return "azure" if all(c in header for c in AZURE_COLUMNS) else "csv"
    raise ValueError(
        f"cannot tell the format of {path.name}; pass --format ndjson|csv|parquet|azure"
    )


def default_gateway(path: Path, fmt: str) -> str:
    """The gateway name imported records are stored under unless --gateway says otherwise
    (a benchmark's own name, so it can be compared with production on the pages)."""
    if fmt == "azure":
        return AZURE_GATEWAY
    return fmt if fmt in ("genai-perf", "aiperf") else "import"


def _ndjson_chunks(path: Path) -> Iterator[tuple[int, bytes]]:
    """(first line number, bytes) of about CHUNK_ROWS lines at a time."""
    with path.open("rb") as fh:
        lines: list[bytes] = []
        first = 0
        for n, line in enumerate(fh):
            lines.append(line)
            if len(lines) == CHUNK_ROWS:
                yield first, b"".join(lines)
                first, lines = n + 1, []
        if lines:
            yield first, b"".join(lines)


def _clean(row: dict) -> dict:
    """Drop empty cells; turn parsed timestamps back into ISO text for the record type."""
    out = {}
    for key, value in row.items():
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue  # an empty cell is an absent field
        if isinstance(value, datetime):
            value = (value if value.tzinfo else value.replace(tzinfo=UTC)).isoformat()
        if key == "sample_rate" and isinstance(value, str):
            value = _number_or_text(value)
        out[key] = value
    return out


def _number_or_text(text: str) -> float | str:
    """A CSV cell as a number when it reads as one; else the text, which the record's rule
    then rejects by name (a column with one bad cell is read as text throughout)."""
    try:
        return float(text)
    except ValueError:
        return text


def _infinite_field(row: dict) -> str | None:
    """The first field holding an infinite number (or a list holding one), if any."""
    for key, value in row.items():
        values = value if isinstance(value, list) else (value,)
        if any(isinstance(v, float) and math.isinf(v) for v in values):
            return key
    return None


def _records(dicts: list[dict], base: int) -> tuple[list[RecordIn], list[int], list[Reject]]:
    records, indexes, rejects = [], [], []
    for i, row in enumerate(dicts):
        if benchmarks.REJECT in row:  # a benchmark mapper's reject: (field, message)
            fld, msg = row[benchmarks.REJECT]
            rejects.append(Reject(base + i, fld, msg, repr(row)[:4096]))
            continue
        clean = _clean(row)
        infinite = _infinite_field(clean)
        if infinite is not None:  # msgspec.convert takes inf for a float >= 0
            message = f"{infinite}: must be a finite number"
            rejects.append(Reject(base + i, infinite, message, repr(row)[:4096]))
            continue
        try:
            records.append(msgspec.convert(clean, RecordIn))
            indexes.append(base + i)
        except msgspec.ValidationError as exc:
            fld, msg = describe_error(exc)
            rejects.append(Reject(base + i, fld, msg, repr(row)[:4096]))
    return records, indexes, rejects


def _table_chunks(table: pa.Table) -> Iterator[tuple[int, list[dict]]]:
    keep = [c for c in table.column_names if c in FIELDS]
    if "model" not in keep or "isl" not in keep or "osl" not in keep:
        raise ValueError(
            "the file needs at least the columns model, isl and osl "
            f"(it has: {', '.join(table.column_names[:20])})"
        )
    table = table.select(keep)
    for start in range(0, table.num_rows, CHUNK_ROWS):
        yield start, table.slice(start, CHUNK_ROWS).to_pylist()


def _azure_chunks(path: Path, model: str) -> Iterator[tuple[int, list[dict]]]:
    opts = pacsv.ConvertOptions(column_types={"TIMESTAMP": pa.string()})
    table = pacsv.read_csv(path, convert_options=opts)
    missing = [c for c in AZURE_COLUMNS if c not in table.column_names]
    if missing:
        raise ValueError(f"{path.name} is not an Azure trace CSV: missing {', '.join(missing)}")
    stem = path.stem
    for start in range(0, table.num_rows, CHUNK_ROWS):
        part = table.slice(start, CHUNK_ROWS)
        times = part.column("TIMESTAMP").to_pylist()
        isl = part.column("ContextTokens").to_pylist()
        osl = part.column("GeneratedTokens").to_pylist()
        rows = []
        for i, (t, a, b) in enumerate(zip(times, isl, osl, strict=True)):
            # The trace's times are naive UTC with 7 fractional digits; keep microseconds.
            when = t[:26] + "+00:00" if t and "." in t else (t + "+00:00" if t else None)
            rows.append(
                {
                    "request_id": f"{stem}-{start + i}",
                    "started_at": when,
                    "model": model,
                    "isl": a,
                    "osl": b,
                }
            )
        yield start, rows


def batches(
    path: Path,
    fmt: str,
    gateway: str,
    model: str | None,
    received_at: datetime,
    tokenizer: Path | None = None,
) -> Iterator[tuple[Batch, int]]:
    """(batch, items read) for each chunk of the file, validated like the HTTP route."""
    if fmt == "ndjson":
        for first, chunk in _ndjson_chunks(path):
            try:
                parsed = parse(
                    chunk,
                    ndjson=True,
                    gateway=gateway,
                    received_at=received_at,
                    max_items=CHUNK_ROWS + 1,
                )
            except EnvelopeError as exc:
                if not chunk.strip():
                    continue  # a chunk of blank lines
                # Refused whole (too many nested values, say): kept, never skipped in silence.
                lines = chunk.count(b"\n") + (not chunk.endswith(b"\n"))
                text = chunk[:4096].decode(errors="replace")
                reason = f"lines {first} to {first + lines - 1}: {exc}"
                yield (
                    Batch(gateway, fmt, received_at, None, [Reject(first, None, reason, text)]),
                    lines,
                )
                continue
            rejects = [
                Reject(None if r.index is None else r.index + first, r.field, r.reason, r.raw)
                for r in parsed.rejects
            ]
            yield Batch(gateway, fmt, received_at, parsed.rows, rejects), parsed.items
        return
    if fmt == "azure":
        chunks = _azure_chunks(path, model or f"azure-{path.stem}")
    elif fmt == "genai-perf":
        chunks = benchmarks.genai_perf_rows(path, model, tokenizer)
    elif fmt == "aiperf":
        chunks = benchmarks.aiperf_rows(path, model)
    elif fmt == "csv":
        # An empty cell is a missing value (a spreadsheet's blank engine, tenant or error type),
        # not an empty name that the record rules would refuse.
        opts = pacsv.ConvertOptions(
            column_types={c: pa.string() for c in _TEXT_COLUMNS}, strings_can_be_null=True
        )
        chunks = _table_chunks(pacsv.read_csv(path, convert_options=opts))
    else:
        chunks = _table_chunks(pq.read_table(path))
    for start, dicts in chunks:
        records, indexes, rejects = _records(dicts, start)
        rows, more = to_rows(records, indexes, gateway=gateway, received_at=received_at)
        yield Batch(gateway, fmt, received_at, rows, rejects + more), len(dicts)
