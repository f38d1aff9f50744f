"""The contract with aiconfigurator-core (pinned exactly in pyproject.toml): a few fixed
predictions through the one adapter, so an upgrade that changes them fails loudly here.

When this fails after an upgrade: read the library's changelog, re-run
docs/sizing.md's published-figures check (tests/unit/app/services/test_perf_published.py),
and only then update these numbers and the pin together."""

from __future__ import annotations

import pytest

from app.services import modelconfigs, perfmodel
from app.services.perfmodel import GpuFigures, PerfModelError

# (framework, system, model, TP, weights, KV, (ISL, OSL, batch), prefill ms, ITL ms, version)
FIXED = [
    (
        "vllm",
        "h100_sxm",
        "meta-llama/Meta-Llama-3.1-8B",
        1,
        "bf16",
        "bf16",
        (1024, 256, 1),
        22.1093,
        6.1874,
        "0.24.0",
    ),  # noqa: E501
    (
        "vllm",
        "h100_sxm",
        "meta-llama/Meta-Llama-3.1-8B",
        1,
        "bf16",
        "bf16",
        (1024, 256, 32),
        22.1093,
        11.1596,
        "0.24.0",
    ),  # noqa: E501
    (
        "vllm",
        "h100_sxm",
        "meta-llama/Meta-Llama-3.1-8B",
        1,
        "bf16",
        "bf16",
        (4096, 512, 8),
        90.0659,
        9.3597,
        "0.24.0",
    ),  # noqa: E501
    (
        "trtllm",
        "h200_sxm",
        "meta-llama/Meta-Llama-3.1-70B",
        4,
        "fp8",
        "fp8",
        (2048, 256, 64),
        101.9255,
        33.3652,
        "1.3.0rc20",
    ),  # noqa: E501
    (
        "sglang",
        "l40s",
        "Qwen/Qwen3-8B",
        1,
        "bf16",
        "bf16",
        (512, 128, 16),
        44.4483,
        30.9755,
        "0.5.14",
    ),  # noqa: E501
    (
        "vllm",
        "a100_sxm",
        "mistralai/Mixtral-8x7B-Instruct-v0.1",
        2,
        "bf16",
        "bf16",
        (1024, 256, 16),
        94.9927,
        33.023,
        "0.14.0",
    ),  # noqa: E501
]


def test_the_pinned_version() -> None:
    assert perfmodel.library_version() == "0.12.0"


@pytest.mark.parametrize(
    ("framework", "system", "model", "tp", "wd", "kd", "point", "prefill", "itl", "version"), FIXED
)
def test_fixed_predictions(
    framework: str,
    system: str,
    model: str,
    tp: int,
    wd: str,
    kd: str,
    point: tuple[int, int, int],
    prefill: float,
    itl: float,
    version: str,
) -> None:
    path, _ = modelconfigs.resolve(model, None)
    target = perfmodel.target_for(framework, system, None, lambda: pytest.fail("no figures"))
    assert (target.mode, target.version) == ("silicon", version)
    step = perfmodel.step_model(path, target, tp, 1, wd, kd, 8192).step(*point)
    assert step.prefill_ms == pytest.approx(prefill, rel=1e-3)
    assert step.itl_ms == pytest.approx(itl, rel=1e-3)


L4 = GpuFigures("L4", int(22.05 * 2**30), 300e9, 121e12, 242.5e12, 0, 89, True)


def test_a_gpu_without_data_is_a_scaled_roofline_and_says_so() -> None:
    target = perfmodel.target_for("vllm", None, "l40s", lambda: L4)
    assert target.mode == "roofline" and "scaled by measured/roofline on l40s" in target.source
    path, _ = modelconfigs.resolve("meta-llama/Llama-3.1-8B-Instruct", None)
    l4 = perfmodel.step_model(path, target, 1, 1, "bf16", "bf16", 8192).step(1024, 256, 8)
    l40s_target = perfmodel.target_for("vllm", "l40s", None, lambda: L4)
    l40s = perfmodel.step_model(path, l40s_target, 1, 1, "bf16", "bf16", 8192).step(1024, 256, 8)
    # 300 GB/s against the L40S's 864 GB/s: decode, bound by memory, is ~2.9x slower.
    assert 2.3 < l4.itl_ms / l40s.itl_ms < 3.5
    assert l4.prefill_ms > l40s.prefill_ms


def test_nothing_is_downloaded_an_unknown_model_needs_its_config() -> None:
    with pytest.raises(PerfModelError, match="paste the model's Hugging Face config.json"):
        modelconfigs.resolve("someone/unknown-model", None)


def test_a_pasted_config_is_modelled() -> None:
    config = perfmodel.bundled_config("Qwen/Qwen3-8B")
    assert config is not None
    path, words = modelconfigs.resolve("my-org/my-finetune", config)
    assert "pasted" in words
    target = perfmodel.target_for("vllm", "h100_sxm", None, lambda: L4)
    pasted = perfmodel.step_model(path, target, 1, 1, "bf16", "bf16", 8192).step(512, 128, 4)
    bundled = perfmodel.step_model("Qwen/Qwen3-8B", target, 1, 1, "bf16", "bf16", 8192)
    assert pasted.itl_ms == pytest.approx(bundled.step(512, 128, 4).itl_ms)


def test_an_unknown_framework_is_named() -> None:
    with pytest.raises(PerfModelError, match="unknown framework 'tgi'"):
        perfmodel.target_for("tgi", "h100_sxm", None, lambda: L4)


@pytest.mark.parametrize("architectures", [[], [7], None])
def test_a_pasted_config_must_name_its_model_class(architectures) -> None:
    config = dict(perfmodel.bundled_config("Qwen/Qwen3-8B") or {})
    config["architectures"] = architectures
    with pytest.raises(PerfModelError, match="names no model class in 'architectures'"):
        perfmodel.model_path("my-org/x", config)


def test_a_lone_architecture_string_is_taken_as_a_list() -> None:
    config = dict(perfmodel.bundled_config("Qwen/Qwen3-8B") or {})
    config["architectures"] = "Qwen3ForCausalLM"
    assert perfmodel.model_path("my-org/x", config)


def test_library_messages_carry_no_install_paths() -> None:
    text = "data missing at /work/x/.venv/lib/python3.11/site-packages/aic/data/h100/a.parquet"
    assert "site-packages" not in perfmodel.library_words(ValueError(text))
