"""`tokenshape export` and GET /api/export: a window of production traffic as a file a benchmark
replays (Mooncake trace, AIPerf input) or as canonical records (Parquet, CSV), with what it holds
and how close it stays to the source."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from app.analytics import export as rows
from app.analytics.filters import Filter
from app.analytics.rollups.missing import raw_only_note
from app.sizing import prompts, replay

FORMATS = ("mooncake", "vllm", "aiperf", "parquet", "csv")
TRACE_FORMATS = ("mooncake", "vllm", "aiperf")  # lengths clamped to 1 (records keep them)
MEDIA_TYPES = {
    "mooncake": "application/x-ndjson",
    "vllm": "application/x-ndjson",
    "aiperf": "application/x-ndjson",
    "parquet": "application/vnd.apache.parquet",
    "csv": "text/csv; charset=utf-8",
}
SUFFIXES = {
    "mooncake": ".jsonl",
    "vllm": ".jsonl",
    "aiperf": ".jsonl",
    "parquet": ".parquet",
    "csv": ".csv",
}
DEFAULT_SPAN = timedelta(days=1)
DEFAULT_PEAK_SPAN = timedelta(days=7)  # the busiest hour of the last week
HOUR = timedelta(hours=1)
MAX_PROMPT_TOKENS = 1_000_000  # a synthetic prompt is at most this long (~6 MB of text)
PROMPT_CHUNK_BYTES = 8_000_000  # the aiperf export yields at least every this many bytes
# vllm: one hash id per this many prompt tokens, vLLM's --timed-trace-chunk-hash-size and
# AIPerf's Mooncake block size; SGLang's mooncake loader makes ~128 tokens of each id.
DEFAULT_HASH_BLOCK = 512


class ExportError(ValueError):
    """The export cannot be made as asked; the message says what to change."""


@dataclass(frozen=True)
class ExportAsk:
    """What to export: the filter's window (None ends: the defaults), the format, a cap on
    the requests, time compression, and a rate scale (`peak`: the busiest hour, scaled)."""

    flt: Filter
    fmt: str = "mooncake"
    max_requests: int | None = None
    speedup: float = 1.0
    peak: float | None = None
    scale: float = 1.0
    seed: int = 0
    hash_block: int = DEFAULT_HASH_BLOCK  # vllm only: prompt tokens per hash id

    def check(self) -> None:
        """Raise ExportError naming the first option that is out of range."""
        if self.fmt not in FORMATS:
            raise ExportError(f"format: {self.fmt!r} is not one of {', '.join(FORMATS)}")
        if not 1 <= self.hash_block <= 1_000_000:
            raise ExportError("hash_block: must be at least 1 and at most 1,000,000 (e.g. 512)")
        if self.max_requests is not None and self.max_requests < 1:
            raise ExportError(f"max_requests: must be at least 1 (got {self.max_requests})")
        if not (math.isfinite(self.speedup) and 0.001 <= self.speedup <= 1_000_000):
            raise ExportError(
                f"speedup: must be at least 0.001 and at most 1,000,000 (e.g. 24), got "
                f"{self.speedup:g}"
            )
        for name, value in (("peak", self.peak), ("scale", self.scale)):
            if value is not None and not (math.isfinite(value) and 0 < value <= replay.MAX_SCALE):
                raise ExportError(f"{name}: must be above 0 and at most {replay.MAX_SCALE:g}")


@dataclass
class Fidelity:
    """How close the trace stays to its source window."""

    tvd: float  # total variation distance of the ISL × OSL shares, Shapes page (log2) cells
    tvd_fine: float  # the same over the rollups' half-octave cells
    cells: int  # non-empty half-octave cells of the source
    isl_source: tuple[int, int, int]  # p50, p90, p99
    isl_trace: tuple[int, int, int]
    osl_source: tuple[int, int, int]
    osl_trace: tuple[int, int, int]
    bucket_s: int  # the time bucket arrivals are compared in
    per_bucket_source: dict[str, float]  # mean, peak, cv, peak_to_mean
    per_bucket_trace: dict[str, float]
    profile_correlation: float | None  # of requests per bucket, source vs trace (no copies)


@dataclass
class ExportSummary:
    """What an export holds, in numbers and in sentences."""

    format: str
    start: datetime
    end: datetime
    peak_hour: datetime | None
    rows_source: int
    requests_source: float
    rows: int
    scale: float
    speedup: float
    replay_seconds: float
    fidelity: Fidelity | None
    notes: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        """JSON-ready (times as ISO 8601)."""
        out = asdict(self)
        for key in ("start", "end", "peak_hour"):
            out[key] = out[key].isoformat() if out[key] else None
        return out

    def lines(self) -> list[str]:
        """The summary as a person reads it."""
        head = (
            f"{self.rows:,} requests as {self.format}, from {_when(self.start)} to "
            f"{_when(self.end)}"
            + (f" (the busiest hour, {_when(self.peak_hour)})" if self.peak_hour else "")
            + f"; the {'hour' if self.peak_hour else 'window'} held {self.rows_source:,} "
            "stored rows"
        )
        if round(self.requests_source) != self.rows_source:
            head += f" standing for {self.requests_source:,.0f} requests"
        out = [head]
        if self.scale != 1 or self.speedup != 1:
            out.append(
                f"rate ×{self.scale:g}, time ÷{self.speedup:g}: the replay lasts "
                f"{self.replay_seconds:,.0f} s"
            )
        if f := self.fidelity:
            pm_s, pm_t = f.per_bucket_source, f.per_bucket_trace
            out.append(
                f"shape: ISL × OSL total variation distance {f.tvd:.4f} on the Shapes page's "
                f"heat map ({f.tvd_fine:.4f} over {f.cells} half-octave cells; 0 is "
                f"identical); ISL p50/p90/p99 "
                f"{_three(f.isl_source)} → {_three(f.isl_trace)}, OSL "
                f"{_three(f.osl_source)} → {_three(f.osl_trace)}"
            )
            corr = (
                f", correlation of the profile {f.profile_correlation:.3f}"
                if f.profile_correlation is not None
                else ""
            )
            out.append(
                f"arrivals per {replay.bucket_words(f.bucket_s)} (before time compression): "
                f"mean {pm_s['mean']:,.1f} → "
                f"{pm_t['mean']:,.1f}, busiest/mean {pm_s['peak_to_mean']:.2f} → "
                f"{pm_t['peak_to_mean']:.2f}, CV {pm_s['cv']:.2f} → {pm_t['cv']:.2f}{corr}"
            )
        out += self.notes
        return out


def _when(t: datetime) -> str:
    return t.isoformat(timespec="seconds")


def _three(v: tuple[int, int, int]) -> str:
    return "/".join(f"{x:,}" for x in v)


def _pm(b: replay.Burstiness) -> dict[str, float]:
    return {"mean": b.mean, "peak": float(b.peak), "cv": b.cv, "peak_to_mean": b.peak_to_mean}


def _correlation(a: dict[int, int], b: dict[int, int], buckets: int) -> float | None:
    import numpy as np

    if buckets < 3:
        return None
    x, y = np.zeros(buckets), np.zeros(buckets)
    for k, v in a.items():
        if 0 <= k < buckets:
            x[k] = v
    for k, v in b.items():
        if 0 <= k < buckets:
            y[k] = v
    if x.std() == 0 or y.std() == 0:
        return None
    return float(np.corrcoef(x, y)[0, 1])


@dataclass(frozen=True)
class Plan:
    """A planned export: the window and rows it takes, and its summary."""

    ask: ExportAsk
    window: rows.Window
    pick: rows.Selection
    summary: ExportSummary


def plan(
    cur: rows.Cursor,
    ask: ExportAsk,
    now: datetime,
    *,
    fidelity: bool = True,
    tz: str = "UTC",
) -> Plan:
    """Resolve the window (defaults, the busiest hour for `peak`), the copies and the cap, and
    measure the trace against its source; ExportError when there is nothing to export."""
    ask.check()
    flt = ask.flt
    end = flt.end or now
    start = flt.start or end - (DEFAULT_PEAK_SPAN if ask.peak else DEFAULT_SPAN)
    if start >= end:
        raise ExportError(
            f"start: must be before end (got {start.isoformat()} and {end.isoformat()})"
        )
    flt = replace(flt, start=start, end=end)
    peak_hour = None
    scale = ask.scale
    if ask.peak is not None:
        found = rows.busiest_hour(cur, flt)
        if found is None:
            raise ExportError(_nothing(flt))
        peak_hour = found[0]
        # The clock hour, cut to the window: an export never holds a row outside --start/--end.
        flt = replace(flt, start=max(peak_hour, start), end=min(peak_hour + HOUR, end))
        scale = ask.peak * ask.scale
    if not (0 < scale <= replay.MAX_SCALE):
        raise ExportError(
            f"peak × scale: must be at most {replay.MAX_SCALE:g} (got {ask.peak:g} × {ask.scale:g})"
        )
    n_rows, weight = rows.requests_of(cur, flt)
    if n_rows == 0:
        raise ExportError(_nothing(flt))
    # Timestamps count from the window's start when it was given (or is the busiest hour), so
    # exports of the same window line up; else from the first request, so a replay does not
    # open with an idle wait.
    if ask.flt.start is not None or peak_hour is not None:
        origin = flt.start
    else:
        origin = rows.first_started(cur, flt) or start
    assert origin is not None and flt.end is not None
    span_us = max(int((flt.end - origin).total_seconds() * 1_000_000), 1)
    window = rows.Window(flt, origin, span_us, n_rows)
    source = rows.cell_counts(cur, flt)
    cps = replay.copies(source, scale) if scale != 1 else None
    scaled = cps.counts(source) if cps else source
    total = sum(scaled.values())
    if total == 0:
        raise ExportError(
            f"scale: {scale:g} leaves none of the window's {n_rows:,} rows; raise it to at "
            f"least {1 / n_rows:.3g}"
        )
    quotas = None
    if ask.max_requests is not None and ask.max_requests < total:
        quotas = replay.largest_remainder(scaled, ask.max_requests)
        total = ask.max_requests
    pick = rows.Selection(cps, quotas, ask.seed)
    notes = _notes(cur, ask, flt, n_rows, weight, now, tz)
    fid = _fidelity(cur, window, pick, source, total) if fidelity else None
    if ask.fmt in TRACE_FORMATS and (zero := rows.zero_length_rows(cur, window, pick)):
        notes.append(
            f"{zero:,} requests with 0 input or output tokens (errors, cancellations) are "
            "written with 1: a benchmark cannot ask for 0 tokens"
        )
    summary = ExportSummary(
        format=ask.fmt,
        start=origin,
        end=flt.end,
        peak_hour=peak_hour,
        rows_source=n_rows,
        requests_source=weight,
        rows=total,
        scale=scale,
        speedup=ask.speedup,
        replay_seconds=span_us / 1e6 / ask.speedup,
        fidelity=fid,
        notes=notes,
    )
    return Plan(replace(ask, flt=flt), window, pick, summary)


def _nothing(flt: Filter) -> str:
    assert flt.start is not None and flt.end is not None
    narrowed = ", ".join(f"{k} {'/'.join(v)}" for k, v in flt.dimensions().items())
    return (
        f"no stored requests from {flt.start.isoformat()} to {flt.end.isoformat()}"
        + (f" for {narrowed}" if narrowed else "")
        + ": widen the window (--start/--end, start/end) or check the filters"
    )


def _notes(
    cur: rows.Cursor,
    ask: ExportAsk,
    flt: Filter,
    n_rows: int,
    weight: float,
    now: datetime,
    tz: str,
) -> list[str]:
    notes: list[str] = []
    if weight > n_rows * 1.0001:
        rate = n_rows / weight
        notes.append(
            f"the stored rows are a {rate:.2%} sample of the requests: the trace replays "
            f"{rate:.2%} of production's rate; pass --scale {weight / n_rows:.3g} (scale="
            f"{weight / n_rows:.3g}) to replay the full rate"
        )
    if ask.fmt == "mooncake":
        notes.append(
            "no hash_ids: the gateways ship no prefix-block hashes, so prefix-cache reuse is "
            "not replayed (the benchmark's prompts share no prefixes)"
        )
    if ask.fmt == "vllm":
        notes.append(
            f"hash_ids are fresh numbers, one per {ask.hash_block} prompt tokens, never two "
            "alike: no prompt shares a prefix with another, so prefix caching never hits (the "
            "gateways ship no prefix-block hashes; production may reuse more than the replay)"
        )
    if ask.fmt == "aiperf":
        notes.append(
            "prompts are common English words, one token each in GPT-2, cl100k, Llama and Qwen "
            f"vocabularies, at most {MAX_PROMPT_TOKENS:,} tokens (the engine adds its chat "
            "template); pass --tokenizer tokenizer.json "
            "to check and mend every prompt's length with the served model's tokenizer"
        )
    if note := raw_only_note(cur, flt, now, reader="the export reads"):
        notes.append(note)
    return notes


def _fidelity(
    cur: rows.Cursor,
    window: rows.Window,
    pick: rows.Selection,
    source_cells: dict[int, int],
    trace_rows: int,
) -> Fidelity:
    bucket_s = replay.bucket_seconds(window.span_us / 1e6, trace_rows)
    bucket_us = bucket_s * 1_000_000
    src = rows.trace_stats(cur, window, rows.Selection(None, None), bucket_us)
    same = pick.copies is None and pick.quotas is None
    out = src if same else rows.trace_stats(cur, window, pick, bucket_us)
    buckets = max(math.ceil(window.span_us / bucket_us), 1)
    b_src = replay.burstiness(list(src.per_bucket.values()), buckets)
    b_out = replay.burstiness(list(out.per_bucket.values()), buckets)
    corr = _correlation(src.per_bucket, out.per_bucket, buckets) if pick.copies is None else None
    return Fidelity(
        tvd=replay.tvd(replay.log2_cells(source_cells), replay.log2_cells(out.cells)),
        tvd_fine=replay.tvd(source_cells, out.cells),
        cells=len(source_cells),
        isl_source=src.isl,
        isl_trace=out.isl,
        osl_source=src.osl,
        osl_trace=out.osl,
        bucket_s=bucket_s,
        per_bucket_source=_pm(b_src),
        per_bucket_trace=_pm(b_out),
        profile_correlation=corr,
    )


# Writing -----------------------------------------------------------------------------------


def load_tokenizer(path: Path) -> prompts.Encoder:
    """A Hugging Face tokenizer.json as a token counter (no special tokens)."""
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise ExportError(
            "--tokenizer needs the tokenizers package, which is not installed: pip install "
            "'tokenshape[tokenizer]' (or drop --tokenizer)"
        ) from None
    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises its own Exception type for a bad file
        raise ExportError(
            f"cannot load the tokenizer {path} ({exc}); pass a tokenizer.json"
        ) from None
    return lambda text: len(tok.encode(text, add_special_tokens=False).ids)


class _Drain(io.RawIOBase):
    """A write-only file that keeps what was written until `take()` (Parquet, streamed)."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._pos = 0

    def writable(self) -> bool:
        return True

    def write(self, b) -> int:  # type: ignore[override]
        data = bytes(b)
        self._parts.append(data)
        self._pos += len(data)
        return len(data)

    def tell(self) -> int:
        return self._pos

    def take(self) -> bytes:
        data, self._parts = b"".join(self._parts), []
        return data


