"""Benchmark vs production in a real headless Chromium, after the loop a user runs: a day of
chat-8b exported with `tokenshape export` (a sampled Mooncake trace), the benchmark's records
written for exactly that trace as AIPerf's profile_export.jsonl (no GPU here: latencies from a
stated toy model) and brought back with `tokenshape import --format aiperf`; the page must show
both maps with the shapes matching, goodput and latency of both sides and the per-cell table.
The Rightsizing page's replay links lead there."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlencode

import pytest

from tests.support.browser import BROWSER, console_errors, screenshot
from tests.support.cli import cli
from tests.support.database import copy_database
from tests.support.demo import END
from tests.support.server import LiveServer, serve, server_settings

pytestmark = BROWSER

WINDOW = (END - timedelta(days=1), END)
RUN = END + timedelta(hours=6)  # the replay ran after the window
REQUESTS = 300
GATEWAY = "aiperf-replay"


def _aiperf_run(trace: Path, out: Path) -> int:
    """profile_export.jsonl of a replay of `trace`: one record per line at its timestamp, with
    its lengths; TTFT 40 ms + 0.05 ms per prompt token, ITL 9 ms (a toy engine)."""
    t0 = int(RUN.timestamp() * 1e9)
    lines = []
    for k, raw in enumerate(trace.read_text().splitlines()):
        t = json.loads(raw)
        ttft = 40 + 0.05 * t["input_length"]
        e2e = ttft + 9.0 * (t["output_length"] - 1)
        start = t0 + t["timestamp"] * 1_000_000
        metrics = {
            "input_sequence_length": {"value": t["input_length"], "unit": "tokens"},
            "output_sequence_length": {"value": t["output_length"], "unit": "tokens"},
            "time_to_first_token": {"value": ttft, "unit": "ms"},
            "inter_token_latency": {"value": 9.0, "unit": "ms"},
            "request_latency": {"value": e2e, "unit": "ms"},
        }
        meta = {
            "x_request_id": f"replay-{k}",
            "model_name": "meta-llama/Llama-3.1-8B-Instruct",
            "request_start_ns": start,
            "request_end_ns": start + int(e2e * 1e6),
            "was_cancelled": False,
        }
        lines.append(json.dumps({"metadata": meta, "metrics": metrics, "error": None}))
    out.write_text("\n".join(lines) + "\n")
    return len(lines)


@pytest.fixture(scope="module")
def replayed(tmp_path_factory, demo_template) -> Iterator[LiveServer]:
    """Demo traffic, a sampled day of chat-8b exported and its replay imported; the server."""
    tmp = tmp_path_factory.mktemp("compare-browser")
    db = copy_database(demo_template(requests=20_000, days=7), tmp / "t.duckdb")
    trace = tmp / "chat-8b.jsonl"
    args = ["export", "--format", "mooncake", "--engine", "chat-8b", "--db", str(db)]
    args += ["--start", WINDOW[0].isoformat(), "--end", WINDOW[1].isoformat()]
    args += ["--max-requests", str(REQUESTS), "--out", str(trace)]
    proc = cli(*args)
    assert f"{REQUESTS} requests as mooncake" in proc.stderr, proc.stderr
    n = _aiperf_run(trace, tmp / "profile_export.jsonl")
    out = cli(
        "import", str(tmp / "profile_export.jsonl"), "--format", "aiperf", "--gateway", GATEWAY,
        "--db", str(db),
    )  # fmt: skip
    assert f"{n:,} stored" in out.stdout, out.stdout + out.stderr
    yield from serve(server_settings(db), wait=False, clock=lambda: END)


def test_the_replayed_benchmark_beside_production(replayed, browser, tmp_path):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    errors = console_errors(page)
    query = {"engine": "chat-8b", "benchmark": GATEWAY}
    query |= {"start": WINDOW[0].isoformat(), "end": WINDOW[1].isoformat()}
    page.goto(replayed.url + "/compare?" + urlencode(query), wait_until="load")
    page.wait_for_selector("#compare-heatmaps .heatmaplayer", timeout=60_000)
    # The sampled trace keeps the day's shape, so its replay matches production.
    shape = page.locator("#compare-shape").inner_text()
    assert "matches production within" in shape, shape
    # Two maps, one per side, on the same bins.
    assert page.locator("#compare-heatmaps .heatmaplayer").count() == 2
    sides = page.locator("#compare-sides").inner_text()
    assert f"({REQUESTS:,} requests)" in sides and "matched by model" in sides
    goodput = page.locator("#compare-goodput").inner_text()
    latency = page.locator("#compare-latency").inner_text()
    assert "goodput" in goodput.lower() and "TTFT" in latency
    rows = page.locator("#compare-ttft-cells tbody tr")
    assert rows.count() >= 3
    assert "/api/export?" in page.locator("#compare-export").get_attribute("href")
    screenshot(page, tmp_path, "compare")
    assert errors == []


def test_rightsizing_links_to_the_replay_and_the_comparison(replayed, browser):
    page = browser.new_page(viewport={"width": 1366, "height": 900})
    page.goto(replayed.url + "/rightsizing?engine=chat-8b", wait_until="load")
    link = page.wait_for_selector("#rightsizing-export", timeout=60_000)
    href = link.get_attribute("href")
    assert href.startswith("/api/export?") and "engine=chat-8b" in href and "peak=1" in href
    # The link downloads a trace a signed-in user may take (the page's cookie is enough).
    got = page.request.get(replayed.url + href)
    assert got.status == 200, got.text()
    lines = got.text().splitlines()
    assert lines and set(json.loads(lines[0])) == {"timestamp", "input_length", "output_length"}
    page.click("#rightsizing-compare")
    page.wait_for_url("**/compare?engine=chat-8b**")
    page.wait_for_selector("#compare-form")
