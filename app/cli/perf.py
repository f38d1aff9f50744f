"""`tokenshape perf`: predicted latency and throughput of one replica, without a server."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.cli.common import Subparsers

FRAMEWORKS = ("trtllm", "vllm", "sglang", "nim")
DTYPES = ("bf16", "fp16", "fp8", "int8", "fp4", "int4")


def _positive(kind: type, most: float = 10_000_000) -> Any:
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not 0 < value <= most:  # NaN and infinity fail this too
            raise argparse.ArgumentTypeError(f"{text!r}: use a number above 0, at most {most:,g}")
        return value

    return parse


def add_parser(subparsers: Subparsers) -> None:
    """Add `perf`."""
    what = "Predict TTFT, ITL and throughput of one engine replica (no server needed)."
    p = subparsers.add_parser("perf", help=what, description=what)
    p.set_defaults(func=cmd_perf)
    p.add_argument("--list", action="store_true", help="list the known GPUs and bundled models")
    p.add_argument("--model", help="a catalog model (llama-3.1-8b) or a Hugging Face id")
    p.add_argument(
        "--config", type=Path, help="the model's Hugging Face config.json (for any other model)"
    )
    p.add_argument("--gpu", help="a catalog GPU (H100, L40S, RTX 4090, ...)")
    p.add_argument("--tp", type=_positive(int), default=1, help="tensor parallel (default 1)")
    p.add_argument("--pp", type=_positive(int), default=1, help="pipeline parallel (default 1)")
    p.add_argument("--framework", choices=FRAMEWORKS, default="vllm", help="default vllm")
    p.add_argument("--weight-dtype", choices=DTYPES, default="bf16", help="default bf16")
    p.add_argument("--kv-dtype", choices=("bf16", "fp16", "fp8", "int8"), default="bf16")
    p.add_argument(
        "--memory-fraction",
        type=float,
        default=0.9,
        help="gpu_memory_utilization / free_gpu_memory_fraction (default 0.9)",
    )
    p.add_argument(
        "--max-num-tokens",
        type=_positive(int),
        help="tokens per engine step (max-num-batched-tokens; default 8192)",
    )
    p.add_argument("--isl", type=_positive(int), help="input tokens per request")
    p.add_argument("--osl", type=_positive(int), help="output tokens per request")
    load = p.add_mutually_exclusive_group()
    load.add_argument("--concurrency", type=_positive(float, 100_000), help="requests in flight")
    load.add_argument(
        "--rate", type=_positive(float, 1_000_000), help="arrivals per second (open loop)"
    )
    load.add_argument(
        "--max-throughput",
        action="store_true",
        help="the batch size the KV cache allows with the most output tokens/s",
    )
    p.add_argument("--json", action="store_true", help="print the prediction as JSON")


def _fail(message: str) -> int:
    print(f"error: {message}", file=sys.stderr)
    return 2


def _list() -> int:
    from app.services import perfmodel
    from app.sizing.catalog import GPUS, MODELS

    print("GPUs:")
    for g in GPUS.values():
        if g.aic_system:
            how = f"measured kernel data ({g.aic_system})"
        elif g.reference_system:
            how = f"roofline, scaled from {g.reference_system}"
        else:
            how = "memory only: no performance data, no reference to scale from"
        print(f"  {g.name:<14} {g.memory_gib:>7.2f} GiB  {g.arch:<10} {how}")
    print("catalog models:", ", ".join(MODELS))
    print("bundled Hugging Face configs:")
    for m in sorted(perfmodel.bundled_models()):
        print(f"  {m}")
    return 0


def cmd_perf(args: argparse.Namespace) -> int:
    """Print one replica's predicted steady state (text, or JSON with --json)."""
    if args.list:
        return _list()
    missing = [f"--{n}" for n in ("model", "gpu", "isl", "osl") if getattr(args, n) is None]
    if missing:
        return _fail(f"missing {', '.join(missing)} (tokenshape perf --list shows the choices)")
    if args.concurrency is None and args.rate is None and not args.max_throughput:
        return _fail("give the load: --concurrency N, --rate R or --max-throughput")
    from pydantic import ValidationError

    from app.services.perfmodel import PerfModelError
    from app.services.performance import Mode, predict, prediction_dict, profile_for
    from app.services.profiles import problem
    from app.sizing.perf import Shape

    config = None
    if args.config is not None:
        try:
            config = json.loads(args.config.read_text())
        except (OSError, ValueError, RecursionError) as exc:
            return _fail(f"--config {args.config}: {exc or 'nested too deeply'}")
        if not isinstance(config, dict):
            return _fail(f"--config {args.config}: a config.json holds one JSON object")
    try:
        profile = profile_for(
            model=args.model,
            gpu=args.gpu,
            tensor_parallel=args.tp,
            pipeline_parallel=args.pp,
            framework=args.framework,
            weight_dtype=args.weight_dtype,
            kv_dtype=args.kv_dtype,
            memory_fraction=args.memory_fraction,
            max_num_tokens=args.max_num_tokens,
            hf_config=config,
        )
    except ValidationError as exc:
        return _fail(problem(exc))
    mode: Mode = "max-throughput" if args.max_throughput else "rate" if args.rate else "concurrency"
    shapes = [Shape(args.isl, args.osl)]
    try:
        eng, p = predict(profile, shapes, mode=mode, concurrency=args.concurrency, rate=args.rate)
    except (PerfModelError, ValueError) as exc:
        return _fail(str(exc))
    out = prediction_dict(eng, p, shapes)
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    _print(out, args)
    return 0


def _f(x: float | None, unit: str, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f} {unit}"


def _print(out: dict[str, Any], args: argparse.Namespace) -> None:
    print(
        f"{args.model} on {args.tp * args.pp}x {args.gpu} ({args.framework}, "
        f"weights {args.weight_dtype}, KV {args.kv_dtype}), ISL {args.isl}, OSL {args.osl}"
    )
    print(f"  requests in flight  {_f(out['concurrency'], '', 1)}")
    ttft = _f(out["ttft_ms"], "ms") if out["ttft_ms"] is not None else "unbounded (saturated)"
    print(f"  TTFT                {ttft}  (prefill {out['prefill_ms']} ms)")
    print(f"  ITL                 {_f(out['itl_ms'], 'ms', 2)}")
    print(f"  output tokens/s     {_f(out['output_tokens_per_s'], '', 0)}")
    print(f"  requests/s          {_f(out['requests_per_s'], '', 2)}")
    print(f"  KV cache            {out['kv_capacity_tokens']:,} tokens; fits: {out['kv_fits']}")
    print(f"  source              {out['source']}")
    for note in out["notes"]:
        print(f"  note: {note}")