def chunks(
    cur: rows.Cursor,
    the_plan: Plan,
    *,
    tokenizer: prompts.Encoder | None = None,
    report: Callable[[str], None] | None = None,
) -> Iterator[bytes]:
    """The export's bytes, a batch of rows at a time (memory bounded by the batch)."""
    ask = the_plan.ask
    kind = "mooncake" if ask.fmt in TRACE_FORMATS else "records"
    batches = rows.trace_rows(
        cur, the_plan.window, the_plan.pick, speedup=ask.speedup, columns=kind
    )
    if ask.fmt == "mooncake":
        yield from _mooncake(batches)
    elif ask.fmt == "vllm":
        yield from _hashed(batches, ask.hash_block)
    elif ask.fmt == "aiperf":
        yield from _aiperf(batches, ask.seed, tokenizer, report)
    elif ask.fmt == "csv":
        yield from _csv(batches)
    else:
        yield from _parquet(batches)


def _lengths(batch: pa.RecordBatch) -> tuple[list[int], list[int], list[int]]:
    ts = batch.column("timestamp_ms").to_pylist()
    isl = [max(int(v), 1) for v in batch.column("isl").to_pylist()]
    osl = [max(int(v), 1) for v in batch.column("osl").to_pylist()]
    return ts, isl, osl


