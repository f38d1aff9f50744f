"""An engine profile (DESIGN §7): model, GPUs, dtypes and the bounds it was built with.

A model is a catalog name, `custom` (the architecture fields by hand), or a Hugging Face model:
`model: "hf"` (or the Hugging Face id itself as `model`) with `hf_model`, its architecture from
`hf_config` (a pasted config.json) or, without one, from the configs this package knows
(`catalog.model_for_hf_id`). A GPU is a catalog name (aliases such as "RTX 4090" accepted) or
`custom`, described by `gpu_memory_gib`, `gpu_arch` and optionally bandwidth and FLOPS.
"""

from __future__ import annotations

import json
import re
from email.utils import getaddresses
from functools import lru_cache
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from app.sizing.catalog import GPUS, MODELS, GpuSpec, ModelSpec, dtype_supported, model_for_hf_id
from app.sizing.gpus import ARCHES, custom_gpu, gpu_named, with_memory
from app.sizing.hfconfig import ConfigError, parse_hf_config, validate_config

WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "fp4", "int4"]
# What the engines' KV caches take: vLLM bf16/fp16/fp8; TensorRT-LLM adds int8.
KvDtype = Literal["bf16", "fp16", "fp8", "int8"]
HF_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$"
_HF_ID_RE = re.compile(HF_ID)
GpuArch = Literal["ampere", "ada", "hopper", "blackwell", "cdna3"]
assert set(ARCHES) == set(get_args(GpuArch))
ENGINE_VERSION = r"^v?\d+\.\d+[0-9A-Za-z.+_ -]{0,38}$"

# Every number a profile holds is bounded to physical sense: far above the largest real value
# (no real engine is refused), low enough that no estimate built on it overflows a float or an
# int64 (a profile of 1e308 GiB once sank the pages of every engine). Refusals name the field
# and the bound ("gpu_memory_gib: Input should be less than or equal to 4096").
MAX_GPU_MEMORY_GIB = 4096  # 4 TiB per GPU: 15x the largest today (B300, 288 GB)
MAX_BANDWIDTH_GBS = 100_000  # 12x the fastest today (B200/GB200, 8,000 GB/s)
MAX_BF16_TFLOPS = 25_000  # 10x the fastest dense BF16 today (GB200, 2,500)
MAX_FP8_TFLOPS = 50_000  # 10x GB200's 5,000
MAX_FP4_TFLOPS = 150_000  # 10x B300's 13,500 (dense FP4)
MAX_PARAMS = 1e13  # 10T parameters: 10x the largest published model (Kimi K2, 1.03T)
MAX_LAYERS = 1024  # as config.json's bound (hfconfig.LIMITS); the deepest published: 126
MAX_HEADS = 4096  # as config.json's bound; the most KV heads published: 128 (DeepSeek-V3)
MAX_HEAD_DIM = 4096  # the widest published: 256 (Gemma, Qwen3.5), MLA's latent 576
MAX_HIDDEN = 262_144  # 2^18; the widest published: 18,432 (Nemotron-4 340B)
MAX_CONTEXT = 1 << 27  # 134M tokens: 12x the longest published context (Llama 4 Scout, 10M)
MAX_BATCH = 65_536  # requests one replica runs at once (engines default to 256-2,048)
MAX_KV_TOKENS = 10**12  # KV capacity of one replica from a log (the largest logged: ~10^7)
MAX_PARALLEL = 64  # tensor or pipeline parallel ways
MAX_GPUS_PER_NODE = 72  # an NVLink domain: GB200 NVL72, the largest today
MAX_GPUS_PER_REPLICA = 1024  # TP x PP: 128 nodes of 8 (the largest published deployments: ~320)
MAX_REPLICAS = 10_000
MAX_FLEET_GPUS = 1_000_000  # replicas x TP x PP: 5x the largest clusters today (~200k GPUs)
MIN_RPS_PER_REPLICA, MAX_RPS_PER_REPLICA = 1e-4, 1e6  # requests/s: one per ~3 hours .. a million


