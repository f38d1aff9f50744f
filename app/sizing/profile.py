"""An engine profile (DESIGN §7): model, GPUs, dtypes and the bounds it was built with."""

from __future__ import annotations

from email.utils import getaddresses
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.sizing.catalog import GPUS, MODELS, GpuSpec, ModelSpec, dtype_supported

WeightDtype = Literal["bf16", "fp16", "fp8", "int8", "fp4", "int4"]
# What the engines' KV caches take: vLLM bf16/fp16/fp8; TensorRT-LLM adds int8.
KvDtype = Literal["bf16", "fp16", "fp8", "int8"]
HF_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$"


class EngineProfile(BaseModel):
    """What an engine is built with; stored as JSON in `engines.profile`."""

    # No infinite numbers: JSON (the stored form) has none, and no GPU costs infinity.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    model: str = Field(description="A catalog model (e.g. llama-3.1-8b) or 'custom'.")
    hf_model: str | None = Field(
        None,
        pattern=HF_ID,
        max_length=200,
        description="Model id for the commands (e.g. org/name); the catalog's by default.",
    )
    params: float | None = Field(None, gt=0, description="Custom model: parameter count.")
    layers: int | None = Field(None, gt=0, description="Custom model: transformer layers.")
    kv_heads: int | None = Field(None, gt=0, description="Custom model: key/value heads.")
    head_dim: int | None = Field(None, gt=0, description="Custom model: head dimension.")
    hidden_size: int | None = Field(None, gt=0, description="Custom model: hidden size.")
    max_position_embeddings: int | None = Field(None, gt=0, description="Custom model: context.")
    gpu: str = Field(description="A catalog GPU: " + ", ".join(GPUS))
    gpu_memory_gib: float | None = Field(None, gt=0, description="Override the GPU's memory.")
    tensor_parallel: int = Field(1, ge=1, le=64)
    pipeline_parallel: int = Field(1, ge=1, le=64)
    weight_dtype: WeightDtype = "bf16"
    kv_dtype: KvDtype = "bf16"
    memory_fraction: float = Field(
        0.9, gt=0, le=1, description="gpu_memory_utilization / free_gpu_memory_fraction."
    )
    framework: Literal["vllm", "trtllm", "nim"] = "vllm"
    max_input_len: int | None = Field(None, ge=1)
    max_seq_len: int | None = Field(None, ge=1)
    max_batch_size: int | None = Field(None, ge=1)
    max_num_tokens: int | None = Field(None, ge=1)
    measured_kv_tokens: int | None = Field(
        None, ge=0, description="KV capacity from the engine's own startup log; beats estimates."
    )
    measured_source: str | None = Field(None, description="Where measured_kv_tokens came from.")
    cost_per_gpu_hour: float | None = Field(None, ge=0)
    report_to: str | None = Field(
        None, max_length=2000, description="Extra recipients of the weekly email (comma list)."
    )
    measured_rps_per_replica: float | None = Field(
        None, gt=0, description="Measured requests/s one replica sustains; caps seasonal plans."
    )

    @model_validator(mode="after")
    def _known(self) -> EngineProfile:
        if self.gpu not in GPUS:
            raise ValueError(f"unknown gpu {self.gpu!r}: choose one of {', '.join(GPUS)}")
        if self.model == "custom":
            missing = [
                f
                for f in ("params", "layers", "kv_heads", "head_dim", "hidden_size")
                if getattr(self, f) is None
            ]
            if missing:
                raise ValueError(f"a custom model needs {', '.join(missing)}")
        elif self.model not in MODELS:
            raise ValueError(
                f"unknown model {self.model!r}: choose one of {', '.join(MODELS)} or 'custom'"
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
        """The model's architecture: the catalog's, or the custom fields."""
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
        """The GPU, with the memory override applied."""
        gpu = GPUS[self.gpu]
        if self.gpu_memory_gib:
            return GpuSpec(gpu.name, self.gpu_memory_gib, gpu.arch, gpu.fp8, gpu.fp4)
        return gpu

    @property
    def model_id(self) -> str:
        """The model id the commands serve."""
        return self.hf_model or self.spec().hf_id
