"""Soak: ingest at a fixed rate for a while, with the dashboard and the API being queried.

A `tokenshape serve` subprocess takes --rate records/s from --clients threads (batches sent on
a fixed schedule, retried on 429/503/connection errors as a shipper would) for --seconds, while
another thread keeps asking for the heat map, quantiles, latency trend, traffic and the Shapes
page's content. Every --every seconds it prints throughput, answers by status, p99 ingest and
query latency, how far the clients lag behind their schedule, and the server's RSS. At the end
the server is stopped and every acknowledged record is looked up in the database; the last
line is `soak_lost=<acknowledged records not stored>`.
"""

from __future__ import annotations

import argparse
import http.client
import json
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._server import create_token, free_port, start_server, stop_server  # noqa: E402

GRACE_S = 15.0  # how long a client keeps retrying its last batch after the end
LINE = (
    '{"request_id":"soak-%d-%d","started_at":"%s","model":"%s","engine":"%s","tenant":"team-%d",'
    '"isl":%d,"osl":%d,"ttft_ms":%.1f,"e2e_ms":%.1f,"itl_ms":%.2f,"status":"ok","stream":true}\n'
)
MODELS = (("llama-3.1-8b-instruct", "chat-8b"), ("llama-3.1-70b-instruct", "llm-70b"))
QUERIES = (
    ("heatmap", "GET", "/api/heatmap"),
    ("quantiles", "GET", "/api/quantiles"),
    ("latency", "GET", "/api/latency/trend"),
    ("traffic", "GET", "/api/traffic"),
    ("shapes page", "POST", "/_dash-update-component"),
)


