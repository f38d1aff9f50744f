"""GPU memory of one engine replica: weights, overhead, KV cache budget and capacity.

Per GPU rank, as the engines size their KV cache (docs/sizing.md has the derivation and the
calibration against published startup logs):

- weights: the checkpoint's real size, module by module (`app.sizing.hfconfig`): embeddings and
  the output layer 16-bit, quantized linear layers at their bits plus scales, split over the
  tensor-parallel ranks (K/V projections are replicated when there are fewer KV heads than
  ranks; MLA's down-projections are replicated) and over the pipeline stages by layers (the
  first stage holds the embeddings, the last the output layer). A weight size from the engine's
  own log ("model weights take 14.99GiB", "Model loading took 15.0 GiB") replaces the count.
- non-torch memory (CUDA context, cuBLAS workspaces, NCCL and custom all-reduce buffers): by
  framework, version and parallelism (`Runtime`).
- the activation peak of the profiling run, `max(forward, sampler) + MoE workspace`:
  forward `T × (c_f × intermediate/TP + c_h × hidden)` for the T tokens of the largest step;
  the sampler's logits `S × vocab × c_s` for the S sequences of a step (last pipeline stage);
  a mixture-of-experts workspace `c_m × T × experts-per-token × (3 × moe_intermediate/TP +
  hidden)`. T is vLLM's max_num_batched_tokens; vLLM V0 without chunked prefill profiles
  max(max_num_batched_tokens, max_model_len) tokens, V1 always chunks.
- vLLM: `KV = total × gpu_memory_utilization − weights − non-torch − activation` per rank;
  TensorRT-LLM: `KV = (total − weights − non-torch − runtime buffers) × free_gpu_memory_fraction`.
- capacity in tokens: the smallest over ranks of `KV / (bytes per token on that rank)`, in whole
  blocks. Bytes per token: 2 × KV heads per rank × head dim × bytes per attention layer on the
  stage (one shared latent of kv_lora_rank + qk_rope_head_dim for MLA, not split by TP).
  Mamba and linear-attention layers hold no per-token KV. vLLM reports hybrid sliding-window
  models as if every attention layer held every token, and so does this estimate.

Where the model is uncertain (no engine version, an architecture with state layers, a
quantization partly assumed, TensorRT-LLM's build-time buffers) the answer carries a range and
the point estimate leans to its low side.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from app.sizing.gpus import GpuSpec
from app.sizing.modelspec import (
    DTYPE_BYTES,
    GIB,
    RUNTIME_WEIGHT_BYTES,
    LayerWeights,
    ModelSpec,
)

if TYPE_CHECKING:
    from app.sizing.profile import EngineProfile

DEFAULT_STEP_TOKENS = 8192  # vLLM's max-num-batched-tokens on an 80 GB-class GPU
SMALL_GPU_STEP_TOKENS = 2048  # … and on smaller GPUs and A100s (vLLM ≥ 0.8)
BLOCK_TOKENS = 16
LOG_HINT = "paste your engine's startup log for the exact figure"
# Kept for callers of the first overhead model (see overhead_bytes).
NON_TORCH_GIB_SINGLE = 0.25
NON_TORCH_GIB_PARALLEL = 0.5
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 40.0


@dataclass(frozen=True)
class Runtime:
    """The documented constants of one engine family (fitted in docs/sizing.md)."""

    name: str
    sampler_bytes: float  # per sequence × vocab entry in the profiling run's sampler
    forward_bytes: float  # per token × intermediate unit (per rank) in the forward pass
    hidden_bytes: float  # per token × hidden unit in the forward pass
    moe_bytes: float  # per token × expert-per-token × (3·moe_intermediate/TP + hidden)
    non_torch_gib: float  # one GPU
    non_torch_ar_gib: float  # per GPU, tensor parallel with custom all-reduce (NVLink)
    non_torch_tp_gib: float  # per GPU, tensor parallel over PCIe or nodes (NCCL only)
    non_torch_pp_gib: float  # per GPU with pipeline parallelism only
    always_chunked: bool  # V1: the profiling step never exceeds max_num_batched_tokens
    cuda_graph_gib: float = 0.0  # CUDA graph memory reserved before sizing the KV cache
    fraction_of_free: bool = False  # TensorRT-LLM: the fraction applies to free memory
    context_bytes: float = 0.0  # TensorRT-LLM: execution context per token × (hidden + inter)
    decoder_bytes: float = 0.0  # TensorRT-LLM: runtime + decoder buffers per batch slot × vocab


# vLLM V1 from 0.11 (calibrated on 0.19.0 logs): the sampler of the profiling run holds the
# logits of max_num_seqs sequences; custom all-reduce and NCCL buffers take ~2.1 GiB per GPU.
VLLM_V1 = Runtime("vllm-v1", 14.9, 9.5, 2.0, 2.0, 0.25, 2.1, 0.1, 0.1, True)
# vLLM from 0.21 also reserves the CUDA graphs' memory before sizing the KV cache (0.71-1.09
# GiB "Estimated CUDA graph memory" in 0.19 logs on H100, where it was not yet subtracted).
VLLM_V1_GRAPHS = Runtime("vllm-v1.21", 14.9, 9.5, 2.0, 2.0, 0.25, 2.1, 0.1, 0.1, True, 0.9)
# vLLM V1 0.8-0.10 (calibrated on 0.10.1.1 logs): less memory outside PyTorch.
VLLM_V1_EARLY = Runtime("vllm-v1.8", 14.9, 9.5, 2.0, 2.0, 0.05, 2.1, 0.1, 0.1, True)
# vLLM V0 (≤ 0.7, and 0.8-0.9 when V0 is forced): the profiling run samples with top-k and
# top-p over the whole vocabulary (a sort: a heavier sampler), and without chunked prefill it
# profiles a step of max(max_num_batched_tokens, max_model_len) tokens.
VLLM_V0 = Runtime("vllm-v0", 41.0, 7.75, 2.0, 2.0, 0.25, 0.3, 0.3, 0.1, False)
# TensorRT-LLM: free_gpu_memory_fraction of what is free after the engine, its execution
# context (max_num_tokens) and its runtime and decoder buffers (max_batch_size × vocab).
TRTLLM = Runtime("trtllm", 0.0, 0.0, 0.0, 2.0, 1.0, 1.5, 1.0, 1.0, True, 0.0, True, 17.2, 27.0)
TRTLLM_DEFAULT_BATCH = 2048  # trtllm-build's max_batch_size default (≥ 0.12)


def parse_version(text: str | None) -> tuple[int, ...] | None:
    """ "0.19.0", "v0.6.4.post1", "0.15.2rc1.dev93+g…" → (0, 19, 0); None when absent."""
    if not text:
        return None
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    if not m:
        return None
    return tuple(int(g) for g in m.groups() if g is not None)


def engine_runtime(framework: str, engine_version: str | None = None) -> Runtime:
    """The constants for a framework and version (NIM runs vLLM; SGLang is sized like V1).

    No version: the newest vLLM (which reserves CUDA graph memory: the conservative side)."""
    if framework == "trtllm":
        return TRTLLM
    version = parse_version(engine_version)
    if version is None or framework not in ("vllm", "nim"):
        return VLLM_V1_GRAPHS
    if version < (0, 8) or re.search(r"\bv0\b", (engine_version or "").lower()[3:]):
        return VLLM_V0
    if version < (0, 11):
        return VLLM_V1_EARLY
    if version < (0, 21):
        return VLLM_V1
    return VLLM_V1_GRAPHS


def layer_partition(layers: int, pp: int) -> list[int]:
    """Layers per pipeline stage as vLLM splits them: even, the remainder to the stages just
    before the last one (the last stage also holds the output layer)."""
    pp = max(1, min(pp, layers or 1))
    parts = [layers // pp] * pp
    for i in range(2, layers % pp + 2):
        parts[-i] += 1
    return parts


def _kv_elems_rank(model: ModelSpec, tp: int, sliding: bool) -> float:
    if model.mla:
        return model.kv_lora_rank + model.qk_rope_head_dim  # the latent is not split by TP
    heads = model.sliding_kv_heads if sliding and model.sliding_kv_heads else model.kv_heads
    dim = model.sliding_head_dim if sliding and model.sliding_head_dim else model.head_dim
    return 2 * max(1.0, heads / tp) * dim


def _layer_kv_bytes(model: ModelSpec, lw: LayerWeights, kv_dtype: str, tp: int) -> float:
    """KV bytes one token keeps in one layer on one tensor-parallel rank."""
    if lw.kind not in ("full", "sliding"):
        return 0.0
    per = _kv_elems_rank(model, tp, lw.kind == "sliding") * DTYPE_BYTES[kv_dtype]
    if model.index_head_dim:
        per += model.index_head_dim + 4  # DeepSeek sparse attention's FP8 indexer keys
    return per


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str) -> int:
    """KV bytes one token keeps in the whole model: 2 (K and V) × layers × KV heads × head dim
    × bytes per element for every attention layer (one latent per layer for MLA)."""
    if not model.detailed:
        return int(2 * model.layers * model.kv_heads * model.head_dim * DTYPE_BYTES[kv_dtype])
    return int(sum(_layer_kv_bytes(model, lw, kv_dtype, 1) for lw in model.layer_weights))


def _category_bytes(model: ModelSpec, lw: LayerWeights, category: str, weight_dtype: str) -> float:
    """Bytes per weight of one module category as the engine holds it."""
    stored = dict(lw.qbytes)
    quant = model.quant
    if quant is not None and weight_dtype in (quant.weight_dtype, model.dtype, "bf16", "fp16"):
        return stored.get(category, DTYPE_BYTES[model.dtype])
    if category == "router":
        return DTYPE_BYTES[model.dtype]
    return RUNTIME_WEIGHT_BYTES[weight_dtype]


def _layer_bytes(model: ModelSpec, lw: LayerWeights, weight_dtype: str, tp: int) -> float:
    """One decoder layer's weights on one tensor-parallel rank."""
    total = lw.other * 2  # norms, biases, convolutions: 16-bit, replicated (small)
    for category in ("attn", "mlp", "experts", "shared", "router"):
        params = getattr(lw, category)
        if not params:
            continue
        per = _category_bytes(model, lw, category, weight_dtype)
        if category == "router":
            total += params * per  # replicated
        elif category == "attn" and lw.kind in ("full", "sliding") and tp > 1:
            total += _attn_rank_params(model, lw, tp) * per
        else:
            total += params / tp * per
    return total