def _mooncake(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    for batch in batches:
        ts, isl, osl = _lengths(batch)
        yield "".join(
            f'{{"timestamp":{t},"input_length":{i},"output_length":{o}}}\n'
            for t, i, o in zip(ts, isl, osl, strict=True)
        ).encode()


def _hashed(batches: Iterator[pa.RecordBatch], block: int) -> Iterator[bytes]:
    # Mooncake lines with ceil(input_length / block) hash ids each, numbered on across the file:
    # the benchmark builds each request's prompt from its ids, so the lengths come out exact and
    # no two prompts share a block.
    next_id = 0
    for batch in batches:
        ts, isl, osl = _lengths(batch)
        lines = []
        for t, i, o in zip(ts, isl, osl, strict=True):
            n = -(-i // block)
            ids = ",".join(map(str, range(next_id, next_id + n)))
            next_id += n
            lines.append(
                f'{{"timestamp":{t},"input_length":{i},"output_length":{o},"hash_ids":[{ids}]}}\n'
            )
        yield "".join(lines).encode()


def _aiperf(
    batches: Iterator[pa.RecordBatch],
    seed: int,
    tokenizer: prompts.Encoder | None,
    report: Callable[[str], None] | None,
) -> Iterator[bytes]:
    words = prompts.one_token_words(tokenizer) if tokenizer else prompts.WORDS
    index = missed = 0
    for batch in batches:
        ts, isl, osl = _lengths(batch)
        lines: list[str] = []
        size = 0
        for t, i, o in zip(ts, isl, osl, strict=True):
            n = min(i, MAX_PROMPT_TOKENS)
            if tokenizer is None:
                text = prompts.words_for(index, n, seed, words)
            else:
                text, ok = prompts.exact_prompt(index, n, tokenizer, words, seed)
                missed += not ok
            lines.append(json.dumps({"timestamp": t, "text": text, "output_length": o}) + "\n")
            size += len(text)
            index += 1
            # Prompts are large (~6 bytes a token): out every few MB, not once per batch.
            if size >= PROMPT_CHUNK_BYTES:
                yield "".join(lines).encode()
                lines, size = [], 0
        if lines:
            yield "".join(lines).encode()
    if tokenizer is not None and report is not None:
        report(
            f"tokenizer: {index - missed:,} of {index:,} prompts encode to exactly their "
            "input length"
        )


def _csv(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    # CSV has no lists: token_gaps_ms stays in Parquet only.
    drain = _Drain()
    writer = None
    for batch in batches:
        batch = batch.drop_columns(["token_gaps_ms"])
        if writer is None:
            writer = pacsv.CSVWriter(drain, batch.schema)
        writer.write_batch(batch)
        yield drain.take()
    if writer is not None:
        writer.close()
    yield drain.take()


def _parquet(batches: Iterator[pa.RecordBatch]) -> Iterator[bytes]:
    drain = _Drain()
    writer = None
    for batch in batches:
        if writer is None:
            writer = pq.ParquetWriter(drain, batch.schema, compression="zstd")
        writer.write_batch(batch)
        yield drain.take()
    if writer is not None:
        writer.close()
    yield drain.take()


def filename(the_plan: Plan) -> str:
    """A file name naming the engine (or model) and the window's start."""
    flt = the_plan.ask.flt
    who = (flt.engines or flt.models or ("traffic",))[0]
    # ASCII only: the header is latin-1, and a name from the data may hold anything.
    safe = "".join(c if (c.isascii() and c.isalnum()) or c in "-_." else "-" for c in who)[:64]
    when = the_plan.summary.start.strftime("%Y%m%dT%H%M")
    return f"tokenshape-{safe}-{when}{SUFFIXES[the_plan.ask.fmt]}"
