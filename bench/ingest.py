"""Ingest benchmark: tokenshape's HTTP ingest against DuckDB's own read_json of the same data.

Prints records/s for both in each of --rounds alternating rounds, the server's peak RSS, a
decoder comparison that justifies msgspec on the hot path, and as the last line
`ingest_ratio=<http/read_json>`, the median of the rounds' ratios (bar 0.25, goal 0.5).
"""

from __future__ import annotations

import argparse
import http.client
import itertools
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.services.demo import generate  # noqa: E402
from bench._server import create_token, served  # noqa: E402


def make_ndjson(path: Path, n: int) -> None:
    """n demo records as native NDJSON (ISO times, no gateway/received_at)."""
    con = duckdb.connect()
    end = datetime(2026, 11, 23, tzinfo=UTC)
    first = True
    for offset in range(0, n, 250_000):
        table = generate(min(250_000, n - offset), seed=42, end=end, offset=offset)
        con.register("t", table)
        part = path.with_suffix(f".{offset}.part")
        con.execute(
            f"""COPY (SELECT request_id, strftime(started_at, '%Y-%m-%dT%H:%M:%S.%fZ')
                AS started_at, model, engine, tenant, isl, osl, tokens_estimated, ttft_ms,
                e2e_ms, itl_ms, queue_ms, token_gaps_ms, status, error_type, stream,
                cached_tokens FROM t) TO '{part}' (FORMAT json)"""
        )
        with path.open("ab" if not first else "wb") as out, part.open("rb") as src:
            out.write(src.read())
        part.unlink()
        first = False


def reference(path: Path, workdir: Path) -> float:
    """DuckDB's read_json of the file into a table in a fresh database file: records/s."""
    con = duckdb.connect(str(workdir / "ref.duckdb"))
    started = time.perf_counter()
    con.execute(f"CREATE TABLE requests AS SELECT * FROM read_json('{path}')")
    con.execute("CHECKPOINT")
    elapsed = time.perf_counter() - started
    n = con.execute("SELECT count(*) FROM requests").fetchone()[0]
    con.close()
    return n / elapsed


def _rss_peak_kb(pid: int) -> int:
    """Peak resident memory of a process and any children it started, in KiB."""
    total = 0
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            total += _rss_peak_kb(int(child))
    return total


def http_ingest(path: Path, workdir: Path, batch: int, clients: int) -> tuple[float, int, int]:
    """Ship the file over HTTP in batches from concurrent clients: records/s, peak RSS, stored."""
    db = workdir / "tokenshape.duckdb"
    token = create_token(db, "bench")
    port = 8790
    with served(db, port) as server:
        url = server.url
        lines = path.read_bytes().splitlines(keepends=True)
        bodies = [b"".join(lines[i : i + batch]) for i in range(0, len(lines), batch)]
        del lines
        accepted = [0] * clients
        failures: list[str] = []

        def ship(k: int) -> None:
            # The standard library's client: on a 2-core machine that also runs the server,
            # httpx's own overhead took about 40% of the CPU the server is measured on.
            headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-ndjson"}
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            try:
                for body in bodies[k::clients]:
                    while True:
                        conn.request("POST", "/v1/requests", body=body, headers=headers)
                        r = conn.getresponse()
                        payload = r.read()
                        if r.status == 503:
                            time.sleep(float(r.getheader("retry-after", "1")) / 10)
                            continue
                        if r.status != 200:
                            failures.append(payload[:200].decode(errors="replace"))
                        else:
                            accepted[k] += json.loads(payload)["accepted"]
                        break
            finally:
                conn.close()

        threads = [threading.Thread(target=ship, args=(k,)) for k in range(clients)]
        started = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # Count the time until every acknowledged row is visible to queries, not just durable.
        while httpx.get(url + "/api/health").json()["writer"]["journal_rows"]:
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
        if failures:
            raise SystemExit(f"ingest failed: {failures[:3]}")
        peak = _rss_peak_kb(server.pid)
        stored = httpx.get(url + "/api/health").json()["database"]["requests"]
        return sum(accepted) / elapsed, peak, stored


