"""Models as users have them (Hugging Face configs), GPUs as CUDA reports them, and the memory
model's parts: weights by module, KV geometry, parallelism, ranges, logged figures."""

from __future__ import annotations

import re

import pytest

from app.sizing.bundled import BUNDLED_CONFIGS, bundled_config
from app.sizing.catalog import GIB, GPUS, MODELS, model_for_hf_id
from app.sizing.gpus import ARCHES, REFERENCE_BY_ARCH, custom_gpu, gpu_named
from app.sizing.hfconfig import ConfigError, parse_hf_config, validate_config
from app.sizing.logparse import parse_log_facts, parse_startup_log
from app.sizing.memory import (
    LOG_HINT,
    engine_runtime,
    kv_bytes_per_token,
    layer_partition,
    memory_for_profile,
    replica_memory,
    weights_bytes,
)
from app.sizing.profile import EngineProfile

GB = 1e9
REQUIRED_GPUS = (
    "A10", "A10G", "A40", "L4", "L40", "L40S", "A100-40GB", "A100-80GB", "A100-PCIe-80GB",
    "H100-PCIe", "H100", "H100-NVL", "H200", "GH200", "B200", "B300", "RTX-3090", "RTX-4090",
    "RTX-5090", "RTX-PRO-6000", "MI300X",
)  # fmt: skip


def test_the_gpu_catalog_covers_what_teams_run_with_sources() -> None:
    for name in REQUIRED_GPUS:
        gpu = GPUS[name]
        assert gpu.arch in ARCHES and gpu.vendor in ("nvidia", "amd")
        assert gpu.bandwidth_gbs > 0 and gpu.bf16_tflops > 0 and gpu.source.startswith("https://")
        assert gpu.memory_source
        # CUDA reports a little under the marketed size
        assert 0.93 * gpu.memory_gb < gpu.memory_gib * GIB / GB < gpu.memory_gb * 1.074
        assert (gpu.fp8_tflops > 0) == gpu.fp8 and (gpu.fp4_tflops > 0) == gpu.fp4
        if gpu.vendor == "amd":
            assert gpu.reference_system is None and gpu.aic_system is None
        else:
            assert gpu.reference_system == (
                "rtx_pro_6000_server"
                if gpu.arch == "blackwell" and gpu.form in ("consumer", "workstation")
                else REFERENCE_BY_ARCH[gpu.arch]
            )
    # the names stored profiles use stay valid; "H100" is the SXM card
    for old in ("A10G", "L4", "L40S", "A100-40GB", "A100-80GB", "H100", "H200", "B200"):
        assert old in GPUS
    assert GPUS["H100"].form == "sxm" and GPUS["H100"].memory_gib == 79.19
    assert GPUS["RTX-4090"].memory_gib == 23.65  # not the 23.99 GiB Windows reports
    assert {g.aic_system for g in GPUS.values()} - {None} == {
        "a100_sxm", "l40s", "h100_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200",
        "rtx_pro_6000_server",
    }  # fmt: skip


def test_gpus_are_found_by_the_names_people_type_and_can_be_described() -> None:
    assert gpu_named("rtx 4090") is GPUS["RTX-4090"]
    assert gpu_named("h100-sxm") is GPUS["H100"] and gpu_named("l40s") is GPUS["L40S"]
    assert gpu_named("nope") is None
    own = custom_gpu(memory_gib=30.0, arch="ada", bandwidth_gbs=900, bf16_tflops=150)
    assert own.fp8 and not own.fp4 and own.reference_system == "l40s" and own.aic_system is None
    assert not custom_gpu(memory_gib=30.0, arch="ada", fp8_tflops=0).fp8
    with pytest.raises(ValueError, match="gpu_arch"):
        custom_gpu(memory_gib=30.0, arch="volta")


@pytest.mark.parametrize(
    ("hf_id", "billions", "active"),
    [
        ("meta-llama/Meta-Llama-3.1-8B", 8.03, 8.03),
        ("meta-llama/Meta-Llama-3.1-70B", 70.55, 70.55),
        ("mistralai/Mixtral-8x7B-v0.1", 46.70, 12.88),
        ("Qwen/Qwen3-30B-A3B", 30.53, 3.35),
        ("Qwen/Qwen3-235B-A22B", 235.09, 22.19),
        ("deepseek-ai/DeepSeek-V3", 671.03, 37.55),
        ("openai/gpt-oss-120b", 116.83, 5.75),
        ("nvidia/NVIDIA-Nemotron-3-Nano-30B-A3B-BF16", 31.58, 3.58),
        ("moonshotai/Kimi-K2-Instruct", 1026.41, 32.86),
    ],
)
def test_parameters_total_and_active_come_from_the_architecture(hf_id, billions, active) -> None:
    spec = parse_hf_config(bundled_config(hf_id) or {}, hf_id=hf_id)
    assert spec.params / 1e9 == pytest.approx(billions, abs=0.01)
    assert spec.active_params / 1e9 == pytest.approx(active, abs=0.01)