def _attn_rank_params(model: ModelSpec, lw: LayerWeights, tp: int) -> float:
    """Attention parameters on one rank: Q/O split by heads; K/V split while there are at least
    as many KV heads as ranks, else replicated; MLA's down-projections replicated."""
    h = model.hidden_size
    if model.mla:
        rope = model.qk_rope_head_dim
        down = h * (model.kv_lora_rank + rope)
        return (lw.attn - down) / tp + down
    kv = min(float(2 * h * model.kv_heads * model.head_dim), lw.attn)
    kv_rank = kv / tp if model.kv_heads >= tp else kv / model.kv_heads
    return (lw.attn - kv) / tp + kv_rank


def weights_bytes(model: ModelSpec, weight_dtype: str) -> float:
    """The whole model's weights as the engine holds them (all ranks together, unsharded).

    From the architecture module by module when a config was parsed; else params × bytes."""
    if not model.detailed:
        return model.params * DTYPE_BYTES[weight_dtype]
    layers = sum(_layer_bytes(model, lw, weight_dtype, 1) for lw in model.layer_weights)
    return layers + _edge_bytes(model, weight_dtype, first=True, last=True)


def _edge_bytes(model: ModelSpec, weight_dtype: str, *, first: bool, last: bool) -> float:
    """Embeddings (first stage), output layer and final norm (last stage), vision tower."""
    b16 = DTYPE_BYTES[model.dtype]
    total = 0.0
    if first:
        total += model.embed_params * b16 + model.vision_params * b16
    if last:
        head = model.lm_head_params or (model.embed_params if not first else 0.0)
        head_bytes = b16
        if model.lm_head_quantized and model.quant is not None:
            head_bytes = model.quant.bytes_per_weight
        total += head * head_bytes + model.final_norm_params * b16
    return total


