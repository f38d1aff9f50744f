"""GPU memory of one engine replica (DESIGN §7): weights, overhead, KV cache budget and capacity.

Overhead model, per GPU (calibrated in docs/sizing.md against five published vLLM startup logs;
estimated KV capacity within 9% of the logged one in each):
- memory outside PyTorch's pool (CUDA/NCCL buffers): 0.25 GiB on one GPU, 0.5 GiB per GPU when
  a replica spans several GPUs (their ranks talk to each other);
- the activation peak of the largest forward pass the engine profiles, which scales with the
  tokens in one step (`max_num_tokens`, vLLM's max-num-batched-tokens) times the hidden size:
  40 bytes per token per hidden unit. Hidden states are replicated across tensor-parallel ranks,
  so this part does not shrink with TP.
CUDA graphs are captured after the KV cache is sized (vLLM), so they are not in the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.sizing.catalog import DTYPE_BYTES, GIB, ModelSpec

# Fitted in docs/sizing.md; see its calibration cases and tests/unit/app/sizing/test_sizing.py.
NON_TORCH_GIB_SINGLE = 0.25
NON_TORCH_GIB_PARALLEL = 0.5
ACTIVATION_BYTES_PER_TOKEN_HIDDEN = 40.0
DEFAULT_STEP_TOKENS = 8192  # vLLM's default max-num-batched-tokens for its profiling run


def kv_bytes_per_token(model: ModelSpec, kv_dtype: str) -> int:
    """2 (K and V) × layers × KV heads × head dim × bytes per element."""
    return int(2 * model.layers * model.kv_heads * model.head_dim * DTYPE_BYTES[kv_dtype])


def weights_bytes(model: ModelSpec, weight_dtype: str) -> float:
    """Parameters × bytes per parameter."""
    return model.params * DTYPE_BYTES[weight_dtype]


def overhead_bytes(model: ModelSpec, gpus: int, step_tokens: int) -> float:
    """The documented overhead model for a whole replica (all its GPUs)."""
    non_torch = (NON_TORCH_GIB_SINGLE if gpus == 1 else NON_TORCH_GIB_PARALLEL) * GIB
    activation = step_tokens * model.hidden_size * ACTIVATION_BYTES_PER_TOKEN_HIDDEN
    return gpus * (non_torch + activation)


@dataclass(frozen=True)
class Memory:
    """One replica's memory, in bytes; kv_capacity_tokens is 0 when nothing is left for KV."""

    gpus: int
    total: float
    usable: float
    weights: float
    overhead: float
    kv_budget: float
    kv_per_token: int
    kv_capacity_tokens: int
    measured: bool = False

    @property
    def fits(self) -> bool:
        """True when there is room for some KV cache (a logged capacity says so itself)."""
        return self.kv_capacity_tokens > 0 if self.measured else self.kv_budget > 0

    @property
    def unused(self) -> float:
        """Memory outside the engine's fraction (kept free by gpu_memory_utilization)."""
        return self.total - self.usable


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
) -> Memory:
    """kv_budget = gpu_mem × gpus × fraction − weights − overhead; capacity = budget / per-token.

    That is vLLM's `gpu_memory_utilization`. TensorRT-LLM's `free_gpu_memory_fraction` is a
    share of what is left after weights and activations: with `fraction_of_free` the budget is
    (gpu_mem × gpus − weights − overhead) × fraction. A measured KV capacity (from the engine's
    own log) replaces the estimate; `overhead` given explicitly replaces the overhead model (the
    worked example of DESIGN §7 uses 0)."""
    total = gpu_memory_bytes * gpus
    weights = weights_bytes(model, weight_dtype)
    if overhead is None:
        overhead = overhead_bytes(model, gpus, step_tokens or DEFAULT_STEP_TOKENS)
    per_token = kv_bytes_per_token(model, kv_dtype)
    if fraction_of_free:
        budget = (total - weights - overhead) * memory_fraction
        usable = weights + overhead + max(budget, 0)
    else:
        usable = total * memory_fraction
        budget = usable - weights - overhead
    if measured_kv_tokens is not None:
        return Memory(
            gpus, total, usable, weights, overhead, budget, per_token, measured_kv_tokens, True
        )
    capacity = math.floor(budget / per_token) if budget > 0 else 0
    return Memory(gpus, total, usable, weights, overhead, budget, per_token, capacity)