def test_every_bundled_config_parses() -> None:
    assert len(BUNDLED_CONFIGS) >= 80
    for hf_id in BUNDLED_CONFIGS:
        spec = parse_hf_config(bundled_config(hf_id) or {}, hf_id=hf_id)
        assert spec.params > 1e8 and kv_bytes_per_token(spec, "bf16") > 0


def test_mla_keeps_one_compressed_latent_per_token_and_layer() -> None:
    r1 = MODELS["deepseek-r1"]
    assert (r1.kv_lora_rank, r1.qk_rope_head_dim) == (512, 64)
    assert kv_bytes_per_token(r1, "bf16") == 61 * 576 * 2  # not 2 × 128 heads × 128
    # the latent is not split by tensor parallelism: each rank holds all of it
    mem = replica_memory(
        r1, gpu_memory_bytes=139.81 * GIB, gpus=8, weight_dtype="fp8", kv_dtype="bf16",
        memory_fraction=0.9, engine_version="0.19.0",
    )  # fmt: skip
    assert mem.ranks[0].kv_per_token == 61 * 576 * 2
    assert mem.ranks[0].weights / GIB == pytest.approx(671e9 / 8 / GIB, rel=0.08)


def test_sliding_and_state_layers() -> None:
    oss = MODELS["gpt-oss-20b"]
    assert (oss.sliding_layers, oss.sliding_window, oss.attention_layers) == (12, 128, 24)
    # vLLM reports hybrid sliding-window models as if every attention layer held every token
    assert kv_bytes_per_token(oss, "bf16") == 24 * 2 * 8 * 64 * 2
    qwen35 = MODELS["qwen3.5-27b"]
    assert (qwen35.state_layers, qwen35.attention_layers) == (48, 16)  # Gated DeltaNet layers
    assert kv_bytes_per_token(qwen35, "bf16") == 16 * 2 * 4 * 256 * 2
    nano = MODELS["nemotron-3-nano-30b"]
    assert (nano.state_layers, nano.attention_layers) == (23, 6)  # Mamba layers hold no KV
    assert nano.state_bytes_per_seq > 0 and any("Mamba" in u for u in nano.uncertain)
    mem = replica_memory(
        nano, gpu_memory_bytes=79.19 * GIB, gpus=1, weight_dtype="bf16", kv_dtype="bf16",
        memory_fraction=0.9, engine_version="0.19.0",
    )  # fmt: skip
    assert mem.hint == LOG_HINT and mem.kv_low_tokens < mem.kv_capacity_tokens


def test_multimodal_configs_nest_the_language_model() -> None:
    spec = parse_hf_config(bundled_config("Qwen/Qwen3-VL-8B-Instruct") or {})
    assert spec.layers == 36 and spec.vision_params > 0 and spec.hidden_size == 4096


def _int4_8b(config: dict) -> float:
    base = bundled_config("meta-llama/Meta-Llama-3.1-8B") or {}
    return weights_bytes(parse_hf_config({**base, "quantization_config": config}), "bf16")


def test_quantized_weights_keep_embeddings_and_head_16_bit_and_count_scales() -> None:
    bf16 = weights_bytes(MODELS["llama-3.1-8b"], "bf16")
    assert bf16 == pytest.approx(8.03e9 * 2, rel=0.001)
    awq = _int4_8b({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True})
    embed_head = 2 * 128256 * 4096 * 2
    linear = (8.03e9 - 2 * 128256 * 4096) * (0.5 + 2.5 / 128)
    assert awq == pytest.approx(embed_head + linear, rel=0.002)  # not params × 0.5
    assert awq / bf16 > 0.31  # 4-bit is far from a quarter of the 16-bit size
    gptq_sym = _int4_8b({"quant_method": "gptq", "bits": 4, "group_size": 128, "sym": True})
    assert gptq_sym == pytest.approx(awq, rel=0.001)  # GPTQ stores qzeros even when symmetric
    nvfp4 = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16}
    assert _int4_8b(nvfp4) > awq  # an FP8 scale per 16 weights
    runtime_fp8 = weights_bytes(MODELS["llama-3.1-8b"], "fp8")
    assert runtime_fp8 == pytest.approx(embed_head + (8.03e9 - 2 * 128256 * 4096), rel=0.002)


