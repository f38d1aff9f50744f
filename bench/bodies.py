"""Worst bodies: the server's peak memory under tiny gzip bodies that inflate to huge batches.

For each ingest route (/v1/requests as JSON and NDJSON, /v1/litellm, /v1/traces as protobuf and
JSON, /v1/logs) a `tokenshape serve` subprocess, fresh for each body, gets --concurrency copies
at once of each of the route's worst bodies: gzip-compressed, each under the body limit once
inflated (TOKENSHAPE_MAX_BODY_BYTES, 16 MiB): millions of `{}` or of empty spans, 100k items
(the item limit) stuffed with tiny nested containers, one item whose unknown field holds 16 MB
of `[{},…]`, or (with a NaN, where that sends it to json.loads) 3 million one-character
strings, 20x their size once built. The reference, measured in the same run, is valid batches
of the same size (NDJSON records, and real GenAI spans). Per body it prints the answers'
statuses and slowest time, and the server's RSS before and at its peak (VmHWM from /proc, the
start's own peak reset through /proc/<pid>/clear_refs). The bar: peak RSS under --bar-mib (1
GiB) for every worst body; the script exits 1 when one passes it. A server past --kill-mib is
killed (the machine is shared) and counts as over the bar.
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._server import create_token, free_port, start_server, stop_server  # noqa: E402

LIMIT = 16 * 1024 * 1024  # the default TOKENSHAPE_MAX_BODY_BYTES
ITEMS = 100_000  # the default TOKENSHAPE_MAX_ITEMS_PER_REQUEST
T0 = 1_795_000_000_000_000_000  # ns
JSON, NDJSON, PROTOBUF = "application/json", "application/x-ndjson", "application/x-protobuf"


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _fill(head: bytes, unit: bytes, tail: bytes, sep: bytes = b",") -> bytes:
    """head + unit, unit, … + tail, as many units as fit under LIMIT."""
    n = (LIMIT - len(head) - len(tail) + len(sep)) // (len(unit) + len(sep))
    return head + sep.join([unit] * n) + tail


def _stuffed(item_head: bytes, item_tail: bytes, count: int, sep: bytes, wrap=(b"[", b"]")):
    """`count` items, each holding as many `[]` as fit, all together under LIMIT."""
    room = (LIMIT - len(wrap[0]) - len(wrap[1])) // count - len(sep)
    inner = (room - len(item_head) - len(item_tail) + 1) // 3
    item = item_head + b",".join([b"[]"] * inner) + item_tail
    return wrap[0] + sep.join([item] * count) + wrap[1]


def _empty_spans(count_field: bytes = b"\x12\x00") -> bytes:
    """ResourceSpans{ScopeSpans{Span{} x as many as fit}} (the same bytes for logs)."""
    n = (LIMIT - 16) // len(count_field)
    return _field(1, _field(2, count_field * n))


def _attribute_spans(spans: int, attributes: int | None = None) -> bytes:
    """`spans` spans each with as many empty attributes (Span.attributes = 9) as fit; the
    same bytes are LogRecord.attributes = 6 for logs when built with `_log_attribute_records`."""
    per = attributes or (LIMIT - 16) // spans // 2 - 2
    span = _field(2, b"\x4a\x00" * per)
    return _field(1, _field(2, span * spans))


def _log_attribute_records(records: int, attributes: int | None = None) -> bytes:
    per = attributes or (LIMIT - 16) // records // 2 - 2
    record = _field(2, b"\x32\x00" * per)  # LogRecord.attributes = 6
    return _field(1, _field(2, record * records))


def _one_span_with(attributes_field: int) -> bytes:
    kv = _varint(attributes_field << 3 | 2) + b"\x00"
    return _field(1, _field(2, _field(2, kv * ((LIMIT - 32) // len(kv)))))


def _native_reference(ndjson: bool) -> bytes:
    line = (
        '{"request_id":"ref-%d","started_at":"2026-11-20T12:00:00Z","model":"llama-3.1-8b-'
        'instruct","engine":"chat-8b","tenant":"team-1","isl":%d,"osl":%d,"ttft_ms":80.5,'
        '"e2e_ms":2400.0,"status":"ok","stream":true}'
    )
    lines = []
    size = 2
    for i in range(ITEMS):
        text = line % (i, 100 + i % 4000, 10 + i % 800)
        size += len(text) + 1
        if size >= LIMIT:
            break
        lines.append(text)
    if ndjson:
        return ("\n".join(lines) + "\n").encode()
    return ("[" + ",".join(lines) + "]").encode()


def _spans_reference(logs: bool = False) -> bytes:
    """Real GenAI spans (13 attributes each) up to the body limit, as protobuf."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue

    def kv(key: str, **value) -> KeyValue:
        return KeyValue(key=key, value=AnyValue(**value))

    request = ExportTraceServiceRequest()
    scope = request.resource_spans.add().scope_spans.add()
    one = None
    for i in range(ITEMS):
        span = scope.spans.add(
            trace_id=i.to_bytes(16, "big"),
            span_id=i.to_bytes(8, "big"),
            name="chat llama-3.1-8b-instruct",
            kind=3,
            start_time_unix_nano=T0 + i * 1000,
            end_time_unix_nano=T0 + i * 1000 + 2_500_000_000,
        )
        span.attributes.extend(
            [
                kv("gen_ai.operation.name", string_value="chat"),
                kv("gen_ai.system", string_value="openai"),
                kv("gen_ai.request.model", string_value="llama-3.1-8b-instruct"),
                kv("gen_ai.response.model", string_value="llama-3.1-8b-instruct"),
                kv("gen_ai.response.id", string_value=f"chatcmpl-{i:012d}"),
                kv("gen_ai.usage.input_tokens", int_value=1000 + i % 3000),
                kv("gen_ai.usage.output_tokens", int_value=100 + i % 700),
                kv("gen_ai.response.time_to_first_chunk", double_value=0.12),
                kv("gen_ai.request.max_tokens", int_value=1024),
                kv("gen_ai.request.temperature", double_value=0.7),
                kv("server.address", string_value="vllm-chat-8b"),
                kv("server.port", int_value=8000),
            ]
        )
        one = one or span.ByteSize() + 4
        if (i + 2) * one >= LIMIT - 1024:
            break
    return request.SerializeToString()


