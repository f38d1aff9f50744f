"""Every number an engine profile holds is bounded to physical sense (issue 22): far above any
real engine, low enough that nothing built on it overflows; each refusal names the field."""

from __future__ import annotations

import math
from typing import get_args

import pytest
from annotated_types import Le
from pydantic import ValidationError

from app.services.demo import DEMO_PROFILES
from app.services.profiles import problem
from app.sizing.catalog import GPUS, MODELS
from app.sizing.profile import EngineProfile

BASE = {"model": "llama-3.1-8b", "gpu": "H100"}
CUSTOM_MODEL = {
    "model": "custom",
    "gpu": "H100",
    "params": 8e9,
    "layers": 32,
    "kv_heads": 8,
    "head_dim": 128,
    "hidden_size": 4096,
}
CUSTOM_GPU = {**BASE, "gpu": "custom", "gpu_memory_gib": 80, "gpu_arch": "hopper"}
# Each numeric field, a profile it belongs in, and a value just past its bound.
BEYOND = {
    "params": (CUSTOM_MODEL, 1.1e13),
    "layers": (CUSTOM_MODEL, 1025),
    "kv_heads": (CUSTOM_MODEL, 4097),
    "head_dim": (CUSTOM_MODEL, 4097),
    "hidden_size": (CUSTOM_MODEL, 262_145),
    "max_position_embeddings": (CUSTOM_MODEL, (1 << 27) + 1),
    "gpu_memory_gib": (BASE, 4097),
    "gpu_bandwidth_gbs": (CUSTOM_GPU, 100_001),
    "gpu_bf16_tflops": (CUSTOM_GPU, 25_001),
    "gpu_fp8_tflops": (CUSTOM_GPU, 50_001),
    "gpu_fp4_tflops": (CUSTOM_GPU, 150_001),
    "tensor_parallel": (BASE, 65),
    "pipeline_parallel": (BASE, 65),
    "memory_fraction": (BASE, 1.01),
    "gpus_per_node": (BASE, 73),
    "weights_gib_logged": (BASE, 4097),
    "max_input_len": (BASE, (1 << 27) + 1),
    "max_seq_len": (BASE, (1 << 27) + 1),
    "max_batch_size": (BASE, 65_537),
    "max_num_tokens": (BASE, (1 << 27) + 1),
    "measured_kv_tokens": (BASE, 10**12 + 1),
    "replicas": (BASE, 10_001),
    "slo_ttft_ms": (BASE, 3_600_001),
    "slo_itl_ms": (BASE, 60_001),
    "slo_e2e_ms": (BASE, 86_400_001),
    "slo_percentile": (BASE, 99.999),
    "cost_per_gpu_hour": (BASE, 10_001),
    "api_price_input_per_mtok": (BASE, 1_000_001),
    "api_price_output_per_mtok": (BASE, 1_000_001),
    "measured_rps_per_replica": (BASE, 1e6 + 1),
}


def _refusal(data: dict) -> str:
    with pytest.raises(ValidationError) as caught:
        EngineProfile.model_validate(data)
    return problem(caught.value)


def _numeric(name: str) -> bool:
    annotation = EngineProfile.model_fields[name].annotation
    kinds = get_args(annotation) or (annotation,)
    return any(k in (int, float) for k in kinds)


def test_every_numeric_field_has_an_upper_bound_and_a_case_here():
    numeric = {n for n in EngineProfile.model_fields if _numeric(n)}
    assert numeric == set(BEYOND), "a new numeric field needs a bound and a case in BEYOND"
    for name in numeric:
        metadata = EngineProfile.model_fields[name].metadata
        assert any(isinstance(m, Le) for m in metadata), f"{name} has no upper bound"


@pytest.mark.parametrize("name", sorted(BEYOND))
def test_a_value_past_the_bound_is_refused_naming_the_field(name):
    base, value = BEYOND[name]
    message = _refusal(base | {name: value})
    assert message.startswith(f"{name}: "), message
    assert "less than or equal to" in message or "greater than or equal" in message


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 1e308])
@pytest.mark.parametrize("name", ["gpu_memory_gib", "cost_per_gpu_hour", "slo_ttft_ms"])
def test_nan_infinity_and_huge_floats_are_refused(name, value):
    assert _refusal(BASE | {name: value}).startswith(f"{name}: ")


def test_gpus_per_replica_and_in_the_fleet_are_bounded():
    wide = _refusal(BASE | {"tensor_parallel": 64, "pipeline_parallel": 32})
    assert "tensor_parallel × pipeline_parallel is 2,048 GPUs" in wide and "1,024" in wide
    fleet = _refusal(BASE | {"tensor_parallel": 8, "pipeline_parallel": 16, "replicas": 10_000})
    assert "replicas × tensor_parallel × pipeline_parallel is 1,280,000 GPUs" in fleet
    assert EngineProfile.model_validate(BASE | {"tensor_parallel": 8, "replicas": 10_000}).gpus == 8


def test_a_tiny_measured_rate_is_refused():
    # 1e-300 requests/s per replica once planned 8e29 replicas.
    assert _refusal(BASE | {"measured_rps_per_replica": 1e-300}).startswith(
        "measured_rps_per_replica: "
    )


def test_no_real_engine_is_refused():
    """The catalog's models and GPUs, their largest published figures, and the demo fleet."""
    for profile in DEMO_PROFILES.values():
        EngineProfile.model_validate(profile)
    for name, spec in MODELS.items():
        EngineProfile.model_validate({"model": name, "gpu": "B300"})
        EngineProfile.model_validate(
            {
                **CUSTOM_MODEL,
                "params": spec.params,
                "layers": spec.layers,
                "kv_heads": spec.kv_heads,
                "head_dim": spec.head_dim,
                "hidden_size": max(spec.hidden_size, 1),
                "max_position_embeddings": spec.max_position_embeddings,
            }
        )
    for gpu in GPUS.values():
        EngineProfile.model_validate(
            CUSTOM_GPU
            | {
                "gpu_memory_gib": gpu.memory_gib,
                "gpu_arch": gpu.arch,
                "gpu_bandwidth_gbs": gpu.bandwidth_gbs or None,
                "gpu_bf16_tflops": gpu.bf16_tflops or None,
                "gpu_fp8_tflops": gpu.fp8_tflops,
                "gpu_fp4_tflops": gpu.fp4_tflops,
            }
        )
    # A GB200 NVL72 rack as one replica of 8-way TP x 9-way PP, 1,000 of them.
    EngineProfile.model_validate(
        {**BASE, "gpu": "GB200", "gpus_per_node": 72, "tensor_parallel": 8}
        | {"pipeline_parallel": 9, "replicas": 1000}
    )