def p99(values: list[float]) -> float:
    """The 99th percentile (nearest rank) of a list, 0 when empty."""
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def rss_mib(pid: int, field_name: str = "VmRSS") -> float:
    """A process's resident memory (VmRSS) or its peak (VmHWM), in MiB."""
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            if line.startswith(field_name + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Tally:
    """What the clients and the query thread saw; swapped out at every report."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    statuses: Counter = field(default_factory=Counter)  # ingest answers over the whole run
    acked: int = 0  # records acknowledged over the whole run
    window_acked: int = 0
    window_latency: list[float] = field(default_factory=list)  # ms, ingest answers
    all_latency: list[float] = field(default_factory=list)
    lag_s: float = 0.0  # worst delay behind the send schedule in the window
    queries: Counter = field(default_factory=Counter)  # query answers by "name status"
    window_query_latency: list[float] = field(default_factory=list)
    all_query_latency: list[float] = field(default_factory=list)


class Soak:
    """The clients, the query thread and the tally, against one server."""

    def __init__(self, port: int, token: str, args: argparse.Namespace):
        self.port, self.token, self.args = port, token, args
        self.tally = Tally()
        self.ranges: list[list[tuple[int, int]]] = [[] for _ in range(args.clients)]
        self.started = time.monotonic()
        self.end = self.started + args.seconds
        self.stop_queries = threading.Event()
        self.t0 = datetime.now(UTC).replace(microsecond=0)

    def body(self, k: int, first: int, n: int) -> bytes:
        """n records of client k with ids soak-k-first .. soak-k-(first+n-1)."""
        out = []
        for i in range(first, first + n):
            model, engine = MODELS[i % 2]
            when = self.t0 - timedelta(seconds=(i * 7919 + k * 104_729) % 86_400)
            isl, osl = 40 + i * 37 % 6000, 1 + i * 13 % 900
            ttft = 30.0 + isl * 0.05
            out.append(
                LINE
                % (
                    k,
                    i,
                    when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    model,
                    engine,
                    i % 5,
                    isl,
                    osl,
                    ttft,
                    ttft + osl * 12.5,
                    12.5,
                )
            )
        return "".join(out).encode()

    def _connect(self) -> http.client.HTTPConnection:
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)

    def _send(self, conn: http.client.HTTPConnection, body: bytes) -> tuple[bool, object]:
        """Post one batch until it is acknowledged (True) or the grace time is over (False)."""
        headers = {
            "Authorization": f"Bearer {self.token}",
            "Content-Type": "application/x-ndjson",
        }
        while time.monotonic() < self.end + GRACE_S:
            sent = time.perf_counter()
            try:
                conn.request("POST", "/v1/requests", body=body, headers=headers)
                answer = conn.getresponse()
                payload = answer.read()
            except (OSError, http.client.HTTPException):
                with self.tally.lock:
                    self.tally.statuses["connection error"] += 1
                conn.close()
                conn = self._connect()
                time.sleep(0.2)
                continue
            ms = (time.perf_counter() - sent) * 1000
            with self.tally.lock:
                self.tally.statuses[str(answer.status)] += 1
                self.tally.window_latency.append(ms)
                self.tally.all_latency.append(ms)
            if answer.status == 200:
                result = json.loads(payload)
                with self.tally.lock:
                    n = result["accepted"] + result["duplicates"]
                    self.tally.acked += n
                    self.tally.window_acked += n
                return True, conn
            if answer.status in (429, 502, 503, 504):
                time.sleep(min(float(answer.getheader("Retry-After") or 1), 5.0))
                continue
            raise SystemExit(f"ingest answered {answer.status}: {payload[:300]!r}")
        return False, conn

    def client(self, k: int) -> None:
        """Send batches of client k on a fixed schedule until the end."""
        args = self.args
        interval = args.batch / (args.rate / args.clients)
        next_at = self.started + k * interval / args.clients  # staggered, not all at once
        seq = 0
        conn = self._connect()
        try:
            while next_at < self.end:
                now = time.monotonic()
                if next_at > now:
                    time.sleep(next_at - now)
                else:
                    with self.tally.lock:
                        self.tally.lag_s = max(self.tally.lag_s, now - next_at)
                ok, conn = self._send(conn, self.body(k, seq, args.batch))
                if ok:
                    self.ranges[k].append((seq, args.batch))
                seq += args.batch
                next_at += interval
        finally:
            conn.close()

    def _page_payload(self, conn: http.client.HTTPConnection) -> bytes:
        """The Dash Pages callback that renders the Shapes page's content, as a browser sends it."""
        conn.request("GET", "/_dash-dependencies")
        deps = json.loads(conn.getresponse().read())
        dep = next(
            d
            for d in deps
            if {"id": "_pages_location", "property": "pathname"}
            in [{"id": i["id"], "property": i["property"]} for i in d["inputs"]]
        )
        values = {"pathname": "/shapes", "search": ""}
        inputs = [
            {"id": i["id"], "property": i["property"], "value": values.get(i["property"])}
            for i in dep["inputs"]
        ]
        outputs = [
            {"id": o.rsplit(".", 1)[0], "property": o.rsplit(".", 1)[1]}
            for o in dep["output"].strip(".").split("...")
        ]
        return json.dumps(
            {
                "output": dep["output"],
                "outputs": outputs,
                "inputs": inputs,
                "changedPropIds": ["_pages_location.pathname"],
                "state": dep.get("state", []),
            }
        ).encode()

    def queries(self) -> None:
        """Ask what a dashboard user asks, in a loop, until told to stop."""
        conn = self._connect()
        page = self._page_payload(conn)
        n = 0
        while not self.stop_queries.is_set():
            name, method, path = QUERIES[n % len(QUERIES)]
            n += 1
            sent = time.perf_counter()
            try:
                if method == "POST":
                    conn.request(
                        method, path, body=page, headers={"Content-Type": "application/json"}
                    )
                else:
                    conn.request(method, path)
                answer = conn.getresponse()
                answer.read()
                status = str(answer.status)
            except (OSError, http.client.HTTPException):
                status = "connection error"
                conn.close()
                conn = self._connect()
            ms = (time.perf_counter() - sent) * 1000
            with self.tally.lock:
                self.tally.queries[f"{name} {status}"] += 1
                self.tally.window_query_latency.append(ms)
                self.tally.all_query_latency.append(ms)
            self.stop_queries.wait(self.args.query_pause)
        conn.close()

    def report(self, pid: int, since: float) -> str:
        """One line for the last window; resets the window."""
        with self.tally.lock:
            t = self.tally
            elapsed = time.monotonic() - since
            line = (
                f"t={time.monotonic() - self.started:5.0f}s  "
                f"ingest {t.window_acked / elapsed:8,.0f} rec/s  "
                f"p99 {p99(t.window_latency):7.1f} ms  lag {t.lag_s:5.2f} s  "
                f"answers {dict(sorted(t.statuses.items()))}  "
                f"queries {len(t.window_query_latency)} p99 {p99(t.window_query_latency):7.1f} ms "
                f"non-200 {sum(v for k, v in t.queries.items() if not k.endswith(' 200'))}  "
                f"rss {rss_mib(pid):6.0f} MiB"
            )
            t.window_acked, t.window_latency, t.window_query_latency, t.lag_s = 0, [], [], 0.0
        return line

    def acknowledged_ids(self) -> pa.Table:
        """Every acknowledged request id."""
        ids = [
            f"soak-{k}-{i}"
            for k, ranges in enumerate(self.ranges)
            for first, n in ranges
            for i in range(first, first + n)
        ]
        return pa.table({"request_id": pa.array(ids, pa.string())})


def _settle(port: int, timeout: float = 120) -> None:
    """Wait until the server has moved every journaled row into the table."""
    deadline = time.monotonic() + timeout
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    while time.monotonic() < deadline:
        conn.request("GET", "/api/health")
        if json.loads(conn.getresponse().read())["writer"]["journal_rows"] == 0:
            break
        time.sleep(0.1)
    conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=120, help="how long to ingest")
    parser.add_argument("--rate", type=float, default=5000, help="records per second, in all")
    parser.add_argument("--clients", type=int, default=4, help="client threads")
    parser.add_argument("--batch", type=int, default=200, help="records per request")
    parser.add_argument("--every", type=float, default=10, help="seconds between reports")
    parser.add_argument("--query-pause", type=float, default=0.25, help="seconds between queries")
    parser.add_argument("--workdir", help="keep the database and server log here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tokenshape-soak-") as tmp:
        work = Path(args.workdir or tmp)
        work.mkdir(parents=True, exist_ok=True)
        db = work / "soak.duckdb"
        token = create_token(db, "soak")
        port = free_port()
        with (work / "server.log").open("ab") as log:
            server = start_server(db, port, log)
            print(
                f"soak: {args.rate:,.0f} records/s from {args.clients} clients in batches of "
                f"{args.batch} for {args.seconds:.0f} s, queries every {args.query_pause} s; "
                f"server pid {server.pid}, RSS at start {rss_mib(server.pid):.0f} MiB",
                flush=True,
            )
            soak = Soak(port, token, args)
            clients = [threading.Thread(target=soak.client, args=(k,)) for k in range(args.clients)]
            querier = threading.Thread(target=soak.queries)
            for t in [*clients, querier]:
                t.start()
            since = time.monotonic()
            while any(t.is_alive() for t in clients):
                for t in clients:
                    t.join(timeout=max(0.0, since + args.every - time.monotonic()))
                if time.monotonic() - since >= args.every or not any(t.is_alive() for t in clients):
                    print(soak.report(server.pid, since), flush=True)
                    since = time.monotonic()
            soak.stop_queries.set()
            querier.join()
            _settle(port)
            peak = rss_mib(server.pid, "VmHWM")
            stop_server(server)
        acked = soak.acknowledged_ids()
        con = duckdb.connect(str(db), read_only=True)
        con.register("acked", acked)
        stored = con.execute("SELECT count(*) FROM requests").fetchone()[0]
        lost = con.execute(
            "SELECT count(*) FROM acked a ANTI JOIN requests r USING (request_id)"
        ).fetchone()[0]
        doubled = (
            stored
            - con.execute("SELECT count(DISTINCT (gateway, request_id)) FROM requests").fetchone()[
                0
            ]
        )
        con.close()
    t = soak.tally
    ran = args.seconds
    print(
        f"ingest: {t.acked:,} records acknowledged in {ran:.0f} s ({t.acked / ran:,.0f}/s, "
        f"target {args.rate:,.0f}/s); p99 {p99(t.all_latency):.1f} ms over "
        f"{len(t.all_latency):,} answers {dict(sorted(t.statuses.items()))}"
    )
    print(
        f"queries: {len(t.all_query_latency):,}, p99 {p99(t.all_query_latency):.1f} ms, "
        f"{dict(sorted(t.queries.items()))}"
    )
    print(f"server peak RSS {peak:,.0f} MiB")
    print(
        f"stored {stored:,} rows; acknowledged {acked.num_rows:,}; stored more than once "
        f"{doubled}; stored without an acknowledgement {stored - (acked.num_rows - lost)}"
    )
    print(f"soak_lost={lost}")
    if lost or doubled:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
