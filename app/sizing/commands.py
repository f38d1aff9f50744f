"""The exact commands to rebuild or restart an engine with given bounds, per framework."""

from __future__ import annotations

import shlex

from app.sizing.profile import EngineProfile
from app.sizing.recommend import Bounds


def vllm_command(profile: EngineProfile, b: Bounds) -> str:
    """`vllm serve …` with the bounds as vLLM's flags."""
    args = ["vllm", "serve", profile.model_id]
    if profile.tensor_parallel > 1:
        args += ["--tensor-parallel-size", str(profile.tensor_parallel)]
    if profile.pipeline_parallel > 1:
        args += ["--pipeline-parallel-size", str(profile.pipeline_parallel)]
    args += ["--max-model-len", str(b.max_seq_len)]
    if b.max_batch_size:
        args += ["--max-num-seqs", str(b.max_batch_size)]
    if b.max_num_tokens:
        args += ["--max-num-batched-tokens", str(b.max_num_tokens)]
    args += ["--gpu-memory-utilization", f"{profile.memory_fraction:g}"]
    if profile.weight_dtype == "fp8":
        args += ["--quantization", "fp8"]
    if profile.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8"]
    return shlex.join(args)


def trtllm_command(profile: EngineProfile, b: Bounds) -> str:
    """`trtllm-build …`; TP/PP and FP8 are fixed earlier, when the checkpoint is converted."""
    args = [
        "trtllm-build",
        "--checkpoint_dir",
        "./checkpoint",
        "--output_dir",
        "./engine",
        "--max_input_len",
        str(b.max_input_len),
        "--max_seq_len",
        str(b.max_seq_len),
    ]
    if b.max_batch_size:
        args += ["--max_batch_size", str(b.max_batch_size)]
    if b.max_num_tokens:
        args += ["--max_num_tokens", str(b.max_num_tokens)]
        if b.max_input_len and b.max_num_tokens < b.max_input_len:
            args += ["--use_paged_context_fmha", "enable"]  # needed for chunked context
    return shlex.join(args)


def nim_env(profile: EngineProfile, b: Bounds) -> str:
    """NIM environment variables (vLLM flags NIM has no variable for go through passthrough)."""
    passthrough = []
    if b.max_batch_size:
        passthrough += ["--max-num-seqs", str(b.max_batch_size)]
    if b.max_num_tokens:
        passthrough += ["--max-num-batched-tokens", str(b.max_num_tokens)]
    if profile.kv_dtype == "fp8":
        passthrough += ["--kv-cache-dtype", "fp8"]
    lines = [
        f"NIM_MODEL_PATH={shlex.quote('hf://' + profile.model_id)}",
        f"NIM_MAX_MODEL_LEN={b.max_seq_len}",
    ]
    if profile.tensor_parallel > 1:
        lines.append(f"NIM_TENSOR_PARALLEL_SIZE={profile.tensor_parallel}")
    if profile.pipeline_parallel > 1:
        lines.append(f"NIM_PIPELINE_PARALLEL_SIZE={profile.pipeline_parallel}")
    if passthrough:
        lines.append(f"NIM_PASSTHROUGH_ARGS={shlex.quote(' '.join(passthrough))}")
    return "\n".join(lines)


def sglang_command(profile: EngineProfile, b: Bounds) -> str:
    """`python -m sglang.launch_server …` with the bounds as SGLang's flags."""
    args = ["python", "-m", "sglang.launch_server", "--model-path", profile.model_id]
    if profile.tensor_parallel > 1:
        args += ["--tp-size", str(profile.tensor_parallel)]
    if profile.pipeline_parallel > 1:
        args += ["--pp-size", str(profile.pipeline_parallel)]
    args += ["--context-length", str(b.max_seq_len)]
    if b.max_batch_size:
        args += ["--max-running-requests", str(b.max_batch_size)]
    if b.max_num_tokens:
        args += ["--chunked-prefill-size", str(b.max_num_tokens)]
    args += ["--mem-fraction-static", f"{profile.memory_fraction:g}"]
    if profile.weight_dtype == "fp8":
        args += ["--quantization", "fp8"]
    if profile.kv_dtype == "fp8":
        args += ["--kv-cache-dtype", "fp8_e4m3"]
    return shlex.join(args)


def commands(profile: EngineProfile, b: Bounds) -> dict[str, str]:
    """All four, keyed by framework; the profile's own framework first."""
    out = {"vllm": vllm_command(profile, b), "trtllm": trtllm_command(profile, b)}
    out["nim"] = nim_env(profile, b)
    out["sglang"] = sglang_command(profile, b)
    return {profile.framework: out[profile.framework], **out}


def window_bounds(whole_day: Bounds, max_input_len: int, max_seq_len: int, slots: int) -> Bounds:
    """A per-window build of a seasonal split: the window's own length bounds, and the
    whole-day recommendation's batch (at most what one replica holds in the window) and
    prefill step — the step and the batch's ITL limit do not change with the hour."""
    batch = whole_day.max_batch_size
    if slots and (batch is None or slots < batch):
        batch = slots
    return Bounds(max_input_len, max_seq_len, None, batch, whole_day.max_num_tokens)
