"""A Hugging Face `config.json` (as a dict) → `ModelSpec`: architecture, parameters by module,
KV geometry and the checkpoint's quantization. Pure: the caller reads the file.

Covered: dense decoders (Llama, Mistral, Qwen2/3, Gemma 1-4, Phi-3/4, Granite, …), mixtures of
experts (Mixtral, Qwen2/3-MoE, DeepSeek-V2/V3/R1, Kimi-K2, GLM-4.5+, gpt-oss, Llama 4, MiniMax,
Gemma 4's MoE block), multi-head latent attention (DeepSeek's compressed KV: kv_lora_rank +
qk_rope_head_dim per token per layer, shared by all tensor-parallel ranks), sliding-window and
hybrid layers (gpt-oss, Gemma 2/3/4 alternate sliding and full attention; Qwen3.5 / Qwen3-Next
linear-attention and Nemotron-H Mamba layers hold a fixed state per sequence, no per-token KV),
multimodal configs (the nested `text_config`; the vision tower is counted as a small share and
said so), and `quantization_config`: AWQ, GPTQ, compressed-tensors, FP8 (per-tensor, channel or
block scales), ModelOpt FP8/NVFP4, MXFP4 and bitsandbytes, with the modules each leaves 16-bit.

Weights bytes = Σ modules params × bytes: embeddings, the output layer (counted again when not
tied), norms and biases stay 16-bit; quantized linear layers take bits/8 plus their scales (and
zeros for asymmetric AWQ/GPTQ: per group of 128 a 16-bit scale and a 4-bit zero).
"""

from __future__ import annotations

import fnmatch
import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from app.sizing.modelspec import LayerWeights, ModelSpec, Quantization

MAX_CONFIG_BYTES = 256 * 1024  # a pasted config.json (some quantized configs list every layer)

NON_GATED = frozenset(
    {
        "gpt2",
        "gpt_neox",
        "gptj",
        "falcon",
        "gpt_bigcode",
        "starcoder2",
        "phi",
        "opt",
        "bloom",
        "mpt",
        "nemotron",
        "stablelm_epoch",
    }
)
TIED_BY_DEFAULT = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text", "gemma4", "gemma4_text"})
DTYPE_NAMES = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "half": "fp16",
    "float32": "bf16",  # vLLM's dtype "auto" serves an fp32 checkpoint in 16-bit
    "float": "bf16",
}


class ConfigError(ValueError):
    """A config.json that cannot describe a model's memory; the message says what is missing."""


# The largest value a real config.json holds for a field, with room (the largest models have
# 160 layers, 256k vocabularies, 16k-wide hidden states, 384 experts): a pasted config beyond
# these is refused before anything loops over its layers or experts.
LIMITS: dict[str, int] = {
    "num_hidden_layers": 1024,
    "n_layer": 1024,
    "num_layers": 1024,
    "n_layers": 1024,
    "num_attention_heads": 4096,
    "num_key_value_heads": 4096,
    "num_local_experts": 8192,
    "num_experts": 8192,
    "n_routed_experts": 8192,
    "num_experts_per_tok": 1024,
}
DEFAULT_LIMIT = 1 << 31  # widths, vocabularies, contexts, group sizes


def _int(cfg: Mapping[str, Any], *keys: str, default: int = 0) -> int:
    for key in keys:
        value = cfg.get(key)
        if isinstance(value, (bool, list, dict)) or value is None:
            continue  # a list or object is another form of the field (moe_layer_freq)
        finite = isinstance(value, int) or (isinstance(value, float) and math.isfinite(value))
        if not finite or value < 0:
            raise ConfigError(f"config.json: {key} must be a positive number (got {value!r:.40})")
        limit = LIMITS.get(key, DEFAULT_LIMIT)
        if value > limit:
            shown = f"{value:.6g}" if isinstance(value, float) or value < 10**15 else "huge"
            raise ConfigError(
                f"config.json: {key} is {shown}; at most {limit:,} (no real model is larger)"
            )
        if value > 0:
            return int(value)
    return default