def test_modules_left_16_bit_follow_the_checkpoint() -> None:
    fp8 = MODELS["qwen3-235b-a22b-fp8"]  # block-wise FP8, the MoE gates left out
    layer = fp8.layer_weights[0]
    assert layer.quantized == {"attn", "experts"} and dict(layer.qbytes)["experts"] == 1.0
    oss = MODELS["gpt-oss-120b"]  # MXFP4 on the experts only
    assert oss.layer_weights[0].quantized == {"experts"}
    kimi = parse_hf_config(bundled_config("moonshotai/Kimi-K2.5") or {})  # int4 routed experts
    assert kimi.quant is not None and kimi.quant.weight_dtype == "int4"
    assert kimi.layer_weights[5].quantized == {"experts"}


def test_pasted_configs_are_checked_and_bounded() -> None:
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        validate_config({"hidden_size": 4096})
    with pytest.raises(ConfigError, match="JSON object"):
        validate_config([1, 2])
    with pytest.raises(ConfigError, match="at most"):
        validate_config({"hidden_size": 1, "num_hidden_layers": 1, "x": "y" * 300_000})
    assert validate_config('{"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4}')


def test_pipeline_stages_split_layers_weights_and_kv() -> None:
    assert layer_partition(32, 2) == [16, 16]
    assert layer_partition(61, 4) == [15, 15, 16, 15]  # vLLM: remainder before the last stage
    # llm-d-planner's vLLM 0.19.0 sweep, Llama-3.1-8B on H100 (accuracy_report.md, PP table):
    # the first stage's weights 7.51 GiB (PP=2) and 4.26 GiB (PP=4), its activation peak
    # 1.10 and 1.05 GiB (no sampler on the first stage), non-torch memory 0.07 GiB.
    for pp, weights, act in ((2, 7.51, 1.10), (4, 4.26, 1.05)):
        mem = replica_memory(
            MODELS["llama-3.1-8b"], gpu_memory_bytes=79.19 * GIB, gpus=pp, pipeline_parallel=pp,
            weight_dtype="bf16", kv_dtype="bf16", memory_fraction=0.95,
            engine_version="0.19.0", max_model_len=8192,
        )  # fmt: skip
        first = mem.ranks[0]
        assert first.weights / GIB == pytest.approx(weights, rel=0.05)
        assert first.activation / GIB == pytest.approx(act, rel=0.08)
        assert first.kv_per_token == 32 // pp * 2 * 8 * 128 * 2
        assert mem.kv_capacity_tokens == min(r.kv_tokens for r in mem.ranks)
    tp = replica_memory(
        MODELS["llama-3.1-8b"], gpu_memory_bytes=79.19 * GIB, gpus=2, weight_dtype="bf16",
        kv_dtype="bf16", memory_fraction=0.95, engine_version="0.19.0",
    )  # fmt: skip
    assert tp.ranks[0].kv_per_token == 32 * 2 * 4 * 128 * 2  # TP splits heads, not layers
    assert tp.ranks[0].non_torch / GIB == pytest.approx(2.1)  # NCCL + custom all-reduce


def test_unchunked_prefill_profiles_the_whole_context_in_vllm_v0() -> None:
    kw = {
        "gpu_memory_bytes": 23.58 * GIB, "gpus": 1, "weight_dtype": "bf16", "kv_dtype": "bf16",
        "memory_fraction": 0.9, "engine_version": "0.6.4", "max_model_len": 29000,
    }  # fmt: skip
    unchunked = replica_memory(MODELS["llama-3.1-8b"], chunked_prefill=False, **kw)
    chunked = replica_memory(MODELS["llama-3.1-8b"], chunked_prefill=True, **kw)
    assert unchunked.ranks[0].activation > 2.5 * GIB > chunked.ranks[0].activation
    v1 = replica_memory(MODELS["llama-3.1-8b"], **{**kw, "engine_version": "0.19.0"})
    assert v1.ranks[0].activation < 2.5 * GIB  # V1 always chunks


def test_moe_activation_grows_with_experts_per_token() -> None:
    kw = {
        "gpu_memory_bytes": 79.19 * GIB, "gpus": 1, "weight_dtype": "bf16", "kv_dtype": "bf16",
        "memory_fraction": 0.9, "engine_version": "0.19.0",
    }  # fmt: skip
    base = bundled_config("Qwen/Qwen3-30B-A3B") or {}
    more = parse_hf_config({**base, "num_experts_per_tok": 16})
    a = replica_memory(parse_hf_config(base), **kw).ranks[0].activation
    b = replica_memory(more, **kw).ranks[0].activation
    assert b > a