@lru_cache(maxsize=256)
def _parsed(config_json: str, hf_id: str) -> ModelSpec:
    return parse_hf_config(json.loads(config_json), name="hf", hf_id=hf_id)


class EngineProfile(BaseModel):
    """What an engine is built with; stored as JSON in `engines.profile`."""

    # No infinite numbers: JSON (the stored form) has none, and no GPU costs infinity.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(
        "hf",
        max_length=200,
        description="A catalog model (e.g. llama-3.1-8b), 'custom', or 'hf' (or a Hugging Face "
        "id): the architecture from hf_config or the known configs of hf_model.",
    )
    hf_model: str | None = Field(
        None,
        pattern=HF_ID,
        max_length=200,
        description="Model id for the commands (e.g. org/name); the catalog's by default.",
    )
    hf_config: dict[str, Any] | None = Field(
        None,
        description="The model's config.json (pasted; at most 256 KB): architecture, experts, "
        "attention layout and quantization_config.",
    )
    params: float | None = Field(
        None, gt=0, le=MAX_PARAMS, description="Custom model: parameter count."
    )
    layers: int | None = Field(
        None, gt=0, le=MAX_LAYERS, description="Custom model: transformer layers."
    )
    kv_heads: int | None = Field(
        None, gt=0, le=MAX_HEADS, description="Custom model: key/value heads."
    )
    head_dim: int | None = Field(
        None, gt=0, le=MAX_HEAD_DIM, description="Custom model: head dimension."
    )
    hidden_size: int | None = Field(
        None, gt=0, le=MAX_HIDDEN, description="Custom model: hidden size."
    )
    max_position_embeddings: int | None = Field(
        None, gt=0, le=MAX_CONTEXT, description="Custom model: context."
    )
    gpu: str = Field(description="A catalog GPU (" + ", ".join(GPUS) + ") or 'custom'.")
    gpu_memory_gib: float | None = Field(
        None,
        gt=0,
        le=MAX_GPU_MEMORY_GIB,
        description="Override the GPU's memory (CUDA total, GiB).",
    )
    gpu_arch: GpuArch | None = Field(None, description="Custom GPU: architecture.")
    gpu_bandwidth_gbs: float | None = Field(
        None, gt=0, le=MAX_BANDWIDTH_GBS, description="Custom GPU: memory GB/s."
    )
    gpu_bf16_tflops: float | None = Field(
        None, gt=0, le=MAX_BF16_TFLOPS, description="Custom GPU: dense BF16."
    )
    gpu_fp8_tflops: float | None = Field(
        None, ge=0, le=MAX_FP8_TFLOPS, description="Custom GPU: dense FP8."
    )
    gpu_fp4_tflops: float | None = Field(
        None, ge=0, le=MAX_FP4_TFLOPS, description="Custom GPU: dense FP4."
    )
    gpu_label: str | None = Field(None, max_length=80, description="Custom GPU: its name.")
    tensor_parallel: int = Field(1, ge=1, le=MAX_PARALLEL)
    pipeline_parallel: int = Field(1, ge=1, le=MAX_PARALLEL)
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: KvDtype = "bf16"
    memory_fraction: float = Field(
        0.9, gt=0, le=1, description="gpu_memory_utilization / free_gpu_memory_fraction."
    )
    framework: Literal["vllm", "trtllm", "nim", "sglang"] = "vllm"
    engine_version: str | None = Field(
        None,
        pattern=ENGINE_VERSION,
        description="The engine's version (e.g. 0.19.0; '0.8.5 V0' for VLLM_USE_V1=0); "
        "unknown versions widen the estimate's range.",
    )
    chunked_prefill: bool | None = Field(
        None, description="vLLM V0 only: chunked prefill (default: on from 32k context)."
    )
    gpus_per_node: int = Field(
        8, ge=1, le=MAX_GPUS_PER_NODE, description="GPUs per node (NVLink domain)."
    )
    weights_gib_logged: float | None = Field(
        None,
        gt=0,
        le=MAX_GPU_MEMORY_GIB,
        description="Weights per GPU from the engine's log (model weights take X GiB).",
    )
    max_input_len: int | None = Field(None, ge=1, le=MAX_CONTEXT)
    max_seq_len: int | None = Field(None, ge=1, le=MAX_CONTEXT)
    max_batch_size: int | None = Field(None, ge=1, le=MAX_BATCH)
    max_num_tokens: int | None = Field(None, ge=1, le=MAX_CONTEXT)
    measured_kv_tokens: int | None = Field(
        None,
        ge=0,
        le=MAX_KV_TOKENS,
        description="KV capacity from the engine's own startup log; beats estimates.",
    )
    measured_source: str | None = Field(
        None, max_length=400, description="Where measured_kv_tokens came from."
    )
    replicas: int | None = Field(
        None,
        ge=1,
        le=MAX_REPLICAS,
        description="Replicas running today (each of tensor_parallel × pipeline_parallel GPUs); "
        "plans and savings count from it. Unset: what the peak hour needs.",
    )
    slo_ttft_ms: float | None = Field(
        None, gt=0, le=3_600_000, description="Latency target: TTFT at slo_percentile, ms."
    )
    slo_itl_ms: float | None = Field(
        None,
        gt=0,
        le=60_000,
        description="Latency target: inter-token latency at the percentile.",
    )
    slo_e2e_ms: float | None = Field(
        None, gt=0, le=86_400_000, description="Latency target (optional): total time, ms."
    )
    slo_percentile: float | None = Field(
        None,
        ge=50,
        le=99.99,
        description="The percentile the targets hold at (e.g. 95); the fleet default if unset.",
    )
    cost_per_gpu_hour: float | None = Field(
        None, ge=0, le=10_000, description="What one GPU-hour costs; the fleet default if unset."
    )
    api_price_input_per_mtok: float | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="An API's price per million input tokens, for comparison.",
    )
    api_price_output_per_mtok: float | None = Field(
        None,
        ge=0,
        le=1_000_000,
        description="An API's price per million output tokens, for comparison.",
    )
    report_to: str | None = Field(
        None, max_length=2000, description="Extra recipients of the weekly email (comma list)."
    )
    measured_rps_per_replica: float | None = Field(
        None,
        ge=MIN_RPS_PER_REPLICA,
        le=MAX_RPS_PER_REPLICA,
        description="Measured requests/s one replica sustains; caps seasonal plans.",
    )

    @field_validator("hf_config", mode="before")
    @classmethod
    def _config(cls, value: Any) -> Any:
        if value is None or value == {}:
            return None
        try:
            return validate_config(value)
        except ConfigError as exc:
            raise ValueError(str(exc)) from None

    @model_validator(mode="after")
    def _known(self) -> EngineProfile:
        if self.gpu == "custom":
            missing = [f for f in ("gpu_memory_gib", "gpu_arch") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"a custom gpu needs {', '.join(missing)}")
        elif self.gpu not in GPUS:
            named = gpu_named(self.gpu)
            if named is None:
                raise ValueError(
                    f"unknown gpu {self.gpu!r}: choose one of {', '.join(GPUS)} or 'custom' "
                    "(with gpu_memory_gib and gpu_arch)"
                )
            self.gpu = named.name
        if self.model not in MODELS and self.model not in ("custom", "hf"):
            if "/" in self.model and _HF_ID_RE.match(self.model):
                self.hf_model = self.hf_model or self.model
                self.model = "hf"
        if self.model == "hf":
            if self.hf_config is None and not self.hf_model:
                raise ValueError("a Hugging Face model needs hf_model (org/name) or hf_config")
            if self.hf_config is None and model_for_hf_id(self.hf_model or "") is None:
                raise ValueError(
                    f"unknown architecture for {self.hf_model!r}: paste its config.json as "
                    "hf_config (or choose a catalog model)"
                )
        elif self.model == "custom":
            missing = [
                f
                for f in ("params", "layers", "kv_heads", "head_dim", "hidden_size")
                if getattr(self, f) is None
            ]
            if missing:
                raise ValueError(f"a custom model needs {', '.join(missing)}")
        elif self.model not in MODELS:
            raise ValueError(
                f"unknown model {self.model!r}: choose one of {', '.join(MODELS)}, 'custom', or "
                "'hf' with hf_model / hf_config"
            )
        if self.gpus > MAX_GPUS_PER_REPLICA:
            raise ValueError(
                f"tensor_parallel × pipeline_parallel is {self.gpus:,} GPUs per replica; at "
                f"most {MAX_GPUS_PER_REPLICA:,}"
            )
        if self.replicas and self.replicas * self.gpus > MAX_FLEET_GPUS:
            raise ValueError(
                f"replicas × tensor_parallel × pipeline_parallel is "
                f"{self.replicas * self.gpus:,} GPUs; at most {MAX_FLEET_GPUS:,}"
            )
        if self.max_input_len and self.max_seq_len and self.max_input_len >= self.max_seq_len:
            raise ValueError("max_input_len must be smaller than max_seq_len")
        context = self.spec().max_position_embeddings
        if self.max_seq_len and self.max_seq_len > context:
            raise ValueError(
                f"max_seq_len {self.max_seq_len:,} is beyond the model's context of {context:,}"
            )
        if self.report_to:
            for name, address in getaddresses([self.report_to]):
                if "@" not in address or any(c in address for c in " \r\n<>"):
                    raise ValueError(
                        f"report_to: {address or name!r} is not an email address (use "
                        "a@example.com, b@example.com)"
                    )
        for dtype in (self.weight_dtype, self.kv_dtype):
            reason = dtype_supported(self.gpu_spec(), dtype)
            if reason:
                raise ValueError(reason)
        return self

    @property
    def gpus(self) -> int:
        """GPUs per replica (TP × PP)."""
        return self.tensor_parallel * self.pipeline_parallel

    def spec(self) -> ModelSpec:
        """The model's architecture: the catalog's, the custom fields, or the Hugging Face
        config (pasted, else the one this package knows for hf_model)."""
        if self.model == "hf":
            hf_id = self.hf_model or ""
            if self.hf_config is not None:
                return _parsed(json.dumps(self.hf_config, sort_keys=True), hf_id)
            found = model_for_hf_id(hf_id)
            assert found is not None  # the validator checked it
            return found
        if self.model != "custom":
            return MODELS[self.model]
        return ModelSpec(
            "custom",
            self.hf_model or "custom",
            float(self.params or 0),
            int(self.layers or 0),
            int(self.kv_heads or 0),
            int(self.head_dim or 0),
            int(self.hidden_size or 0),
            int(self.max_position_embeddings or 131072),
        )

    def gpu_spec(self) -> GpuSpec:
        """The GPU, with the memory override applied; a custom GPU from its fields."""
        if self.gpu == "custom":
            return custom_gpu(
                memory_gib=float(self.gpu_memory_gib or 0),
                arch=str(self.gpu_arch),
                bandwidth_gbs=self.gpu_bandwidth_gbs or 0.0,
                bf16_tflops=self.gpu_bf16_tflops or 0.0,
                fp8_tflops=self.gpu_fp8_tflops,
                fp4_tflops=self.gpu_fp4_tflops,
                name=self.gpu_label or "custom",
            )
        gpu = GPUS[self.gpu]
        if self.gpu_memory_gib:
            return with_memory(gpu, self.gpu_memory_gib)
        return gpu

    @property
    def model_id(self) -> str:
        """The model id the commands serve."""
        return self.hf_model or self.spec().hf_id