def decoders(path: Path, n: int = 100_000) -> dict[str, float]:
    """Decode + validate n records with each candidate: microseconds per record."""
    import msgspec
    import pydantic

    from ingest.records import RecordIn

    with path.open("rb") as fh:
        lines = list(itertools.islice(fh, n))
    n = len(lines)
    body = b"[" + b",".join(line.strip() for line in lines) + b"]"
    out: dict[str, float] = {}
    decoder = msgspec.json.Decoder(list[RecordIn])
    started = time.perf_counter()
    decoder.decode(body)
    out["msgspec typed Struct"] = (time.perf_counter() - started) / n * 1e6

    class Model(pydantic.BaseModel):
        model: str
        isl: pydantic.NonNegativeInt
        osl: pydantic.NonNegativeInt
        request_id: str | None = None
        started_at: str | float | None = None
        engine: str | None = None
        tenant: str | None = None
        tokens_estimated: bool = False
        ttft_ms: pydantic.NonNegativeFloat | None = None
        e2e_ms: pydantic.NonNegativeFloat | None = None
        itl_ms: pydantic.NonNegativeFloat | None = None
        queue_ms: pydantic.NonNegativeFloat | None = None
        token_gaps_ms: list[pydantic.NonNegativeFloat] | None = None
        status: str = "ok"
        error_type: str | None = None
        stream: bool | None = None
        cached_tokens: pydantic.NonNegativeInt | None = None

    adapter = pydantic.TypeAdapter(list[Model])
    started = time.perf_counter()
    adapter.validate_json(body)
    out["pydantic v2 validate_json"] = (time.perf_counter() - started) / n * 1e6
    try:
        import orjson

        started = time.perf_counter()
        adapter.validate_python(orjson.loads(body))
        out["orjson + pydantic"] = (time.perf_counter() - started) / n * 1e6
    except ImportError:
        pass
    started = time.perf_counter()
    adapter.validate_python(json.loads(body))
    out["json + pydantic"] = (time.perf_counter() - started) / n * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--clients", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5, help="reference/ingest pairs (median)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tokenshape-bench-") as tmp:
        work = Path(tmp)
        data = work / "records.ndjson"
        t0 = time.perf_counter()
        make_ndjson(data, args.records)
        size_mb = data.stat().st_size / 2**20
        print(
            f"data: {args.records:,} records, {size_mb:,.0f} MiB NDJSON "
            f"(generated in {time.perf_counter() - t0:.1f} s)"
        )
        for name, us in decoders(data).items():
            print(f"decode+validate {name:<28} {us:6.2f} us/record")
        # The machine is shared: its speed drifts by a third within a minute. So the two are
        # measured in alternation, round by round, and the ratio is the median of the
        # rounds' ratios, each comparing runs a few seconds apart.
        ratios: list[float] = []
        peak_kb = 0
        for round_no in range(1, args.rounds + 1):
            round_dir = work / f"round{round_no}"
            round_dir.mkdir()
            # Each phase starts with the page cache written back, so neither pays for the
            # disk writes of the one before it (the NDJSON file, the reference's database).
            os.sync()
            ref = reference(data, round_dir)
            os.sync()
            rate, peak, stored = http_ingest(data, round_dir, args.batch, args.clients)
            if stored != args.records:
                raise SystemExit(f"stored {stored} of {args.records} records")
            peak_kb = max(peak_kb, peak)
            ratios.append(rate / ref)
            shutil.rmtree(round_dir)  # two database files a round: keep the disk use flat
            print(
                f"round {round_no}: reference duckdb read_json -> table {ref:>10,.0f} records/s; "
                f"tokenshape HTTP ingest ({args.clients} clients x {args.batch}/batch) "
                f"{rate:>10,.0f} records/s; ratio {rate / ref:.3f}"
            )
        print(f"server peak RSS: {peak_kb / 1024:,.0f} MiB (the largest of the rounds)")
        print(f"ingest_ratio={statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