def test_engine_versions_pick_their_constants() -> None:
    assert engine_runtime("vllm", "0.6.4").name == "vllm-v0"
    assert engine_runtime("vllm", "0.8.5 V0").name == "vllm-v0"
    assert engine_runtime("vllm", "0.10.1.1").name == "vllm-v1.8"
    assert engine_runtime("vllm", "0.19.0").name == "vllm-v1"
    assert engine_runtime("vllm", "0.22.0").cuda_graph_gib > 0  # graphs reserved from 0.21
    assert engine_runtime("vllm", None).cuda_graph_gib > 0  # unknown: the newest, conservative
    assert engine_runtime("trtllm").fraction_of_free


def test_an_unknown_version_gives_a_range_that_leans_low() -> None:
    known = replica_memory(
        MODELS["llama-3.1-8b"], gpu_memory_bytes=79.19 * GIB, gpus=1, weight_dtype="bf16",
        kv_dtype="bf16", memory_fraction=0.9, engine_version="0.19.0", max_num_seqs=256,
    )  # fmt: skip
    unknown = replica_memory(
        MODELS["llama-3.1-8b"], gpu_memory_bytes=79.19 * GIB, gpus=1, weight_dtype="bf16",
        kv_dtype="bf16", memory_fraction=0.9, max_num_seqs=256,
    )  # fmt: skip
    assert known.hint is None and not known.uncertain
    assert unknown.hint == LOG_HINT and any("version" in u for u in unknown.uncertain)
    low, high = unknown.kv_range
    assert low < unknown.kv_capacity_tokens < high
    assert unknown.kv_capacity_tokens - low < high - unknown.kv_capacity_tokens  # leans low


def test_logged_weights_replace_the_count() -> None:
    kw = {
        "gpu_memory_bytes": 79.19 * GIB, "gpus": 1, "weight_dtype": "bf16", "kv_dtype": "bf16",
        "memory_fraction": 0.9, "engine_version": "0.19.0",
    }  # fmt: skip
    mem = replica_memory(MODELS["llama-3.1-8b"], weights_gib_logged=20.0, **kw)
    assert mem.weights == pytest.approx(20.0 * GIB)


def test_startup_logs_give_weights_memory_and_version() -> None:
    log = (
        "INFO 03-25 21:32:47 model_runner.py:1116] Loading model weights took 14.9888 GB\n"
        "INFO 03-25 21:32:48 worker.py:266] the current vLLM instance can use total_gpu_memory "
        "(22.07GiB) x gpu_memory_utilization (0.90) = 19.86GiB\n"
        "INFO 03-25 21:32:48 worker.py:266] model weights take 14.99GiB; non_torch_memory takes "
        "0.05GiB; PyTorch activation peak memory takes 0.22GiB; the rest of the memory reserved "
        "for KV Cache is 4.60GiB.\n"
        "INFO 03-25 21:32:48 executor_base.py:108] # CUDA blocks: 2356, # CPU blocks: 2048\n"
        "Loading weights took 8.80 seconds\n"
    )
    facts = parse_log_facts(log)
    assert (facts.weights_gib, facts.non_torch_gib, facts.activation_gib) == (14.99, 0.05, 0.22)
    assert (facts.kv_gib, facts.total_gpu_gib, facts.gpu_memory_utilization) == (4.6, 22.07, 0.9)
    assert facts.kv_tokens == 2356 * 16
    v1 = (
        "(EngineCore pid=243) INFO [v1/engine/core.py:105] Initializing a V1 LLM engine "
        "(v0.19.0) with config: model='x'\n"
        "(EngineCore pid=243) INFO [gpu_model_runner.py] Model loading took 15.0 GiB and 9.0 s\n"
        "(EngineCore pid=243) INFO [gpu_worker.py] Available KV cache memory: 58.11 GiB\n"
        "(EngineCore pid=243) INFO [kv_cache_utils.py:1319] GPU KV cache size: 476,016 tokens\n"
    )
    measured = parse_startup_log(v1)
    assert measured is not None and measured.kv_tokens == 476_016
    assert (measured.weights_gib, measured.engine_version) == (15.0, "0.19.0")
    assert parse_log_facts(v1).kv_gib == 58.11
    trt = (
        "[TensorRT-LLM][INFO] Loaded engine size: 875 MiB\n… Using 132608 tokens in paged KV cache"
    )
    facts = parse_log_facts(trt)
    assert facts.kv_tokens == 132_608 and facts.weights_gib == pytest.approx(875 / 1024)
    refused = "larger than the maximum number of tokens that can be stored in KV cache (81536)."
    assert parse_startup_log(refused).kv_tokens == 81_536