def text_config(config: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The language model's config (a multimodal config nests it) and whether it was nested."""
    for key in ("text_config", "language_config", "llm_config", "thinker_config"):
        nested = config.get(key)
        if isinstance(nested, Mapping) and (
            "hidden_size" in nested or "num_hidden_layers" in nested
        ):
            merged = {**nested}
            for inherit in ("quantization_config", "torch_dtype", "dtype", "tie_word_embeddings"):
                if inherit not in merged and inherit in config:
                    merged[inherit] = config[inherit]
            return merged, True
    return dict(config), False


def _block_kinds(cfg: Mapping[str, Any]) -> list[str]:
    """Nemotron-H's per-layer blocks: "mamba", "attention", "mlp" or "moe" (else [])."""
    pattern = cfg.get("hybrid_override_pattern")
    if isinstance(pattern, str) and pattern:
        names = {"M": "mamba", "*": "attention", "-": "mlp", "E": "moe"}
        return [names.get(c, "attention") for c in pattern]
    blocks = cfg.get("layers_block_type")
    if isinstance(blocks, list) and blocks and all(isinstance(b, str) for b in blocks):
        return [str(b).lower() for b in blocks]
    return []


def _layer_types(cfg: Mapping[str, Any], layers: int, family: str) -> list[str]:
    """Per layer: "full", "sliding", "state" (linear attention / Mamba) or "mlp"."""
    blocks = _block_kinds(cfg)
    if blocks:
        kinds = {"mamba": "state", "attention": "full", "mlp": "mlp", "moe": "mlp"}
        return [kinds.get(b, "full") for b in blocks[:layers]]
    types = cfg.get("layer_types")
    if isinstance(types, list) and len(types) >= layers:
        out = []
        for t in types[:layers]:
            t = str(t).lower()
            if "sliding" in t or "chunked" in t or "local" in t:
                out.append("sliding")
            elif "linear" in t or "mamba" in t or "ssm" in t or "conv" in t:
                out.append("state")
            else:
                out.append("full")
        return out
    interval = _int(cfg, "full_attention_interval")
    if interval and family.startswith(("qwen3_next", "qwen3_5")):
        return ["full" if (i + 1) % interval == 0 else "state" for i in range(layers)]
    window = _int(cfg, "sliding_window")
    step = _int(cfg, "sliding_window_pattern")
    if window and step and cfg.get("use_sliding_window", True):
        # Gemma 3: one global layer every `step` layers, the rest sliding.
        return ["full" if (i + 1) % step == 0 else "sliding" for i in range(layers)]
    if family == "gemma2" and window:
        return ["sliding" if i % 2 == 0 else "full" for i in range(layers)]
    if window and cfg.get("use_sliding_window") is True:
        max_window = _int(cfg, "max_window_layers", default=layers)
        return ["sliding" if i < max_window else "full" for i in range(layers)]
    chunk = _int(cfg, "attention_chunk_size")
    if chunk and family.startswith("llama4"):
        # Llama 4: chunked local attention, every fourth layer global (no RoPE).
        return ["full" if (i + 1) % 4 == 0 else "sliding" for i in range(layers)]
    return ["full"] * layers


def _moe_layers(cfg: Mapping[str, Any], layers: int, experts: int) -> list[bool]:
    if not experts:
        return [False] * layers
    first_dense = _int(cfg, "first_k_dense_replace")
    freq = _int(cfg, "moe_layer_freq", default=1)
    step = _int(cfg, "decoder_sparse_step", "interleave_moe_layer_step", default=1)
    only_mlp = set(cfg.get("mlp_only_layers") or [])
    out = []
    for i in range(layers):
        moe = i >= first_dense and (i - first_dense) % max(freq, 1) == 0
        moe = moe and (i + 1) % max(step, 1) == 0 and i not in only_mlp
        out.append(moe)
    return out


# -- quantization -------------------------------------------------------------------------


def _names(prefix: str, *leaves: str) -> tuple[str, ...]:
    return tuple(f"{prefix}.{leaf}" for leaf in leaves)


_QKVO = ("q_proj", "k_proj", "v_proj", "o_proj", "qkv_proj")
_MLA = ("q_a_proj", "q_b_proj", "q_proj", "kv_a_proj_with_mqa", "kv_b_proj", "o_proj")
_GATED = ("gate_proj", "up_proj", "down_proj", "gate_up_proj")
# Module names by family (HF checkpoint naming), per category; "attn_state" is a Mamba or
# linear-attention layer's projections. A module is looked up under the layer prefix.
_DEFAULT_NAMES: dict[str, tuple[str, ...]] = {
    "attn": _names("self_attn", *_QKVO, *_MLA),
    "attn_state": _names("linear_attn", "in_proj_qkvz", "in_proj_qkv", "in_proj_z", "out_proj")
    + _names("mixer", "in_proj", "out_proj"),
    "mlp": _names("mlp", *_GATED, "fc1", "fc2", "c_fc", "dense_h_to_4h"),
    "experts": _names("mlp.experts.0", *_GATED)
    + _names("mlp.experts", "gate_up_proj", "down_proj")
    + ("mlp.experts",)
    + _names("block_sparse_moe.experts.0", "w1", "w2", "w3"),
    "shared": _names("mlp.shared_experts", *_GATED)
    + _names("mlp.shared_expert", *_GATED)
    + _names("block_sparse_moe.shared_experts", *_GATED),
    "router": ("mlp.gate", "mlp.router", "block_sparse_moe.gate"),
}
_FAMILY_NAMES: dict[str, dict[str, tuple[str, ...]]] = {
    "mixtral": {
        "experts": _names("block_sparse_moe.experts.0", "w1", "w2", "w3"),
        "router": ("block_sparse_moe.gate",),
    },
    "llama4": {
        "mlp": _names("feed_forward", *_GATED),
        "experts": _names("feed_forward.experts", "gate_up_proj", "down_proj"),
        "shared": _names("feed_forward.shared_expert", *_GATED),
        "router": ("feed_forward.router",),
    },
    "nemotron_h": {
        "attn": _names("mixer", *_QKVO),
        "attn_state": _names("mixer", "in_proj", "out_proj"),
        "mlp": _names("mixer", "up_proj", "down_proj"),
        "experts": _names("mixer.experts.0", "up_proj", "down_proj"),
        "shared": _names("mixer.shared_experts", "up_proj", "down_proj"),
        "router": ("mixer.gate",),
    },
    "gemma4": {
        "experts": _names("experts", "gate_up_proj", "down_proj")
        + _names("moe.experts", "gate_up_proj", "down_proj"),
        "router": ("router.proj", "router"),
    },
}


def _family_key(family: str) -> str:
    for key in _FAMILY_NAMES:
        if family.startswith(key):
            return key
    return ""


@lru_cache(maxsize=4096)
def _matcher(pattern: str) -> re.Pattern[str] | None:
    """A module-name pattern as a regex: "re:…" (compressed-tensors), a glob with * or ?
    (ModelOpt, gpt-oss), or a run of whole dotted segments (AWQ's "gate" is the router)."""
    if pattern.startswith("re:"):
        try:
            return re.compile(pattern[3:])
        except re.error:
            return None
    if "*" in pattern or "?" in pattern:
        return re.compile(fnmatch.translate(pattern)[:-2] + r"(\..*)?\Z", re.S)
    return re.compile(r"(?:^|.*\.)" + re.escape(pattern) + r"(?:\..*)?\Z", re.S)


def _matches(pattern: str, name: str) -> bool:
    rx = _matcher(pattern)
    return rx is not None and rx.match(name) is not None


@lru_cache(maxsize=256)
def _any_matcher(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    """All patterns as one regex (None when there are none)."""
    parts = [rx.pattern for p in patterns if (rx := _matcher(p)) is not None]
    if not parts:
        return None
    return re.compile("|".join(f"(?:{part})" for part in parts), re.S)


def _matches_any(patterns: tuple[str, ...], name: str) -> bool:
    rx = _any_matcher(patterns)
    return rx is not None and rx.match(name) is not None


def _as_list(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Iterable) and not isinstance(value, Mapping):
        return [str(v) for v in value if isinstance(v, str)]
    return []


def _int_group(bits: int, group: int, asymmetric: bool, scale_bytes: float = 2.0) -> float:
    per = bits / 8
    if group and group > 0:
        per += (scale_bytes + (bits / 8 if asymmetric else 0.0)) / group
    return per


def _algo(algo: str, group: int = 0, kv_dtype: str | None = None) -> Quantization | None:
    """A ModelOpt quant_algo name → its scheme."""
    algo = algo.upper()
    if "NVFP4" in algo or algo in ("FP4", "W4A4_NVFP4", "W4A16_NVFP4"):
        g = group or 16
        return Quantization("modelopt", "fp4", 0.5 + 1 / g, 4, g, kv_dtype)
    if "MXFP4" in algo:
        return Quantization("modelopt", "fp4", 0.5 + 1 / 32, 4, 32, kv_dtype)
    if "FP8" in algo:
        return Quantization("modelopt", "fp8", 1.0, 8, 0, kv_dtype)
    if "W4A" in algo or "INT4" in algo:
        g = group or 128
        return Quantization("modelopt", "int4", _int_group(4, g, False), 4, g, kv_dtype)
    if "INT8" in algo or "W8A8" in algo:
        return Quantization("modelopt", "int8", 1.0, 8, 0, kv_dtype)
    return None


def _ct_scheme(group: Mapping[str, Any]) -> Quantization | None:
    """One compressed-tensors config group → its weight scheme."""
    weights = group.get("weights")
    if not isinstance(weights, Mapping):
        return None
    bits = _int(weights, "num_bits", default=8)
    kind = str(weights.get("type") or "int")
    strategy = str(weights.get("strategy") or "")
    size = _int(weights, "group_size")
    if strategy and strategy not in ("group", "tensor_group") and bits >= 8:
        size = 0
    sym = bool(weights.get("symmetric", True))
    if kind == "float" and bits == 4:
        size = size or 16
        scale = 1 / size if size == 16 else 1 / size  # FP8 (NVFP4) or E8M0 (MXFP4) scales
        return Quantization("compressed-tensors", "fp4", 0.5 + scale, 4, size)
    if kind == "float":
        return Quantization("compressed-tensors", "fp8", 1.0, 8, size)
    if bits <= 4:
        return Quantization(
            "compressed-tensors", "int4", _int_group(bits, size, not sym), bits, size
        )
    return Quantization("compressed-tensors", "int8", 1.0, 8, size)


@dataclass(frozen=True)
class QuantPlan:
    """Which modules of a checkpoint are stored quantized, and how."""

    main: Quantization | None  # the scheme most layers use (labels, dtype checks)
    default: Quantization | None  # for modules no group names ("targets": ["Linear"])
    groups: tuple[tuple[Quantization, tuple[str, ...]], ...] = ()  # explicit targets
    per_module: tuple[tuple[str, Quantization], ...] = ()  # ModelOpt MIXED_PRECISION
    ignore: tuple[str, ...] = ()
    lm_head: bool = False

    def for_module(self, name: str) -> Quantization | None:
        if self.per_module:
            exact = _exact_index(self.per_module)
            if name in exact:
                return exact[name]
            return next(
                (
                    q
                    for n, q in self.per_module
                    if ("*" in n or n.startswith("re:")) and _matches(n, name)
                ),
                None,
            )
        if _matches_any(self.ignore, name):
            return None
        for q, targets in self.groups:
            if _matches_any(targets, name):
                return q
        return self.default


NO_QUANT = QuantPlan(None, None)
_EXACT: dict[int, dict[str, Quantization]] = {}


def _exact_index(per_module: tuple[tuple[str, Quantization], ...]) -> dict[str, Quantization]:
    key = id(per_module)
    index = _EXACT.get(key)
    if index is None or len(index) > len(per_module):
        index = {n: q for n, q in per_module if "*" not in n and not n.startswith("re:")}
        _EXACT.clear()
        _EXACT[key] = index
    return index


def parse_quantization(qc: Mapping[str, Any] | None) -> QuantPlan:
    """A checkpoint's `quantization_config` (or `hf_quant_config.json`) → a QuantPlan."""
    if not qc:
        return NO_QUANT
    method = str(qc.get("quant_method") or qc.get("quant_algo") or "").lower()
    ignore = tuple(
        _as_list(qc.get("modules_to_not_convert"))
        + _as_list(qc.get("ignore"))
        + _as_list(qc.get("ignored_layers"))
        + _as_list(qc.get("exclude_modules"))
        + _as_list(qc.get("llm_int8_skip_modules"))
    )
    inner = qc.get("quantization")
    if method == "modelopt" or isinstance(inner, Mapping):
        src = inner if isinstance(inner, Mapping) else qc
        algo = str(src.get("quant_algo") or qc.get("quant_algo") or "")
        kv = "fp8" if str(src.get("kv_cache_quant_algo") or "").upper() == "FP8" else None
        ignore += tuple(_as_list(src.get("exclude_modules")))
        layers = src.get("quantized_layers")
        if isinstance(layers, Mapping) and layers:
            per: list[tuple[str, Quantization]] = []
            counts: dict[str, int] = {}
            for mod, spec in layers.items():
                if not isinstance(spec, Mapping):
                    continue
                q = _algo(str(spec.get("quant_algo") or ""), _int(spec, "group_size"), kv)
                if q:
                    per.append((str(mod), q))
                    counts[q.weight_dtype] = counts.get(q.weight_dtype, 0) + 1
            main_dtype = max(counts, key=lambda k: counts[k]) if counts else "fp8"
            main = next((q for _, q in per if q.weight_dtype == main_dtype), None)
            lm_head = any(n.endswith("lm_head") for n, _ in per)
            return QuantPlan(main, None, per_module=tuple(per), ignore=ignore, lm_head=lm_head)
        q = _algo(algo, _int(src, "group_size"), kv)
        if q is None:
            q = Quantization("modelopt", "fp8", 1.0, 8, 0, kv, True, f"unknown algo {algo}")
        return QuantPlan(q, q, ignore=ignore)
    if method in ("awq", "gptq", "gptq_marlin", "awq_marlin", "autoround", "auto-round"):
        bits = _int(qc, "bits", "w_bit", default=4)
        size = qc.get("group_size", qc.get("q_group_size", 128))
        size = int(size) if isinstance(size, (int, float)) else 128
        # AWQ stores 4-bit zeros unless zero_point is off; GPTQ checkpoints store qzeros even
        # when symmetric, and vLLM keeps them.
        asym = bool(qc.get("zero_point", True)) if method.startswith("awq") else True
        guessed = qc.get("group_size", qc.get("q_group_size")) is None
        q = Quantization(
            method.split("_")[0],
            "int4" if bits <= 4 else "int8",
            _int_group(bits, size, asym),
            bits,
            max(size, 0),
            guessed=guessed,
        )
        return QuantPlan(q, q, ignore=ignore, lm_head=bool(qc.get("lm_head", False)))
    if method == "compressed-tensors":
        groups = qc.get("config_groups") or {}
        if not groups and isinstance(qc.get("weights"), Mapping):
            groups = {"group_0": {"weights": qc["weights"], "targets": ["Linear"]}}
        plans: list[tuple[Quantization, tuple[str, ...]]] = []
        default: Quantization | None = None
        if isinstance(groups, Mapping):
            for group in groups.values():
                if not isinstance(group, Mapping):
                    continue
                q = _ct_scheme(group)
                targets = tuple(_as_list(group.get("targets")))
                if q is None:
                    continue
                if not targets or "Linear" in targets:
                    default = default or q
                else:
                    plans.append((q, targets))
        main = default or (plans[0][0] if plans else None)
        if main is None:
            return NO_QUANT
        return QuantPlan(main, default, tuple(plans), ignore=ignore)
    if method in ("fp8", "fbgemm_fp8", "ptpc_fp8"):
        block = qc.get("weight_block_size")
        note = f"block {block}" if block else str(qc.get("activation_scheme") or "")
        q = Quantization(method, "fp8", 1.0, 8, 0, note=note)
        return QuantPlan(q, q, ignore=ignore)
    if method == "mxfp4":
        q = Quantization("mxfp4", "fp4", 0.5 + 1 / 32, 4, 32)
        return QuantPlan(q, q, ignore=ignore)
    if method == "bitsandbytes":
        if qc.get("load_in_8bit"):
            q = Quantization("bitsandbytes", "int8", 1.0 + 4 / 4096, 8, 0)
        else:
            q = Quantization("bitsandbytes", "int4", 0.5 + 4 / 64, 4, 64)
        return QuantPlan(q, q, ignore=ignore)
    bits = _int(qc, "bits", "weight_bits", "w_bit", default=4)
    q = Quantization(
        method or "unknown",
        "int4" if bits <= 4 else "int8",
        bits / 8 + 0.02,
        bits,
        0,
        None,
        True,
        "unrecognised method: bits/8 + 2% assumed",
    )
    return QuantPlan(q, q, ignore=ignore)


def _layer_prefixes(family: str, nested: bool) -> tuple[str, ...]:
    if family.startswith("nemotron_h"):
        return ("backbone.layers.{i}.",)
    if nested:
        return ("model.language_model.layers.{i}.", "language_model.model.layers.{i}.")
    return ("model.layers.{i}.",)


def _category_bytes(
    plan: QuantPlan, family: str, nested: bool, category: str, layer: int, state: bool
) -> float | None:
    """Bytes per weight of a layer's category as stored, or None when stored 16-bit."""
    if plan.main is None or category == "router":
        return None  # MoE gates stay 16-bit in every scheme seen (and are tiny)
    if plan.main.method == "mxfp4" and category != "experts":
        return None  # vLLM and TensorRT-LLM apply MXFP4 to the MoE experts only
    names = _FAMILY_NAMES.get(_family_key(family), {})
    key = "attn_state" if category == "attn" and state else category
    leaves = names.get(key) or _DEFAULT_NAMES[key]
    found: list[Quantization | None] = []
    for prefix in _layer_prefixes(family, nested):
        base = prefix.format(i=layer)
        for leaf in leaves:
            name = base + leaf
            if plan.ignore and _matches_any(plan.ignore, name):
                return None
            found.append(plan.for_module(name))
    hits = [q for q in found if q is not None]
    if not hits:
        return None
    return max(q.bytes_per_weight for q in hits)


# -- the parse ----------------------------------------------------------------------------


def parse_hf_config(
    config: Mapping[str, Any],
    *,
    name: str = "hf",
    hf_id: str = "",
    quant_config: Mapping[str, Any] | None = None,
) -> ModelSpec:
    """A ModelSpec from a config.json dict (and an optional hf_quant_config.json dict).

    Raises ConfigError naming what is missing when the config cannot describe the memory."""
    if not isinstance(config, Mapping):
        raise ConfigError("hf_config must be a JSON object (the model's config.json)")
    cfg, nested = text_config(config)
    uncertain: list[str] = []
    family = str(cfg.get("model_type") or config.get("model_type") or "")
    hidden = _int(cfg, "hidden_size", "n_embd", "d_model", "dim")
    block_kinds = _block_kinds(cfg)
    layers = _int(cfg, "num_hidden_layers", "n_layer", "num_layers", "n_layers")
    layers = layers or len(block_kinds)
    heads = _int(cfg, "num_attention_heads", "n_head", "num_heads", "n_heads")
    missing = [k for k, v in (("hidden_size", hidden), ("num_hidden_layers", layers)) if not v]
    if not heads and not block_kinds:
        missing.append("num_attention_heads")
    if missing:
        raise ConfigError(f"config.json lacks {', '.join(missing)}")
    kv_heads = _int(cfg, "num_key_value_heads", "num_kv_heads", "n_head_kv", default=heads)
    if cfg.get("multi_query") and not cfg.get("new_decoder_architecture"):
        kv_heads = 1
    head_dim = _int(cfg, "head_dim", "attention_head_dim", default=hidden // max(heads, 1))
    vocab = _int(cfg, "vocab_size", "padded_vocab_size", default=0)
    if not vocab:
        uncertain.append("vocab_size missing: 32,000 assumed")
        vocab = 32000
    max_pos = _int(
        cfg,
        "max_position_embeddings",
        "max_sequence_length",
        "seq_length",
        "n_positions",
        "max_seq_len",
        default=4096,
    )
    tie = cfg.get("tie_word_embeddings")
    tied = bool(tie) if tie is not None else family in TIED_BY_DEFAULT
    gated = family not in NON_GATED and str(cfg.get("mlp_hidden_act") or "") != "relu2"
    mlp_mats = 3 if gated else 2
    inter = _int(cfg, "intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim", "d_ff")
    if not inter:
        inter = 4 * hidden
        moe_only = any(k in cfg for k in ("n_routed_experts", "num_experts", "num_local_experts"))
        if family not in NON_GATED and not moe_only:
            uncertain.append("intermediate_size missing: 4 × hidden assumed")

    # experts
    experts = _int(cfg, "n_routed_experts", "num_local_experts", "num_experts", "moe_num_experts")
    if cfg.get("enable_moe_block") is False:
        experts = 0
    topk = _int(
        cfg,
        "num_experts_per_tok",
        "experts_per_token",
        "num_experts_per_token",
        "top_k_experts",
        "moe_topk",
        "moe_k",
        default=2 if experts else 0,
    )
    moe_inter = _int(cfg, "moe_intermediate_size", "expert_intermediate_size")
    dense_inter = _int(cfg, "intermediate_size_mlp") or inter
    if experts and not moe_inter:
        moe_inter = inter  # Mixtral, gpt-oss, Llama 4, MiniMax: intermediate_size is an expert's
    n_shared = _int(cfg, "n_shared_experts", "num_shared_experts")
    shared_inter = _int(
        cfg, "shared_expert_intermediate_size", "moe_shared_expert_intermediate_size"
    )
    if family.startswith("llama4") and experts:
        shared_inter = shared_inter or inter
    if n_shared and not shared_inter:
        shared_inter = n_shared * moe_inter
    if shared_inter and not n_shared:
        n_shared = 1
    moe_flags = _moe_layers(cfg, layers, experts)
    dense_with_moe = bool(cfg.get("enable_moe_block"))  # Gemma 4: a dense MLP beside the experts

    # attention geometry
    kv_lora = _int(cfg, "kv_lora_rank")
    q_lora = _int(cfg, "q_lora_rank")
    rope = _int(cfg, "qk_rope_head_dim")
    nope = _int(cfg, "qk_nope_head_dim")
    v_head = _int(cfg, "v_head_dim", default=head_dim)
    index_dim = _int(cfg, "index_head_dim") if (cfg.get("index_topk") or "v32" in family) else 0
    if index_dim:
        uncertain.append("sparse attention (DSA) indexer cache approximated")
    if kv_lora:
        uncertain.append("multi-head latent attention: no published log calibrates it yet")
    out_gate = 2 if cfg.get("attn_output_gate") else 1
    sliding_window = _int(cfg, "sliding_window", "attention_chunk_size")
    types = _layer_types(cfg, layers, family)
    if "sliding" not in types:
        sliding_window = 0
    global_kv = _int(cfg, "num_global_key_value_heads")
    global_dim = _int(cfg, "global_head_dim")

    def attn_params(kind: str) -> float:
        if kv_lora:
            qk = nope + rope
            q = hidden * q_lora + q_lora * heads * qk + q_lora if q_lora else hidden * heads * qk
            kv = hidden * (kv_lora + rope) + kv_lora * heads * (nope + v_head) + kv_lora
            return q + kv + heads * v_head * hidden
        kvh, hd = kv_heads, head_dim
        if kind == "full" and (global_kv or global_dim):
            kvh, hd = global_kv or kv_heads, global_dim or head_dim
        q = hidden * heads * hd * out_gate
        kv = 2 * hidden * kvh * hd
        if cfg.get("attention_k_eq_v") and kind == "full":
            kv = hidden * kvh * hd
        return q + kv + heads * hd * hidden

    def state_params() -> tuple[float, float]:
        """(projection params, state bytes per sequence) of one Mamba / linear-attention layer."""
        if "linear_num_value_heads" in cfg:  # Gated DeltaNet (Qwen3-Next, Qwen3.5)
            nk = _int(cfg, "linear_num_key_heads", default=16)
            dk = _int(cfg, "linear_key_head_dim", default=128)
            nv = _int(cfg, "linear_num_value_heads", default=32)
            dv = _int(cfg, "linear_value_head_dim", default=128)
            kern = _int(cfg, "linear_conv_kernel_dim", default=4)
            conv_dim = 2 * nk * dk + nv * dv
            proj = hidden * (2 * nk * dk + 2 * nv * dv) + hidden * 2 * nv + nv * dv * hidden
            state = nv * dk * dv * 4 + conv_dim * (kern - 1) * 2
            return proj, state
        nh = _int(cfg, "mamba_num_heads", default=0)
        hd = _int(cfg, "mamba_head_dim", default=64)
        d_inner = nh * hd if nh else _int(cfg, "expand", default=2) * hidden
        nh = nh or d_inner // hd
        ng = _int(cfg, "n_groups", "mamba_n_groups", default=1)
        ds = _int(cfg, "ssm_state_size", "mamba_d_state", "state_size", default=128)
        kern = _int(cfg, "conv_kernel", "mamba_d_conv", default=4)
        conv_dim = d_inner + 2 * ng * ds
        proj = hidden * (2 * d_inner + 2 * ng * ds + nh) + d_inner * hidden
        ssm_bytes = 4 if str(cfg.get("mamba_ssm_cache_dtype", "float32")) == "float32" else 2
        state = nh * hd * ds * ssm_bytes + conv_dim * (kern - 1) * 2
        return proj, state

    # checkpoint quantization
    qc = cfg.get("quantization_config") or config.get("quantization_config")
    if quant_config:
        qc = quant_config
    plan = parse_quantization(qc if isinstance(qc, Mapping) else None)
    quant = plan.main
    if quant and quant.guessed:
        uncertain.append(f"quantization ({quant.method}) partly assumed")
    latent = _int(cfg, "moe_latent_size")

    layer_weights: list[LayerWeights] = []
    state_bytes_total = 0.0
    norm = 2 * hidden
    for i, kind in enumerate(types):
        attn = 0.0
        other = float(norm)
        if kind in ("full", "sliding"):
            attn = attn_params(kind)
            if cfg.get("attention_bias") or cfg.get("qkv_bias") or family.startswith("qwen2"):
                other += (heads + 2 * kv_heads) * head_dim
            if cfg.get("use_qk_norm") or family.startswith(("qwen3", "gemma3", "gemma4")):
                other += 2 * head_dim
        elif kind == "state":
            attn, state = state_params()
            state_bytes_total += state
            other += hidden
        mlp = experts_p = shared = router = active = 0.0
        is_moe, has_mlp = moe_flags[i], True
        if block_kinds:
            is_moe = block_kinds[i] == "moe" and experts > 0
            has_mlp = block_kinds[i] in ("mlp", "moe")
        if has_mlp and is_moe:
            width = latent or hidden  # Nemotron 3 Super/Ultra route in a latent space
            experts_p = experts * mlp_mats * width * moe_inter
            active = topk * mlp_mats * width * moe_inter
            router = hidden * experts
            shared = mlp_mats * hidden * shared_inter if shared_inter else 0.0
            if latent:
                shared += 2 * hidden * latent
            if dense_with_moe:
                mlp = mlp_mats * hidden * inter
            if family == "gpt_oss":
                other += experts * (2 * moe_inter + hidden)  # expert biases
        elif has_mlp:
            width = dense_inter if experts else inter
            mlp = mlp_mats * hidden * width
        qbytes: list[tuple[str, float]] = []
        for category, p in (
            ("attn", attn),
            ("mlp", mlp),
            ("experts", experts_p),
            ("shared", shared),
            ("router", router),
        ):
            if p:
                b = _category_bytes(plan, family, nested, category, i, kind == "state")
                if b is not None:
                    qbytes.append((category, b))
        layer_weights.append(
            LayerWeights(kind, attn, mlp, experts_p, shared, router, other, tuple(qbytes), active)
        )

    embed = float(vocab * hidden)
    lm_head = 0.0 if tied else float(vocab * hidden)
    final_norm = float(hidden)
    vision = 0.0
    if nested:
        vc = config.get("vision_config")
        if isinstance(vc, Mapping):
            vh = _int(vc, "hidden_size", "embed_dim", "width")
            vl = _int(vc, "depth", "num_hidden_layers", "layers")
            vi = _int(vc, "intermediate_size", "mlp_ratio", default=4 * vh)
            if vi < 16:
                vi *= vh
            vision = vl * (4 * vh * vh + 2 * vh * vi)
            if vision:
                uncertain.append("vision encoder counted from its config (16-bit)")
    params = sum(lw.params for lw in layer_weights) + embed + lm_head + final_norm + vision
    active_params = params
    if experts:
        active_params = params - sum(lw.experts - lw.experts_active for lw in layer_weights)

    sliding_layers = types.count("sliding")
    state_layers = types.count("state")
    if state_layers:
        uncertain.append(
            f"{state_layers} Mamba/linear-attention layers keep a fixed state per sequence"
        )
    sliding_kv = sliding_dim = 0
    if global_kv or global_dim:
        # Gemma 4: full layers use the global geometry, sliding ones the plain one.
        sliding_kv, sliding_dim = kv_heads, head_dim
        kv_heads, head_dim = global_kv or kv_heads, global_dim or head_dim
    if family.startswith(("deepseek_v4", "minimax_m3", "kimi_k3")):
        uncertain.append(f"{family}: attention cache layout not modelled exactly")

    dtype_name = str(cfg.get("torch_dtype") or cfg.get("dtype") or config.get("torch_dtype") or "")
    dtype = DTYPE_NAMES.get(dtype_name.lower(), "bf16")
    spec = ModelSpec(
        name,
        hf_id or str(config.get("_name_or_path") or ""),
        params,
        layers,
        kv_heads,
        head_dim,
        hidden,
        max_pos,
        heads=heads,
        vocab_size=vocab,
        intermediate_size=inter,
        tie_word_embeddings=tied,
        num_experts=experts,
        experts_per_token=topk,
        moe_intermediate_size=moe_inter if experts else 0,
        shared_experts=n_shared,
        moe_layers=sum(1 for lw in layer_weights if lw.experts),
        kv_lora_rank=kv_lora,
        qk_rope_head_dim=rope,
        index_head_dim=index_dim,
        sliding_window=sliding_window,
        sliding_layers=sliding_layers,
        state_layers=state_layers,
        state_bytes_per_seq=state_bytes_total,
        sliding_kv_heads=sliding_kv,
        sliding_head_dim=sliding_dim,
        active_params=active_params,
        gated_mlp=gated,
        dtype=dtype,
        quant=quant,
        layer_weights=tuple(layer_weights),
        embed_params=embed,
        lm_head_params=lm_head,
        final_norm_params=final_norm,
        vision_params=vision,
        lm_head_quantized=plan.lm_head and not tied,
        family=family,
        uncertain=tuple(uncertain),
    )
    return spec


def validate_config(config: Any) -> dict[str, Any]:
    """A pasted config.json, checked: a JSON object, at most MAX_CONFIG_BYTES, parseable."""
    if isinstance(config, str):
        if len(config) > 4 * MAX_CONFIG_BYTES:  # refuse before parsing (whitespace allowed)
            raise ConfigError(
                f"hf_config is {len(config):,} characters; at most {MAX_CONFIG_BYTES:,} bytes "
                "of JSON (paste config.json only)"
            )
        try:
            config = json.loads(config)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"hf_config is not valid JSON: {exc.msg}") from None
    if not isinstance(config, dict):
        raise ConfigError("hf_config must be a JSON object (the model's config.json)")
    size = len(json.dumps(config, separators=(",", ":")))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"hf_config is {size:,} bytes; at most {MAX_CONFIG_BYTES:,} (paste config.json only)"
        )
    parse_hf_config(config)
    return config