@dataclass
class Body:
    """One body to send: its route, media type, what it is, how to build it inflated."""

    route: str
    media: str
    name: str
    build: Callable[[], bytes]
    reference: bool = False


# A one-character string json.loads cannot share (not Latin-1): ~60 bytes built, 3 sent.
STR = '"\u0100"'.encode()

BODIES = [
    Body("/v1/requests", NDJSON, "reference: valid records", lambda: _native_reference(True), True),
    Body("/v1/requests", JSON, "8M `{}` items", lambda: _fill(b"[", b"{}", b"]")),
    Body("/v1/requests", JSON, "8M `0` items", lambda: _fill(b"[", b"0", b"]")),
    Body(
        "/v1/requests",
        JSON,
        "100k items of tiny nested containers",
        lambda: _stuffed(b'{"model":"m","isl":1,"osl":1,"x":[', b"]}", ITEMS, b","),
    ),
    Body(
        "/v1/requests",
        JSON,
        "one item, 16 MB unknown field `[{},…]`",
        lambda: _fill(b'[{"model":"m","isl":1,"osl":1,"x":[', b"{}", b"]}]"),
    ),
    Body(
        "/v1/requests",
        JSON,
        "one item NaN + 3M 1-char strings",
        lambda: _fill(b'[{"model":"m","isl":1,"osl":1,"ttft_ms":NaN,"x":[', STR, b"]}]"),
    ),
    Body("/v1/requests", NDJSON, "8M `{}` lines", lambda: _fill(b"", b"{}", b"\n", b"\n")),
    Body(
        "/v1/requests",
        NDJSON,
        "one line NaN + 3M 1-char strings",
        lambda: _fill(b'{"model":"m","isl":1,"osl":1,"ttft_ms":NaN,"x":[', STR, b"]}\n"),
    ),
    Body(
        "/v1/requests",
        NDJSON,
        "100k lines of tiny nested containers",
        lambda: _stuffed(b'{"model":"m","isl":1,"osl":1,"x":[', b"]}", ITEMS, b"\n", (b"", b"\n")),
    ),
    Body(
        "/v1/requests",
        NDJSON,
        "one line, 16 MB unknown field `[{},…]`",
        lambda: _fill(b'{"model":"m","isl":1,"osl":1,"x":[', b"{}", b"]}\n"),
    ),
    Body("/v1/litellm", JSON, "8M `{}` items", lambda: _fill(b"[", b"{}", b"]")),
    Body(
        "/v1/litellm",
        JSON,
        "one item NaN + 3M 1-char strings",
        lambda: _fill(b'[{"model":"m","startTime":NaN,"x":[', STR, b"]}]"),
    ),
    Body(
        "/v1/litellm",
        JSON,
        "100k items of tiny nested containers",
        lambda: _stuffed(b'{"model":"m","x":[', b"]}", ITEMS, b","),
    ),
    Body(
        "/v1/litellm",
        JSON,
        "one item, 16 MB unknown field `[{},…]`",
        lambda: _fill(b'[{"model":"m","x":[', b"{}", b"]}]"),
    ),
    Body("/v1/traces", PROTOBUF, "reference: real GenAI spans", _spans_reference, True),
    Body("/v1/traces", PROTOBUF, "8M empty spans", _empty_spans),
    Body(
        "/v1/traces",
        PROTOBUF,
        "99k spans x 80 empty attributes",
        lambda: _attribute_spans(99_000, 80),
    ),
    Body("/v1/traces", PROTOBUF, "one span, 8M empty attributes", lambda: _one_span_with(9)),
    Body(
        "/v1/traces",
        PROTOBUF,
        "8M unknown varint fields",
        lambda: _fill(b"", b"\x08\x00", b"", b""),
    ),
    Body(
        "/v1/traces",
        JSON,
        "one span, 3M 1-char strings",
        lambda: _fill(b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"x":[', STR, b"]}]}]}]}"),
    ),
    Body(
        "/v1/traces",
        JSON,
        "5M `{}` spans",
        lambda: _fill(b'{"resourceSpans":[{"scopeSpans":[{"spans":[', b"{}", b"]}]}]}"),
    ),
    Body(
        "/v1/traces",
        JSON,
        "100k spans of tiny nested containers",
        lambda: _stuffed(
            b'{"attributes":[',
            b"]}",
            ITEMS,
            b",",
            (b'{"resourceSpans":[{"scopeSpans":[{"spans":[', b"]}]}]}"),
        ),
    ),
    Body(
        "/v1/traces",
        JSON,
        "one span, 16 MB unknown field `[{},…]`",
        lambda: _fill(b'{"resourceSpans":[{"scopeSpans":[{"spans":[{"x":[', b"{}", b"]}]}]}]}"),
    ),
    Body("/v1/logs", PROTOBUF, "8M empty log records", _empty_spans),
    Body(
        "/v1/logs",
        PROTOBUF,
        "99k records x 80 empty attributes",
        lambda: _log_attribute_records(99_000, 80),
    ),
    Body("/v1/logs", PROTOBUF, "one record, 8M empty attributes", lambda: _one_span_with(6)),
    Body(
        "/v1/logs",
        JSON,
        "5M `{}` log records",
        lambda: _fill(b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[', b"{}", b"]}]}]}"),
    ),
    Body(
        "/v1/logs",
        JSON,
        "one record, 3M 1-char strings",
        lambda: _fill(b'{"resourceLogs":[{"scopeLogs":[{"logRecords":[{"x":[', STR, b"]}]}]}]}"),
    ),
]


def status_mib(pid: int, name: str) -> float:
    """A /proc/<pid>/status memory figure (VmRSS, VmHWM) in MiB; 0 once the process is gone."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


@dataclass
class Outcome:
    """What one body's concurrent sends saw."""

    body: Body
    inflated: int
    gzipped: int
    before_mib: float
    peak_mib: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    slowest_s: float = 0.0
    killed: bool = False
    detail: str = ""

    def passed(self, bar_mib: float) -> bool:
        return not self.killed and self.peak_mib < bar_mib


def _send(url: str, token: str, body: Body, data: bytes, out: Outcome, lock) -> None:
    headers = {
        "Authorization": f"Bearer {token}",
        "Content-Type": body.media,
        "Content-Encoding": "gzip",
    }
    started = time.monotonic()
    try:
        r = httpx.post(url + body.route, content=data, headers=headers, timeout=900)
        status, text = (
            str(r.status_code),
            r.text if "json" in r.headers.get("content-type", "") else "",
        )
    except httpx.HTTPError as exc:
        status, text = type(exc).__name__, ""
    with lock:
        out.statuses[status] += 1
        out.slowest_s = max(out.slowest_s, time.monotonic() - started)
        if text and not out.detail:
            out.detail = text[:160]


def run_body(server, token: str, body: Body, concurrency: int, kill_mib: float) -> Outcome:
    """Send `concurrency` copies of one body at once; the server's peak RSS while they ran."""
    inflated = body.build()
    data = gzip.compress(inflated, 6)
    out = Outcome(body, len(inflated), len(data), status_mib(server.pid, "VmRSS"))
    del inflated
    Path(f"/proc/{server.pid}/clear_refs").write_text("5")  # VmHWM := VmRSS
    lock = threading.Lock()
    sends = [
        threading.Thread(target=_send, args=(server.url, token, body, data, out, lock))
        for _ in range(concurrency)
    ]
    for t in sends:
        t.start()
    while any(t.is_alive() for t in sends):
        if status_mib(server.pid, "VmRSS") > kill_mib:
            out.killed = True
            out.peak_mib = status_mib(server.pid, "VmHWM")
            server.proc.kill()
        time.sleep(0.02)
    for t in sends:
        t.join()
    if not out.killed:
        out.peak_mib = status_mib(server.pid, "VmHWM")
    return out


class Served:
    """A server on a database, restartable (fresh per route, or after a kill)."""

    def __init__(self, db: Path, log):
        self.db, self.log = db, log
        self.proc = None

    def start(self) -> None:
        port = free_port()
        self.proc = start_server(self.db, port, self.log)
        self.pid, self.url = self.proc.pid, f"http://127.0.0.1:{port}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            stop_server(self.proc)
        self.proc = None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--concurrency", type=int, default=4, help="copies of a body at once")
    parser.add_argument("--bar-mib", type=float, default=1024, help="peak RSS bar, MiB")
    parser.add_argument("--kill-mib", type=float, default=4096, help="kill the server above")
    parser.add_argument("--route", action="append", help="only these routes (repeatable)")
    parser.add_argument("--workdir", help="keep the database and server log here")
    args = parser.parse_args()
    bodies = [b for b in BODIES if not args.route or b.route in args.route]
    outcomes: list[Outcome] = []
    with tempfile.TemporaryDirectory(prefix="tokenshape-bodies-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        db = work / "bodies.duckdb"
        token = create_token(db, "bodies")
        with (work / "server.log").open("ab") as log:
            server = Served(db, log)
            for body in bodies:
                # A fresh server for each body: what one left behind (Python keeps the memory
                # it freed) is not counted against the next.
                server.start()
                out = run_body(server, token, body, args.concurrency, args.kill_mib)
                outcomes.append(out)
                verdict = (
                    "reference"
                    if body.reference
                    else ("ok" if out.passed(args.bar_mib) else "OVER THE BAR")
                )
                print(
                    f"{body.route:13} {body.media.split('/')[1]:10} {body.name:40} "
                    f"{out.inflated / 2**20:5.1f} MiB in {out.gzipped / 1024:7.0f} KiB gzip: "
                    f"{dict(out.statuses)} slowest {out.slowest_s:6.1f} s; server RSS "
                    f"{out.before_mib:5.0f} -> peak {out.peak_mib:6.0f} MiB"
                    f"{' (killed)' if out.killed else ''}  {verdict}",
                    flush=True,
                )
                if out.detail and not body.reference:
                    print(f"    {out.detail}", flush=True)
                if out.killed:
                    server.proc.wait()
                    server.proc = None
                server.stop()
    worst = [o for o in outcomes if not o.body.reference]
    over = [o for o in worst if not o.passed(args.bar_mib)]
    print(
        f"bodies: {len(worst)} worst bodies x {args.concurrency} at once; "
        f"peak RSS max {max((o.peak_mib for o in worst), default=0):,.0f} MiB "
        f"(bar {args.bar_mib:,.0f}); over the bar: {len(over)}"
        + "".join(f"\n  {o.body.route} {o.body.name}: {o.peak_mib:,.0f} MiB" for o in over)
    )
    print(f"bodies_over_bar={len(over)}")
    if over:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
