"""What the memory math needs of a model: its architecture, parameters by module and quantization.

A `ModelSpec` is built from a Hugging Face `config.json` by `app.sizing.hfconfig`, or given
directly (the catalog's older entries and a profile's `custom` fields: then only the first eight
fields are known and weights are `params × bytes(dtype)`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

GIB = 1024**3

DTYPE_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1,
    "int8": 1,
    "fp4": 0.5,
    "int4": 0.5,
}

# Bytes per weight of a quantized linear layer, scales and zeros included, when a profile asks
# for a weight dtype the checkpoint does not carry (runtime quantization, or the what-if rows):
# FP8 and INT8 per-channel scales are negligible; INT4 is AWQ/GPTQ-like (groups of 128 with a
# 16-bit scale and a 4-bit zero); FP4 is NVFP4 (an FP8 scale per 16 weights).
RUNTIME_WEIGHT_BYTES: dict[str, float] = {
    "fp32": 4,
    "bf16": 2,
    "fp16": 2,
    "fp8": 1.0,
    "int8": 1.0,
    "int4": 0.5 + (2 + 0.5) / 128,
    "fp4": 0.5 + 1 / 16,
}

CATEGORIES = ("attn", "mlp", "experts", "shared", "router", "state")


@dataclass(frozen=True)
class Quantization:
    """A checkpoint's quantization: the bytes per weight of its quantized linear layers (scales
    and zeros included) and the dtype name it amounts to (for the FP8/FP4 checks and labels)."""

    method: str  # awq, gptq, fp8, compressed-tensors, modelopt, mxfp4, bitsandbytes, …
    weight_dtype: str  # int4, int8, fp8, fp4
    bytes_per_weight: float
    bits: int
    group_size: int = 0  # 0: per channel or per tensor (scales negligible)
    kv_dtype: str | None = None  # a KV cache dtype the checkpoint ships scales for (modelopt)
    guessed: bool = False  # parts of the scheme were not stated and were assumed
    note: str = ""


@dataclass(frozen=True)
class LayerWeights:
    """Parameters of one decoder layer by module kind, and which kinds the checkpoint quantizes.

    attn: attention projections (or the linear-attention / Mamba projections of a state layer);
    mlp: a dense MLP; experts: all routed experts; shared: shared experts; router: the MoE gate;
    other: norms, biases, convolutions (always 16-bit)."""

    kind: str  # "full", "sliding", "state" (Mamba / linear attention), "mlp" (an MLP-only layer)
    attn: float = 0.0
    mlp: float = 0.0
    experts: float = 0.0
    shared: float = 0.0
    router: float = 0.0
    other: float = 0.0
    # bytes per weight of the categories the checkpoint stores quantized (scales included)
    qbytes: tuple[tuple[str, float], ...] = ()
    experts_active: float = 0.0  # parameters of the experts one token passes through

    @property
    def quantized(self) -> frozenset[str]:
        return frozenset(c for c, _ in self.qbytes)

    @property
    def params(self) -> float:
        return self.attn + self.mlp + self.experts + self.shared + self.router + self.other


@dataclass(frozen=True)
class ModelSpec:
    """What the memory math needs of a model's architecture (its Hugging Face config).

    The first eight fields are all a hand-written (custom) model gives; the rest come from a
    config.json. `kv_heads` and `head_dim` describe the full-attention layers; `params` counts
    every expert (every expert's weights are resident), `active_params` what one token uses."""

    name: str
    hf_id: str
    params: float  # parameters, all experts included
    layers: int
    kv_heads: int
    head_dim: int
    hidden_size: int
    max_position_embeddings: int
    heads: int = 0
    vocab_size: int = 0
    intermediate_size: int = 0  # the dense MLP's (or, for an all-MoE model, one expert's)
    tie_word_embeddings: bool = False
    num_experts: int = 0
    experts_per_token: int = 0
    moe_intermediate_size: int = 0
    shared_experts: int = 0
    moe_layers: int = 0
    kv_lora_rank: int = 0  # multi-head latent attention (DeepSeek): compressed KV
    qk_rope_head_dim: int = 0
    index_head_dim: int = 0  # DeepSeek sparse attention's indexer key cache per token per layer
    sliding_window: int = 0
    sliding_layers: int = 0  # layers attending within the window
    state_layers: int = 0  # Mamba / linear-attention layers: no per-token KV
    state_bytes_per_seq: float = 0.0  # their fixed state per sequence, all such layers
    sliding_kv_heads: int = 0  # when sliding layers differ (Gemma 4); 0: as full layers
    sliding_head_dim: int = 0
    active_params: float = 0.0
    gated_mlp: bool = True
    dtype: str = "bf16"  # the checkpoint's 16-bit dtype
    quant: Quantization | None = None
    layer_weights: tuple[LayerWeights, ...] = ()
    embed_params: float = 0.0
    lm_head_params: float = 0.0  # 0 when tied to the embeddings
    final_norm_params: float = 0.0
    vision_params: float = 0.0  # a multimodal model's vision tower (16-bit, on the first rank)
    lm_head_quantized: bool = False
    family: str = ""  # the config's model_type
    uncertain: tuple[str, ...] = field(default=())  # what the parse had to assume

    @property
    def attention_layers(self) -> int:
        """Layers that keep per-token K/V (full and sliding attention)."""
        return self.layers - self.state_layers - self.mlp_only_layers

    @property
    def mlp_only_layers(self) -> int:
        return sum(1 for lw in self.layer_weights if lw.kind == "mlp")

    @property
    def full_layers(self) -> int:
        return self.attention_layers - self.sliding_layers

    @property
    def mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def moe(self) -> bool:
        return self.num_experts > 0

    @property
    def detailed(self) -> bool:
        """True when weights can be counted module by module (a config was parsed)."""
        return bool(self.layer_weights)

    def kv_elems_per_token_layer(self, sliding: bool = False) -> int:
        """K and V elements one token keeps in one attention layer (one latent for MLA)."""
        if self.mla:
            return self.kv_lora_rank + self.qk_rope_head_dim
        if sliding and self.sliding_kv_heads:
            return 2 * self.sliding_kv_heads * (self.sliding_head_dim or self.head_dim)
        return 2 * self.kv_heads * self.head_dim