@dataclass(frozen=True)
class RankMemory:
    """One GPU of the replica (the first rank of its pipeline stage), in bytes."""

    stage: int
    layers: int
    weights: float
    non_torch: float
    activation: float
    budget: float  # what is left for the KV cache
    kv_per_token: float
    kv_tokens: int


@dataclass(frozen=True)
class Memory:
    """One replica's memory, in bytes; kv_capacity_tokens is 0 when nothing is left for KV.

    `kv_low_tokens`/`kv_high_tokens` bound the estimate where the model is uncertain (equal to
    the point otherwise); `uncertain` says why, and `hint` what settles it."""

    gpus: int
    total: float
    usable: float
    weights: float
    overhead: float
    kv_budget: float
    kv_per_token: int
    kv_capacity_tokens: int
    measured: bool = False
    kv_low_tokens: int = 0
    kv_high_tokens: int = 0
    uncertain: tuple[str, ...] = ()
    hint: str | None = None
    ranks: tuple[RankMemory, ...] = field(default=())
    runtime: str = ""

    @property
    def fits(self) -> bool:
        """True when there is room for some KV cache (a logged capacity says so itself)."""
        return self.kv_capacity_tokens > 0 if self.measured else self.kv_budget > 0

    @property
    def unused(self) -> float:
        """Memory outside the engine's fraction (kept free by gpu_memory_utilization)."""
        return self.total - self.usable

    @property
    def kv_range(self) -> tuple[int, int]:
        """(low, high) KV capacity in tokens."""
        return (
            self.kv_low_tokens or self.kv_capacity_tokens,
            self.kv_high_tokens or self.kv_capacity_tokens,
        )


