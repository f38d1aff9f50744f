"""Built-in model architectures and GPUs, from the models' published configs and GPU specs.

Models are parsed from their Hugging Face config.json (`app.sizing.hfconfig`): the configs
aiconfigurator-core bundles (`app.sizing.bundled`), or the few literal configs below for models
it does not ship. GPUs are in `app.sizing.gpus`; both are re-exported here for the callers.
"""

from __future__ import annotations

from typing import Any

from app.sizing.bundled import BUNDLED_CONFIGS, bundled_config
from app.sizing.gpus import GPUS, GpuSpec, gpu_named
from app.sizing.hfconfig import parse_hf_config
from app.sizing.modelspec import DTYPE_BYTES, GIB, ModelSpec

__all__ = [
    "DTYPE_BYTES",
    "GIB",
    "GPUS",
    "HF_ALIASES",
    "MODELS",
    "GpuSpec",
    "ModelSpec",
    "dtype_supported",
    "gpu_named",
    "model_for_hf_id",
]

# Published config.json fields of catalog models aiconfigurator does not bundle.
_LITERAL: dict[str, dict[str, Any]] = {
    "mistralai/Mistral-7B-Instruct-v0.3": {
        "model_type": "mistral",
        "hidden_size": 4096,
        "intermediate_size": 14336,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "vocab_size": 32768,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen2.5-7B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 3584,
        "intermediate_size": 18944,
        "num_hidden_layers": 28,
        "num_attention_heads": 28,
        "num_key_value_heads": 4,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen2.5-32B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 5120,
        "intermediate_size": 27648,
        "num_hidden_layers": 64,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "Qwen/Qwen2.5-72B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 8192,
        "intermediate_size": 29568,
        "num_hidden_layers": 80,
        "num_attention_heads": 64,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "nvidia/Nemotron-4-340B-Instruct": {
        "model_type": "nemotron",
        "hidden_size": 18432,
        "ffn_hidden_size": 73728,
        "num_hidden_layers": 96,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "vocab_size": 256000,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
}

# Catalog name → (the id the commands serve, the config it is parsed from).
_ENTRIES: dict[str, tuple[str, str]] = {
    "llama-3.1-8b": ("meta-llama/Llama-3.1-8B-Instruct", "meta-llama/Meta-Llama-3.1-8B"),
    "llama-3.1-70b": ("meta-llama/Llama-3.1-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B"),
    "llama-3.1-405b": ("meta-llama/Llama-3.1-405B-Instruct", "meta-llama/Meta-Llama-3.1-405B"),
    "llama-3.3-70b": ("meta-llama/Llama-3.3-70B-Instruct", "meta-llama/Meta-Llama-3.1-70B"),
    "llama-4-scout": (
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
        "meta-llama/Llama-4-Scout-17B-16E-Instruct",
    ),
    "llama-4-maverick": (
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
        "meta-llama/Llama-4-Maverick-17B-128E-Instruct",
    ),
    "mistral-7b": ("mistralai/Mistral-7B-Instruct-v0.3", "mistralai/Mistral-7B-Instruct-v0.3"),
    "mixtral-8x7b": ("mistralai/Mixtral-8x7B-Instruct-v0.1", "mistralai/Mixtral-8x7B-v0.1"),
    "mixtral-8x22b": ("mistralai/Mixtral-8x22B-Instruct-v0.1", "mistralai/Mixtral-8x22B-v0.1"),
    "qwen2.5-7b": ("Qwen/Qwen2.5-7B-Instruct", "Qwen/Qwen2.5-7B-Instruct"),
    "qwen2.5-32b": ("Qwen/Qwen2.5-32B-Instruct", "Qwen/Qwen2.5-32B-Instruct"),
    "qwen2.5-72b": ("Qwen/Qwen2.5-72B-Instruct", "Qwen/Qwen2.5-72B-Instruct"),
    "qwen3-8b": ("Qwen/Qwen3-8B", "Qwen/Qwen3-8B"),
    "qwen3-32b": ("Qwen/Qwen3-32B", "Qwen/Qwen3-32B"),
    "qwen3-32b-fp8": ("Qwen/Qwen3-32B-FP8", "Qwen/Qwen3-32B-FP8"),
    "qwen3-30b-a3b": ("Qwen/Qwen3-30B-A3B", "Qwen/Qwen3-30B-A3B"),
    "qwen3-30b-a3b-fp8": ("Qwen/Qwen3-30B-A3B-FP8", "Qwen/Qwen3-30B-A3B-FP8"),
    "qwen3-235b-a22b": ("Qwen/Qwen3-235B-A22B", "Qwen/Qwen3-235B-A22B"),
    "qwen3-235b-a22b-fp8": ("Qwen/Qwen3-235B-A22B-FP8", "Qwen/Qwen3-235B-A22B-FP8"),
    "qwen3-coder-480b": (
        "Qwen/Qwen3-Coder-480B-A35B-Instruct",
        "Qwen/Qwen3-Coder-480B-A35B-Instruct",
    ),
    "qwen3.5-27b": ("Qwen/Qwen3.5-27B", "Qwen/Qwen3.5-27B"),
    "deepseek-v3": ("deepseek-ai/DeepSeek-V3", "deepseek-ai/DeepSeek-V3"),
    "deepseek-r1": ("deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-R1"),
    "kimi-k2": ("moonshotai/Kimi-K2-Instruct", "moonshotai/Kimi-K2-Instruct"),
    "gpt-oss-20b": ("openai/gpt-oss-20b", "openai/gpt-oss-20b"),
    "gpt-oss-120b": ("openai/gpt-oss-120b", "openai/gpt-oss-120b"),
    "nemotron-3-nano-30b": (
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
        "nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16",
    ),
    "nemotron-4-340b": ("nvidia/Nemotron-4-340B-Instruct", "nvidia/Nemotron-4-340B-Instruct"),
}

# Hugging Face ids that share a bundled model's architecture (instruct and base variants).
HF_ALIASES: dict[str, str] = {
    "meta-llama/llama-3.1-8b": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/meta-llama-3.1-8b-instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/llama-3.1-70b": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/meta-llama-3.1-70b-instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/llama-3.1-405b": "meta-llama/Meta-Llama-3.1-405B",
    "meta-llama/meta-llama-3.1-405b-instruct": "meta-llama/Meta-Llama-3.1-405B",
    "mistralai/mixtral-8x7b-instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "mistralai/mixtral-8x22b-instruct-v0.1": "mistralai/Mixtral-8x22B-v0.1",
    "qwen/qwen3-coder-30b-a3b-instruct-fp8": "Qwen/Qwen3-30B-A3B-FP8",
    "qwen/qwen3-30b-a3b-instruct-2507": "Qwen/Qwen3-30B-A3B",
    "qwen/qwen3-235b-a22b-instruct-2507": "Qwen/Qwen3-235B-A22B",
    "qwen/qwen3-235b-a22b-instruct-2507-fp8": "Qwen/Qwen3-235B-A22B-FP8",
    "deepseek-ai/deepseek-v3-0324": "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/deepseek-r1-0528": "deepseek-ai/DeepSeek-R1",
    "deepseek-ai/deepseek-v3.1": "deepseek-ai/DeepSeek-V3",
    "meta-llama/meta-llama-3-8b": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/meta-llama-3-8b-instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/llama-3.1-70b-instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/llama-3.3-70b-instruct": "meta-llama/Meta-Llama-3.1-70B",
    "qwen/qwen3-8b-instruct": "Qwen/Qwen3-8B",
    "qwen/qwen2.5-7b": "Qwen/Qwen2.5-7B-Instruct",
    "qwen/qwen2.5-32b": "Qwen/Qwen2.5-32B-Instruct",
    "qwen/qwen2.5-72b": "Qwen/Qwen2.5-72B-Instruct",
    "qwen/qwen2-7b-instruct": "Qwen/Qwen2.5-7B-Instruct",
}


def _config(key: str) -> dict[str, Any] | None:
    if key in _LITERAL:
        return dict(_LITERAL[key])
    return bundled_config(key)


def _build() -> dict[str, ModelSpec]:
    out: dict[str, ModelSpec] = {}
    for name, (hf_id, key) in _ENTRIES.items():
        config = _config(key)
        assert config is not None, key
        out[name] = parse_hf_config(config, name=name, hf_id=hf_id)
    return out


MODELS: dict[str, ModelSpec] = _build()
_BY_HF_ID = {m.hf_id.lower(): m for m in MODELS.values()}


def config_key(hf_id: str) -> str | None:
    """The id whose config.json describes a Hugging Face id's layers (itself, the bundled
    checkpoint a catalog model or an alias maps to, a literal), or None when none is known."""
    lowered = hf_id.strip().lower()
    for served, key in _ENTRIES.values():
        if served.lower() == lowered:
            return key
    if lowered in HF_ALIASES:
        return HF_ALIASES[lowered]
    for key in _LITERAL:
        if key.lower() == lowered:
            return key
    return hf_id if bundled_config(hf_id) is not None else None


def model_config(hf_id: str) -> dict[str, Any] | None:
    """The config.json this package knows for a Hugging Face id (bundled, literal or aliased)."""
    key = config_key(hf_id)
    return None if key is None else _config(key)


def model_for_hf_id(hf_id: str) -> ModelSpec | None:
    """The architecture of a Hugging Face id this package knows, else None (then the profile
    needs the model's config.json pasted as `hf_config`)."""
    lowered = hf_id.strip().lower()
    if lowered in _BY_HF_ID:
        return _BY_HF_ID[lowered]
    config = model_config(hf_id)
    if config is None:
        return None
    return parse_hf_config(config, name="hf", hf_id=hf_id)


def known_hf_ids() -> list[str]:
    """Every Hugging Face id `model_for_hf_id` resolves without a pasted config."""
    ids = {served for served, _ in _ENTRIES.values()} | set(BUNDLED_CONFIGS) | set(_LITERAL)
    return sorted(ids, key=str.lower)


def dtype_supported(gpu: GpuSpec, dtype: str) -> str | None:
    """None when the GPU can run the dtype natively, else the reason it cannot."""
    if dtype == "fp8" and not gpu.fp8:
        return f"{gpu.name} ({gpu.arch}) has no FP8 support: FP8 needs Ada, Hopper or newer"
    if dtype == "fp4" and not gpu.fp4:
        return f"{gpu.name} ({gpu.arch}) has no FP4 support: FP4 needs Blackwell (B200)"
    return None