def test_profiles_name_models_by_their_hugging_face_id() -> None:
    by_id = EngineProfile(model="Qwen/Qwen3-8B", gpu="RTX 4090")
    assert (by_id.model, by_id.hf_model, by_id.gpu) == ("hf", "Qwen/Qwen3-8B", "RTX-4090")
    assert by_id.spec().layers == 36 and by_id.model_id == "Qwen/Qwen3-8B"
    alone = EngineProfile(hf_model="meta-llama/Llama-3.3-70B-Instruct", gpu="H100")
    assert alone.model == "hf" and alone.spec().layers == 80
    assert model_for_hf_id("meta-llama/Llama-3.3-70B-Instruct") is MODELS["llama-3.3-70b"]
    with pytest.raises(ValueError, match="paste its config.json"):
        EngineProfile(hf_model="someone/unknown-model", gpu="H100")
    pasted = EngineProfile(
        hf_model="someone/small",
        hf_config={"hidden_size": 1024, "num_hidden_layers": 8, "num_attention_heads": 8,
                   "vocab_size": 32000, "intermediate_size": 4096},
        gpu="L4", weights_gib_logged=0.4, engine_version="0.19.0",
    )  # fmt: skip
    assert pasted.spec().layers == 8 and pasted.spec().hf_id == "someone/small"
    mem = memory_for_profile(pasted, None)
    assert mem.weights == pytest.approx(0.4 * GIB) and mem.kv_capacity_tokens > 0
    with pytest.raises(ValueError, match="hf_config"):
        EngineProfile(hf_model="x/y", hf_config={"hidden_size": 4}, gpu="H100")
    # stored profiles keep validating as they were
    legacy = EngineProfile.model_validate({"model": "llama-3.1-8b", "gpu": "A10G"})
    assert legacy.spec() is MODELS["llama-3.1-8b"]
    custom = EngineProfile(
        model="custom", params=7e9, layers=32, kv_heads=8, head_dim=128, hidden_size=4096,
        gpu="L4",
    )  # fmt: skip
    assert custom.spec().params == 7e9


def test_profiles_describe_an_unlisted_gpu() -> None:
    p = EngineProfile(
        model="llama-3.1-8b", gpu="custom", gpu_memory_gib=47.5, gpu_arch="ada",
        gpu_bandwidth_gbs=960, gpu_bf16_tflops=180, gpu_label="RTX 6000 Ada",
    )  # fmt: skip
    g = p.gpu_spec()
    assert (g.name, g.memory_gib, g.fp8, g.reference_system) == ("RTX 6000 Ada", 47.5, True, "l40s")
    with pytest.raises(ValueError, match="a custom gpu needs gpu_memory_gib, gpu_arch"):
        EngineProfile(model="llama-3.1-8b", gpu="custom")
    with pytest.raises(ValueError, match="no FP8"):
        EngineProfile(
            model="llama-3.1-8b", gpu="custom", gpu_memory_gib=24, gpu_arch="ampere",
            weight_dtype="fp8",
        )  # fmt: skip
    with pytest.raises(ValueError, match="no FP8"):  # the real card's support, not a stand-in
        EngineProfile(model="llama-3.1-8b", gpu="RTX-3090", kv_dtype="fp8")


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"hidden_size": 4096, "num_hidden_layers": 1e9, "num_attention_heads": 32}, "1,024"),
        ({"hidden_size": float("inf"), "num_hidden_layers": 32, "num_attention_heads": 32}, "inf"),
        ({"hidden_size": float("nan"), "num_hidden_layers": 32, "num_attention_heads": 32}, "nan"),
        ({"hidden_size": 10**4000, "num_hidden_layers": 32, "num_attention_heads": 32}, "huge"),
        ({"hidden_size": -5, "num_hidden_layers": 32, "num_attention_heads": 32}, "positive"),
        ({"hidden_size": "big", "num_hidden_layers": 32, "num_attention_heads": 32}, "'big'"),
        ({"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
          "num_local_experts": 10**6}, "num_local_experts"),
    ],
)  # fmt: skip
def test_a_hostile_config_is_refused_before_it_costs_anything(config, says):
    """A 90-byte config.json must not make the server loop over a billion layers."""
    with pytest.raises(ConfigError, match=re.escape(says)):
        validate_config(config)