def default_step_tokens(gpu_memory_gib: float, gpu_name: str = "") -> int:
    """vLLM's default max_num_batched_tokens for its API server (≥ 0.8): 8,192 on GPUs of at
    least 70 GiB other than the A100, 2,048 on the rest."""
    big = gpu_memory_gib >= 70 and "a100" not in gpu_name.lower()
    return DEFAULT_STEP_TOKENS if big else SMALL_GPU_STEP_TOKENS


def default_max_seqs(gpu_memory_gib: float, gpu_name: str, runtime: Runtime) -> int:
    """vLLM's default max_num_seqs: 1,024 on ≥ 70 GiB GPUs other than A100 (V1), else 256."""
    if runtime.name == "vllm-v1" and gpu_memory_gib >= 70 and "a100" not in gpu_name.lower():
        return 1024
    return 256


def activation_bytes(
    model: ModelSpec,
    *,
    step_tokens: int,
    max_seqs: int,
    tp: int,
    runtime: Runtime,
    sampler: bool = True,
    dense: bool = True,
) -> float:
    """The profiling run's activation peak on one rank: max(forward, sampler) + MoE workspace.

    For TensorRT-LLM: its execution context for `step_tokens` (max_num_tokens) plus runtime
    and decoder buffers for `max_seqs` (max_batch_size) slots."""
    h = model.hidden_size
    inter = model.intermediate_size if dense else 0
    if runtime.fraction_of_free:
        width = h + (inter or model.moe_intermediate_size * model.experts_per_token) / tp
        context = step_tokens * width * runtime.context_bytes
        return context + max_seqs * model.vocab_size * runtime.decoder_bytes / tp
    forward = step_tokens * (runtime.forward_bytes * inter / tp + runtime.hidden_bytes * h)
    logits = 0.0
    if sampler and model.vocab_size:
        logits = max_seqs * model.vocab_size * runtime.sampler_bytes + step_tokens * h * 2
    peak = max(forward, logits)
    if model.moe and model.moe_intermediate_size:
        width = 3 * model.moe_intermediate_size / tp + h
        peak += runtime.moe_bytes * step_tokens * model.experts_per_token * width
    return peak


