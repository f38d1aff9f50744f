"""A benchmark run as AIPerf writes it (profile_export.jsonl, one record per request), made
deterministically so tests can import it through `tokenshape import --format aiperf`."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import numpy as np


def aiperf_export(
    path: Path,
    *,
    requests: int,
    start: datetime,
    isl_median: float,
    osl_median: float,
    sigma: float = 0.4,
    ttft_ms: float = 60.0,
    itl_ms: float = 8.0,
    concurrency: int = 4,
    model: str = "meta-llama/Llama-3.1-8B-Instruct",
    errors: int = 0,
    seed: int = 7,
) -> Path:
    """Write `requests` AIPerf records (and `errors` failed ones) starting at `start`: ISL and
    OSL log-normal around their medians, TTFT growing with the prompt, ITL near `itl_ms`,
    `concurrency` requests at a time back to back. Returns the path."""
    rng = np.random.default_rng(seed)
    isl = np.maximum(1, np.round(isl_median * np.exp(rng.normal(0, sigma, requests)))).astype(int)
    osl = np.maximum(2, np.round(osl_median * np.exp(rng.normal(0, sigma, requests)))).astype(int)
    ttft = ttft_ms * (0.5 + isl / max(isl_median, 1) / 2) * np.exp(rng.normal(0, 0.1, requests))
    itl = itl_ms * np.exp(rng.normal(0, 0.05, requests))
    e2e = ttft + itl * (osl - 1)
    t0 = int(start.timestamp() * 1e9)
    lanes = np.zeros(concurrency)  # when each of the `concurrency` lanes is next free, in ms
    lines = []
    for k in range(requests):
        lane = int(np.argmin(lanes))
        begin = t0 + int(lanes[lane] * 1e6)
        lanes[lane] += e2e[k]
        lines.append(
            {
                "metadata": {
                    "x_request_id": f"bench-{k}",
                    "model_name": model,
                    "request_start_ns": begin,
                    "request_end_ns": begin + int(e2e[k] * 1e6),
                    "was_cancelled": False,
                },
                "metrics": {
                    "input_sequence_length": {"value": int(isl[k]), "unit": "tokens"},
                    "output_sequence_length": {"value": int(osl[k]), "unit": "tokens"},
                    "time_to_first_token": {"value": float(ttft[k]), "unit": "ms"},
                    "inter_token_latency": {"value": float(itl[k]), "unit": "ms"},
                    "request_latency": {"value": float(e2e[k]), "unit": "ms"},
                },
                "error": None,
            }
        )
    for k in range(errors):
        lines.append(
            {
                "metadata": {
                    "x_request_id": f"bench-error-{k}",
                    "model_name": model,
                    "request_start_ns": t0 + k,
                },
                "metrics": {},
                "error": {"code": 503, "type": "ServiceUnavailable", "message": "busy"},
            }
        )
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
