"""`tokenshape export` and GET /api/export on demo traffic: records that import back to the same
window, a sampled trace within the distance it states, the busiest hour scaled, time compressed,
AIPerf prompts of the asked length, and clear refusals."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from app.analytics import export as rows
from app.analytics import shapes
from app.analytics.bins import LOG2_EDGES
from app.analytics.filters import Filter
from app.services import export
from app.storage.database import Database
from tests.support.cli import cli
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.server import LiveServer, serve, server_settings

START = END - timedelta(days=3)
WINDOW = {"start": START.isoformat(), "end": END.isoformat()}
HOUR_MS = 3_600_000


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory, demo_template) -> Path:
    """Ten days of demo traffic, ~6,000 requests, ending at END (a copy for this module)."""
    template = demo_template(requests=6_000, days=10, end=END)
    return copy_database(template, tmp_path_factory.mktemp("export") / "demo.duckdb")


@pytest.fixture(scope="module")
def server(demo_db, tmp_path_factory) -> Iterator[LiveServer]:
    """A server over a second copy, so the file-based CLI tests can open demo_db."""
    db = copy_database(demo_db, tmp_path_factory.mktemp("export-live") / "live.duckdb")
    yield from serve(server_settings(db), wait=False)


def _lines(body: bytes) -> list[dict]:
    return [json.loads(line) for line in body.decode().splitlines()]


def _summary(response) -> dict:
    return json.loads(response.headers["X-Tokenshape-Export"])


def _log2_shares(isl: np.ndarray, osl: np.ndarray) -> dict[tuple[int, int], float]:
    i = np.searchsorted(LOG2_EDGES, isl, side="right") - 1
    j = np.searchsorted(LOG2_EDGES, osl, side="right") - 1
    keys, counts = np.unique(np.stack([i, j]), axis=1, return_counts=True)
    return {(int(a), int(b)): c / len(isl) for (a, b), c in zip(keys.T, counts, strict=True)}


def _tvd(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(k, 0) - b.get(k, 0)) for k in set(a) | set(b))


def _window_rows(server: LiveServer, extra: str = "", params: list | None = None) -> np.ndarray:
    rows = (
        server.db.cursor()
        .execute(
            "SELECT isl, osl, epoch_ms(started_at) FROM requests "
            f"WHERE started_at >= ? AND started_at < ? {extra} ORDER BY started_at",
            [START, END, *(params or [])],
        )
        .fetchall()
    )
    return np.array(rows, dtype=np.int64)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_records_import_back_to_the_same_window(demo_db, tmp_path, fresh_db, fmt):
    out = tmp_path / f"window.{fmt}"
    done = cli(
        "export",
        "--db",
        str(demo_db),
        "--format",
        fmt,
        "--start",
        WINDOW["start"],
        "--end",
        WINDOW["end"],
        "--out",
        str(out),
    )
    assert "export written to" in done.stderr and out.exists()
    assert not out.with_name(out.name + ".partial").exists()
    target = tmp_path / "back.duckdb"
    fresh_db(target).close()
    cli("import", str(out), "--format", fmt, "--gateway", "replayed", "--db", str(target))
    flt = Filter(start=START, end=END)
    with (
        Database(demo_db, read_only=True).open() as src,
        Database(target, read_only=True).open() as back,
    ):
        a, b = src.cursor(), back.cursor()
        hm_a, hm_b = shapes.heatmap(a, flt), shapes.heatmap(b, flt)
        assert hm_a.total > 1000 and hm_a.total == hm_b.total
        assert np.array_equal(hm_a.counts, hm_b.counts)  # every heat-map cell
        q_a, q_b = shapes.quantiles(a, flt, exact=True), shapes.quantiles(b, flt, exact=True)
        for measure in ("isl", "osl", "ttft_ms", "e2e_ms"):
            for name, value in q_a[measure].items():
                assert q_b[measure][name] == pytest.approx(value, rel=1e-9), (measure, name)
        per_dim = (
            "SELECT model, engine, tenant, status, count(*) FROM requests "
            "WHERE started_at >= ? AND started_at < ? GROUP BY ALL ORDER BY ALL"
        )
        assert (
            a.execute(per_dim, [START, END]).fetchall()
            == b.execute(per_dim, [START, END]).fetchall()
        )


def test_sampled_trace_stays_within_the_distance_it_states(server):
    params = {**WINDOW, "format": "mooncake", "max_requests": 800}
    with server.client() as c:
        r = c.get("/api/export", params=params)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    assert "attachment" in r.headers["content-disposition"]
    trace, summary = _lines(r.content), _summary(r)
    assert len(trace) == summary["rows"] == 800
    assert set(trace[0]) == {"timestamp", "input_length", "output_length"}  # no hash_ids
    ts = np.array([t["timestamp"] for t in trace])
    assert (np.diff(ts) >= 0).all() and ts[0] >= 0 and ts[-1] < 3 * 24 * HOUR_MS
    src = _window_rows(server)
    isl = np.array([t["input_length"] for t in trace])
    osl = np.array([t["output_length"] for t in trace])
    # The distance the summary states is the one measured here, independently, and it is small.
    src_shares = _log2_shares(np.maximum(src[:, 0], 1), np.maximum(src[:, 1], 1))
    measured = _tvd(src_shares, _log2_shares(isl, osl))
    fid = summary["fidelity"]
    assert fid["tvd"] <= 0.05 and measured <= 0.05
    assert abs(fid["tvd"] - measured) < 0.01  # the file writes 0 tokens as 1, the figure does not
    assert fid["isl_source"][0] == int(np.percentile(src[:, 0], 50, method="inverted_cdf"))
    assert abs(np.percentile(isl, 50) / fid["isl_source"][0] - 1) < 0.1
    # The arrival pattern: requests per stated bucket follow the source's.
    bucket = fid["bucket_s"] * 1000
    n = 3 * 24 * HOUR_MS // bucket
    src_t = src[:, 2] - src[0, 2]
    a = np.bincount(src_t // bucket, minlength=n)[:n]
    b = np.bincount(ts // bucket, minlength=n)[:n]
    assert np.corrcoef(a, b)[0, 1] > 0.85
    assert fid["profile_correlation"] == pytest.approx(np.corrcoef(a, b)[0, 1], abs=0.05)


def test_peak_is_the_busiest_hour_scaled(server):
    hours = (
        server.db.cursor()
        .execute(
            "SELECT time_bucket(INTERVAL 1 hour, started_at) h, count(*) n FROM requests "
            "WHERE started_at >= ? AND started_at < ? GROUP BY h ORDER BY n DESC, h LIMIT 1",
            [START, END],
        )
        .fetchone()
    )
    busiest, n = hours
    with server.client() as c:
        two = c.get("/api/export", params={**WINDOW, "peak": 2})
        half = c.get("/api/export", params={**WINDOW, "peak": 1.5})
    assert two.status_code == 200 and half.status_code == 200
    s2 = _summary(two)
    assert (
        s2["peak_hour"].startswith(busiest.astimezone().isoformat()[:13]) or s2["rows_source"] == n
    )
    assert s2["rows_source"] == n and len(_lines(two.content)) == 2 * n
    assert len(_lines(half.content)) == n + round(0.5 * n)
    ts = np.array([t["timestamp"] for t in _lines(two.content)])
    assert ts.min() >= 0 and ts.max() < HOUR_MS  # copies wrap inside the hour
    # Every original shape appears exactly twice.
    hour_rows = (
        server.db.cursor()
        .execute(
            "SELECT greatest(isl, 1), greatest(osl, 1) FROM requests WHERE started_at >= ? AND "
            "started_at < ? + INTERVAL 1 hour",
            [busiest, busiest],
        )
        .fetchall()
    )
    got = sorted((t["input_length"], t["output_length"]) for t in _lines(two.content))
    assert got == sorted(hour_rows * 2)


def test_peak_never_leaves_the_asked_window(server):
    """The busiest clock hour is cut to --start/--end: a window starting mid-hour."""
    with server.client() as c:
        whole = c.get("/api/export/summary", params={**WINDOW, "peak": 1}).json()
    hour = whole["peak_hour"]
    start = datetime.fromisoformat(hour) + timedelta(minutes=20)
    end = start + timedelta(minutes=30)
    params = {"start": start.isoformat(), "end": end.isoformat(), "peak": 1}
    with server.client() as c:
        r = c.get("/api/export", params=params)
    assert r.status_code == 200, r.text
    s = _summary(r)
    assert s["start"] == start.isoformat() and s["end"] == end.isoformat()
    n = (
        server.db.cursor()
        .execute(
            "SELECT count(*) FROM requests WHERE started_at >= ? AND started_at < ?", [start, end]
        )
        .fetchone()[0]
    )
    ts = [t["timestamp"] for t in _lines(r.content)]
    assert len(ts) == s["rows"] == n and 0 <= min(ts) and max(ts) < 30 * 60_000


def test_the_file_name_is_plain_ascii_whatever_the_engine_is_called(server):
    record = {
        "request_id": "unicode-1",
        "started_at": (END - timedelta(hours=1)).isoformat(),
        "model": "m",
        "engine": 'llama-中文"x',
        "isl": 10,
        "osl": 5,
    }
    with server.client(server.token("ingest", gateway="odd")) as c:
        assert c.post("/v1/requests", json=[record]).json()["accepted"] == 1
    server.settle()
    with server.client() as c:
        r = c.get("/api/export", params={**WINDOW, "engine": record["engine"]})
    assert r.status_code == 200, r.text
    disposition = r.headers["Content-Disposition"]
    assert disposition.startswith('attachment; filename="tokenshape-llama----x-')
    assert len(_lines(r.content)) == 1


def test_speedup_compresses_time_and_keeps_the_order(server):
    with server.client() as c:
        one = _lines(c.get("/api/export", params={**WINDOW, "max_requests": 300}).content)
        fast = _lines(
            c.get("/api/export", params={**WINDOW, "max_requests": 300, "speedup": 24}).content
        )
    assert [t["input_length"] for t in one] == [t["input_length"] for t in fast]
    for a, b in zip(one, fast, strict=True):
        assert abs(b["timestamp"] - a["timestamp"] / 24) <= 1
    assert fast[-1]["timestamp"] < 3 * HOUR_MS  # three days in three hours


def test_aiperf_prompts_have_the_asked_length(server):
    with server.client() as c:
        r = c.get("/api/export", params={**WINDOW, "format": "aiperf", "max_requests": 40})
    assert r.status_code == 200
    lines = _lines(r.content)
    assert len(lines) == 40
    heads = set()
    for line in lines:
        assert set(line) == {"timestamp", "text", "output_length"}
        assert line["output_length"] >= 1
        heads.add(line["text"][:30])
    mooncake = _lines(
        server.client().get("/api/export", params={**WINDOW, "max_requests": 40}).content
    )
    assert [len(x["text"].split(" ")) for x in lines] == [m["input_length"] for m in mooncake]
    assert len(heads) == 40  # no two prompts share a prefix


@pytest.mark.parametrize("fmt", ["mooncake", "parquet"])
def test_a_window_read_in_time_slices_is_the_same_file(demo_db, monkeypatch, fmt):
    """Full-window exports sort one time slice at a time (bounded memory): the same bytes."""
    ask = export.ExportAsk(Filter(start=START, end=END), fmt)

    def written() -> bytes:
        with Database(demo_db, read_only=True).open() as db:
            cur = db.cursor()
            return b"".join(export.chunks(cur, export.plan(cur, ask, END)))

    whole = written()
    monkeypatch.setattr(rows, "SLICE_ROWS", 97)  # ~20 slices of the window's ~1,900 rows
    sliced = written()
    if fmt == "parquet":
        whole_t, sliced_t = pq.read_table(io.BytesIO(whole)), pq.read_table(io.BytesIO(sliced))
        assert whole_t.num_rows > 1000 and whole_t.equals(sliced_t)
    else:
        assert len(whole.splitlines()) > 1000 and sliced == whole


@pytest.mark.parametrize("block", [512, 128])
def test_vllm_lines_carry_fresh_hash_ids_covering_each_prompt(server, block):
    with server.client() as c:
        base = _lines(c.get("/api/export", params={**WINDOW, "max_requests": 60}).content)
        params = {**WINDOW, "max_requests": 60, "format": "vllm", "hash_block": block}
        r = c.get("/api/export", params=params)
    assert r.status_code == 200
    hashed = _lines(r.content)
    note = json.loads(r.headers["X-Tokenshape-Export"])["lines"]
    assert any(f"one per {block} prompt tokens" in line for line in note)
    # The Mooncake lines of the same sample, each with ceil(ISL / block) ids never seen before.
    assert [{k: v for k, v in h.items() if k != "hash_ids"} for h in hashed] == base
    ids = [i for h in hashed for i in h["hash_ids"]]
    assert ids == list(range(len(ids)))
    assert [len(h["hash_ids"]) for h in hashed] == [-(-b["input_length"] // block) for b in base]


def test_cli_through_the_server_writes_what_the_api_streams(server, tmp_path):
    out = tmp_path / "trace.jsonl"
    done = cli(
        "export",
        "--url",
        server.url,
        "--start",
        WINDOW["start"],
        "--end",
        WINDOW["end"],
        "--max-requests",
        "200",
        "--out",
        str(out),
    )
    assert "200 requests as mooncake" in done.stderr and "total variation" in done.stderr
    with server.client() as c:
        direct = c.get("/api/export", params={**WINDOW, "max_requests": 200}).content
    assert out.read_bytes() == direct


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"format": "bogus"}, "format"),
        ({"start": END.isoformat(), "end": START.isoformat()}, "start: must be before end"),
        ({"start": "2020-01-01T00:00Z", "end": "2020-01-02T00:00Z"}, "no stored requests"),
        ({**WINDOW, "engine": "no-such-engine"}, "engine no-such-engine"),
        ({**WINDOW, "peak": 0}, "peak"),
        ({**WINDOW, "max_requests": 0}, "max_requests"),
        ({**WINDOW, "speedup": -2}, "speedup"),
        ({**WINDOW, "format": "vllm", "hash_block": 0}, "hash_block"),
        ({**WINDOW, "speedup": 1e-300}, "speedup"),
        ({**WINDOW, "engine": "chat-8b", "scale": 1e-5}, "scale: 1e-05 leaves none"),
    ],
)
def test_bad_asks_get_a_clear_422(server, params, expected):
    with server.client() as c:
        r = c.get("/api/export", params=params)
        s = c.get("/api/export/summary", params=params)
    assert r.status_code == 422 and s.status_code == 422
    assert expected in r.text


def test_cli_refusals_name_the_fix(demo_db, tmp_path):
    empty = cli(
        "export",
        "--db",
        str(demo_db),
        "--start",
        "2020-01-01",
        "--end",
        "2020-01-02",
        "--out",
        str(tmp_path / "x.jsonl"),
        check=False,
    )
    assert empty.returncode == 2 and "widen the window" in empty.stderr
    assert not (tmp_path / "x.jsonl").exists()
    tok = cli(
        "export", "--db", str(demo_db), "--format", "csv", "--tokenizer", "t.json", check=False
    )
    assert tok.returncode == 2 and "--format aiperf" in tok.stderr
    block = cli("export", "--db", str(demo_db), "--hash-block", "128", check=False)
    assert block.returncode == 2 and "--format vllm" in block.stderr


def test_export_needs_a_read_token(secured):
    assert secured.client().get("/api/export").status_code == 401
    with secured.client(secured.token("read")) as c:
        r = c.get("/api/export", params={"start": "2020-01-01T00:00Z", "end": "2020-01-02T00:00Z"})
    assert r.status_code == 422 and "no stored requests" in r.text
