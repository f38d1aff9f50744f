"""Performance-model benchmark: a whole engine's grid of predictions, cold and cached.

The grid is what the seasonal search and the engine views ask of one engine: 14 ISL values ×
14 OSL values (16 … 131,072 and 1 … 8,192, log-spaced) × 9 batch sizes (1 … 256) = 1,764 steps
of one build (Llama-3.1-8B, bf16, vLLM on H100: measured kernel data; and on L4: roofline,
three library calls a step). Measured, in this process:
(a) reference: the same 1,764 points as bare library calls (run_static + run_agg) with no
    tokenshape code around them;
(b) the grid through app/services/perfmodel.py's StepModel, cold (a new build: nothing cached);
(c) the grid again, cached (what a second request for the same engine costs).
Library start-up (imports, loading the kernel tables: about 1-2 s once per process) is timed
apart. Last lines: `grid_cold_s=…` (bar < 2 s), `adapter_ratio=<(b)/(a)>` (the adapter's own
cost; goal <= 1.2) and `cached_speedup=<(b)/(c)>`.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from app.services import modelconfigs, perfmodel  # noqa: E402
from app.services.perfmodel import GpuFigures  # noqa: E402

ISL = [int(x) for x in np.geomspace(16, 131072, 14)]
OSL = [int(x) for x in np.geomspace(1, 8192, 14)]
BATCH = [1, 2, 4, 8, 16, 32, 64, 128, 256]
L4 = GpuFigures("L4", int(22.05 * 2**30), 300e9, 121e12, 242.5e12, 0, 89, True)


def _grid(step) -> float:  # type: ignore[no-untyped-def]
    t = time.perf_counter()
    for i in ISL:
        for o in OSL:
            for b in BATCH:
                step(i, o, b)
    return time.perf_counter() - t


def main() -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--step-tokens", type=int, default=8192)
    args = parser.parse_args()
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)

    t = time.perf_counter()
    path, _ = modelconfigs.resolve("meta-llama/Llama-3.1-8B-Instruct", None)
    target = perfmodel.target_for("vllm", "h100_sxm", None, lambda: L4)
    warm = perfmodel.step_model(path, target, 1, 1, "bf16", "bf16", args.step_tokens + 1)
    warm.step(1024, 128, 8)  # loads the kernel tables
    startup = time.perf_counter() - t

    # (a) the bare library, on a model and back end of its own.
    common, config, pdb, factory, get_model = perfmodel._sdk()
    db = pdb.get_database_view("h100_sxm", "vllm", target.version)
    model = get_model(
        path, config.ModelConfig(tp_size=1, pp_size=1, moe_tp_size=1, moe_ep_size=1), "vllm"
    )
    backend = factory.get_backend("vllm")

    def bare(i: int, o: int, b: int) -> None:
        backend.run_static(
            model, db, config.RuntimeConfig(batch_size=1, isl=i, osl=1), mode="static_ctx"
        ).get_result_dict()
        backend.run_agg(
            model, db, config.RuntimeConfig(batch_size=b, isl=i, osl=o), ctx_tokens=args.step_tokens
        ).get_result_dict()

    reference = _grid(bare)
    cold_model = perfmodel.step_model(path, target, 1, 1, "bf16", "bf16", args.step_tokens)
    cold = _grid(cold_model.step)
    cached = _grid(cold_model.step)

    roof_target = perfmodel.target_for("vllm", None, "l40s", lambda: L4)
    roof_model = perfmodel.step_model(path, roof_target, 1, 1, "bf16", "bf16", args.step_tokens)
    roof_model.step(1024, 128, 8)
    roof = _grid(roof_model.step)

    n = len(ISL) * len(OSL) * len(BATCH)
    print(f"points per grid: {n:,}")
    print(f"library start-up (once per process): {startup:.2f} s")
    print(f"(a) bare library calls:  {reference:.3f} s  ({n / reference:,.0f} steps/s)")
    print(f"(b) adapter, cold:       {cold:.3f} s  ({n / cold:,.0f} steps/s)")
    print(f"(c) adapter, cached:     {cached:.4f} s  ({n / cached:,.0f} steps/s)")
    print(f"roofline GPU (L4), cold: {roof:.3f} s  (three library calls a step)")
    print(f"grid_cold_s={cold:.3f}")
    print(f"grid_roofline_s={roof:.3f}")
    print(f"adapter_ratio={cold / reference:.3f}")
    print(f"cached_speedup={cold / cached:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