def overhead_bytes(model: ModelSpec, gpus: int, step_tokens: int) -> float:
    """Non-weight memory of a whole replica (all its GPUs) outside the KV cache: non-torch
    memory plus the activation peak (vLLM V1 constants, tensor parallelism over `gpus`)."""
    runtime = VLLM_V1
    non_torch = (runtime.non_torch_gib if gpus == 1 else runtime.non_torch_tp_gib) * GIB
    act = activation_bytes(model, step_tokens=step_tokens, max_seqs=256, tp=gpus, runtime=runtime)
    return gpus * (non_torch + act)


@dataclass(frozen=True)
class _Estimate:
    ranks: tuple[RankMemory, ...]
    capacity: int


def _estimate(
    model: ModelSpec,
    *,
    gpu_memory_bytes: float,
    tp: int,
    pp: int,
    weight_dtype: str,
    kv_dtype: str,
    fraction: float,
    runtime: Runtime,
    step_tokens: int,
    max_seqs: int,
    weights_per_gpu: float | None,
    non_torch_gib: float | None,
    block: int,
    custom_ar: bool = True,
) -> _Estimate:
    detailed = model.detailed
    decoder = [lw for lw in model.layer_weights if lw.kind != "vision"] if detailed else []
    n_layers = len(decoder) if detailed else model.layers
    parts = layer_partition(n_layers, pp)
    if non_torch_gib is None:
        if tp > 1:
            non_torch_gib = runtime.non_torch_ar_gib if custom_ar else runtime.non_torch_tp_gib
        elif pp > 1:
            non_torch_gib = runtime.non_torch_pp_gib
        else:
            non_torch_gib = runtime.non_torch_gib
    non_torch = non_torch_gib * GIB
    ranks: list[RankMemory] = []
    start = 0
    has_dense = not model.moe or any(lw.mlp for lw in decoder) or not detailed
    for stage, count in enumerate(parts):
        first, last = stage == 0, stage == len(parts) - 1
        if detailed:
            mine = decoder[start : start + count]
            weights = sum(_layer_bytes(model, lw, weight_dtype, tp) for lw in mine)
            weights += _edge_bytes(model, weight_dtype, first=first, last=last) / tp
            per_token = sum(_layer_kv_bytes(model, lw, kv_dtype, tp) for lw in mine)
        else:
            weights = weights_bytes(model, weight_dtype) * count / max(n_layers, 1) / tp
            per_token = (2 * count * max(1.0, model.kv_heads / tp) * model.head_dim) * DTYPE_BYTES[
                kv_dtype
            ]
        start += count
        if weights_per_gpu is not None:
            weights = weights_per_gpu
        act = activation_bytes(
            model,
            step_tokens=step_tokens,
            max_seqs=max_seqs,
            tp=tp,
            runtime=runtime,
            sampler=last,
            dense=has_dense,
        )
        # CUDA graphs are captured for batch sizes up to min(512, 2 × max_num_seqs)
        graphs = runtime.cuda_graph_gib * GIB * (0.17 + 0.83 * min(1.0, max_seqs / 512))
        if runtime.fraction_of_free:
            budget = (gpu_memory_bytes - weights - non_torch - act) * fraction
        else:
            budget = gpu_memory_bytes * fraction - weights - non_torch - act - graphs
        tokens = 0
        if budget > 0 and per_token > 0:
            tokens = math.floor(budget / (per_token * block)) * block
        ranks.append(RankMemory(stage, count, weights, non_torch, act, budget, per_token, tokens))
    capacity = min((r.kv_tokens for r in ranks if r.kv_per_token > 0), default=0)
    return _Estimate(tuple(ranks), capacity)


