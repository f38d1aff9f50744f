"""Built-in model architectures and GPUs, from the models' published configs and GPU specs."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True)
class ModelSpec:
    """What the memory math needs of a model's architecture (its Hugging Face config)."""

    name: str
    hf_id: str
    params: float  # parameters, all experts included
    layers: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    max_position_embeddings: int


@dataclass(frozen=True)
class GpuSpec:
    """A GPU as CUDA reports it: memory is what `torch.cuda.mem_get_info` calls total."""

    name: str
    memory_gib: float
    arch: str
    fp8: bool
    fp4: bool


MODELS: dict[str, ModelSpec] = {
    m.name: m
    for m in (
        ModelSpec(
            "llama-3.1-8b", "meta-llama/Llama-3.1-8B-Instruct", 8.03e9, 32, 8, 128, 4096, 131072
        ),
        ModelSpec(
            "llama-3.1-70b", "meta-llama/Llama-3.1-70B-Instruct", 70.6e9, 80, 8, 128, 8192, 131072
        ),
        ModelSpec(
            "llama-3.1-405b",
            "meta-llama/Llama-3.1-405B-Instruct",
            405.9e9,
            126,
            8,
            128,
            16384,
            131072,
        ),
        ModelSpec(
            "mistral-7b", "mistralai/Mistral-7B-Instruct-v0.3", 7.25e9, 32, 8, 128, 4096, 32768
        ),
        ModelSpec(
            "mixtral-8x7b", "mistralai/Mixtral-8x7B-Instruct-v0.1", 46.7e9, 32, 8, 128, 4096, 32768
        ),
        ModelSpec("qwen2.5-7b", "Qwen/Qwen2.5-7B-Instruct", 7.62e9, 28, 4, 128, 3584, 32768),
        ModelSpec("qwen2.5-32b", "Qwen/Qwen2.5-32B-Instruct", 32.76e9, 64, 8, 128, 5120, 32768),
        ModelSpec("qwen2.5-72b", "Qwen/Qwen2.5-72B-Instruct", 72.7e9, 80, 8, 128, 8192, 32768),
        ModelSpec(
            "nemotron-4-340b", "nvidia/Nemotron-4-340B-Instruct", 341e9, 96, 8, 192, 18432, 4096
        ),
    )
}

# Total memory as CUDA sees it (slightly under the marketed size); FP8 needs Ada, Hopper or
# newer, FP4 needs Blackwell.
GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec("A10G", 22.07, "ampere", False, False),
        GpuSpec("L4", 22.05, "ada", True, False),
        GpuSpec("L40S", 44.42, "ada", True, False),
        GpuSpec("A100-40GB", 39.39, "ampere", False, False),
        GpuSpec("A100-80GB", 79.15, "ampere", False, False),
        GpuSpec("H100", 79.19, "hopper", True, False),
        GpuSpec("H200", 139.72, "hopper", True, False),
        GpuSpec("B200", 178.36, "blackwell", True, True),
    )
}

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "fp4": 0.5,
    "int4": 0.5,
}


def dtype_supported(gpu: GpuSpec, dtype: str) -> str | None:
    """None when the GPU can run the dtype natively, else the reason it cannot."""
    if dtype == "fp8" and not gpu.fp8:
        return f"{gpu.name} ({gpu.arch}) has no FP8 support: FP8 needs Ada, Hopper or newer"
    if dtype == "fp4" and not gpu.fp4:
        return f"{gpu.name} ({gpu.arch}) has no FP4 support: FP4 needs Blackwell (B200)"
    return None