def replica_memory(
    model: ModelSpec,
    *,
    gpu_memory_bytes: float,
    gpus: int,
    weight_dtype: str,
    kv_dtype: str,
    memory_fraction: float,
    step_tokens: int | None = None,
    overhead: float | None = None,
    measured_kv_tokens: int | None = None,
    fraction_of_free: bool = False,
    tensor_parallel: int | None = None,
    pipeline_parallel: int = 1,
    framework: str | None = None,
    engine_version: str | None = None,
    max_num_seqs: int | None = None,
    max_model_len: int | None = None,
    chunked_prefill: bool | None = None,
    weights_gib_logged: float | None = None,
    gpu: GpuSpec | None = None,
    gpus_per_node: int = 8,
) -> Memory:
    """One replica's memory and KV capacity (see the module docstring for the model).

    `gpus` is the replica's GPU count; `tensor_parallel` × `pipeline_parallel` splits it (all
    tensor-parallel when not given). `framework` "vllm"/"nim"/"sglang" size the KV cache from
    `gpu_memory_utilization` of the total, "trtllm" from `free_gpu_memory_fraction` of what is
    free (also selected by `fraction_of_free`). `step_tokens` is max_num_batched_tokens;
    `weights_gib_logged` the per-GPU weights from the engine's log. A measured KV capacity (from
    the engine's own log) replaces the estimate; `overhead` given explicitly replaces the
    overhead model and the module-wise weights (the worked example of DESIGN §7 uses 0).
    `gpu` (its name and form) sets vLLM's defaults and whether custom all-reduce runs
    (NVLink-connected GPUs within one node of `gpus_per_node`)."""
    total = gpu_memory_bytes * gpus
    if overhead is not None:
        return _flat(
            model,
            total=total,
            gpus=gpus,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            fraction=memory_fraction,
            overhead=overhead,
            measured_kv_tokens=measured_kv_tokens,
            fraction_of_free=fraction_of_free,
        )
    if framework is None:
        framework = "trtllm" if fraction_of_free else "vllm"
    pp = max(1, pipeline_parallel)
    tp = tensor_parallel or max(1, gpus // pp)
    runtime = engine_runtime(framework, engine_version)
    gib = gpu_memory_bytes / GIB
    gpu_name = gpu.name if gpu else ""
    uncertain: list[str] = list(model.uncertain)
    if runtime.fraction_of_free:
        max_seqs = max_num_seqs or TRTLLM_DEFAULT_BATCH
    else:
        max_seqs = max_num_seqs or default_max_seqs(gib, gpu_name, runtime)
    nvlink = (
        gpu is None
        or gpu.form in ("sxm", "superchip", "oam")
        or (gpu.name == "H100-NVL" and tp <= 2)
    )
    custom_ar = nvlink and tp <= gpus_per_node
    if tp > gpus_per_node:
        uncertain.append("tensor parallelism across nodes: NCCL buffers vary")
    elif tp > 1 and gpu is not None and not nvlink:
        uncertain.append("tensor parallelism without NVLink: custom all-reduce may be off")
    context = max_model_len or model.max_position_embeddings

    def step_for(rt: Runtime) -> int:
        step = step_tokens or default_step_tokens(gib, gpu_name)
        chunked = chunked_prefill
        if chunked is None:
            chunked = rt.always_chunked or context >= 32768
        if not chunked and not rt.always_chunked:
            step = max(step_tokens or 0, context, 2048)
        return step

    def run(rt: Runtime, **change: float) -> _Estimate:
        return _estimate(
            model,
            gpu_memory_bytes=gpu_memory_bytes,
            tp=tp,
            pp=pp,
            weight_dtype=weight_dtype,
            kv_dtype=kv_dtype,
            fraction=memory_fraction,
            runtime=rt,
            step_tokens=int(change.get("step", step_for(rt))),
            max_seqs=int(change.get("seqs", max_seqs)),
            weights_per_gpu=(
                weights_gib_logged * GIB if weights_gib_logged else change.get("weights")
            ),
            non_torch_gib=change.get("non_torch"),
            block=BLOCK_TOKENS,
            custom_ar=custom_ar,
        )

    central = run(runtime)
    alternatives = [central.capacity]
    if max_num_seqs is None and not runtime.fraction_of_free:
        # the profiling run's sampler holds max_num_seqs logits: a deployment's own (smaller)
        # max_num_seqs raises the capacity
        alternatives.append(run(runtime, seqs=64).capacity)
    version_known = parse_version(engine_version) is not None
    if framework in ("vllm", "nim") and not version_known:
        alternatives += [run(VLLM_V1).capacity, run(VLLM_V0).capacity]
        uncertain.append("engine version unknown (vLLM versions profile differently)")
    if framework == "trtllm":
        uncertain.append("TensorRT-LLM's runtime buffers depend on the engine's build limits")
    if not model.detailed and not weights_gib_logged:
        uncertain.append("architecture given by hand: weights from the parameter count")
    if model.quant is not None and model.quant.guessed and not weights_gib_logged:
        uncertain.append("quantization partly assumed")

    uncertain = list(dict.fromkeys(uncertain))
    tol = 0.02 + 0.04 * len(uncertain) + (0.10 if framework == "trtllm" else 0.0)
    point = central.capacity
    low = min(min(alternatives), int(point * (1 - tol)))
    high = max(max(alternatives), int(point * (1 + tol)))
    if uncertain:
        # lean to the conservative side of the range
        point = int(point - 0.25 * (point - low))
    point = point // BLOCK_TOKENS * BLOCK_TOKENS

    ranks = central.ranks
    weights = sum(r.weights for r in ranks) * tp
    overhead_total = sum(r.non_torch + r.activation for r in ranks) * tp
    budget = sum(r.budget for r in ranks) * tp
    per_token = int(sum(r.kv_per_token for r in ranks) * tp)
    if runtime.fraction_of_free:
        usable = weights + overhead_total + max(budget, 0)
    else:
        usable = total * memory_fraction
    hint = LOG_HINT if uncertain and measured_kv_tokens is None else None
    if measured_kv_tokens is not None:
        return Memory(
            gpus,
            total,
            usable,
            weights,
            overhead_total,
            budget,
            per_token,
            measured_kv_tokens,
            True,
            measured_kv_tokens,
            measured_kv_tokens,
            (),
            None,
            ranks,
            runtime.name,
        )
    if budget <= 0 or point <= 0:
        point = low = high = 0
    return Memory(
        gpus,
        total,
        usable,
        weights,
        overhead_total,
        budget,
        per_token,
        max(point, 0),
        False,
        max(low, 0),
        max(high, 0),
        tuple(uncertain),
        hint,
        ranks,
        runtime.name,
    )


def _flat(
    model: ModelSpec,
    *,
    total: float,
    gpus: int,
    weight_dtype: str,
    kv_dtype: str,
    fraction: float,
    overhead: float,
    measured_kv_tokens: int | None,
    fraction_of_free: bool,
) -> Memory:
    """kv_budget = gpu_mem × gpus × fraction − weights − overhead (an explicit overhead)."""
    weights = weights_bytes(model, weight_dtype)
    per_token = kv_bytes_per_token(model, kv_dtype)
    if fraction_of_free:
        budget = (total - weights - overhead) * fraction
        usable = weights + overhead + max(budget, 0)
    else:
        usable = total * fraction
        budget = usable - weights - overhead
    if measured_kv_tokens is not None:
        return Memory(
            gpus, total, usable, weights, overhead, budget, per_token, measured_kv_tokens, True
        )
    capacity = math.floor(budget / per_token) if budget > 0 and per_token > 0 else 0
    return Memory(
        gpus,
        total,
        usable,
        weights,
        overhead,
        budget,
        per_token,
        capacity,
        False,
        capacity,
        capacity,
    )


def memory_for_profile(profile: EngineProfile, step_tokens: int | None) -> Memory:
    """One replica's memory for a profile: every field the model uses (parallelism split,
    framework and version, context, batch, logged weights; a logged KV capacity wins)."""
    gpu = profile.gpu_spec()
    return replica_memory(
        profile.spec(),
        gpu_memory_bytes=gpu.memory_gib * GIB,
        gpus=profile.gpus,
        weight_dtype=profile.weight_dtype,
        kv_dtype=profile.kv_dtype,
        memory_fraction=profile.memory_fraction,
        step_tokens=step_tokens,
        measured_kv_tokens=profile.measured_kv_tokens,
        fraction_of_free=profile.framework == "trtllm",
        tensor_parallel=profile.tensor_parallel,
        pipeline_parallel=profile.pipeline_parallel,
        framework=profile.framework,
        engine_version=profile.engine_version,
        max_num_seqs=profile.max_batch_size,
        max_model_len=profile.max_seq_len,
        chunked_prefill=profile.chunked_prefill,
        weights_gib_logged=profile.weights_gib_logged,
        gpu=gpu,
        gpus_per_node=profile.gpus_per_node,
    )
