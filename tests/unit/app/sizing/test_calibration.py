"""The KV-capacity model against published engine startup logs (docs/sizing.md, "Calibration").

Each case is a real startup log: the model (its config.json), the GPU memory the engine
reported, the parallelism, the memory fraction, the engine and version, the step and context
the engine profiled, and the KV capacity it logged. The estimate comes from the architecture
alone (no logged weights). The bar is 10% on every case; cases the model cannot reach are
strict xfails that say why (so a change that fixes one shows up), and cases whose log shows
something outside the model are excluded, with the reason, but still computed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from app.sizing.catalog import GIB, GPUS, model_config
from app.sizing.gpus import GpuSpec, with_memory
from app.sizing.hfconfig import parse_hf_config
from app.sizing.memory import replica_memory
from app.sizing.modelspec import ModelSpec

# config.json fields of the models the catalog does not carry (from their Hugging Face pages).
_QWEN25_7B = model_config("Qwen/Qwen2.5-7B-Instruct")
assert _QWEN25_7B is not None
CONFIGS: dict[str, dict[str, Any]] = {
    "Qwen/Qwen1.5-MoE-A2.7B": {
        "model_type": "qwen2_moe",
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 24,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "vocab_size": 151936,
        "num_experts": 60,
        "num_experts_per_tok": 4,
        "moe_intermediate_size": 1408,
        "shared_expert_intermediate_size": 5632,
        "max_position_embeddings": 8192,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic": {
        **_QWEN25_7B,
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "format": "float-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {"num_bits": 8, "type": "float", "strategy": "channel"},
                }
            },
            "ignore": ["lm_head"],
        },
    },
    "ibm-granite/granite-3.1-8b-instruct": {
        "model_type": "granite",
        "hidden_size": 4096,
        "intermediate_size": 12800,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "vocab_size": 49155,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
    },
    "codellama/CodeLlama-7b-hf": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32016,
        "max_position_embeddings": 16384,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "kaitchup/Phi-4-AutoRound-GPTQ-4bit": {
        "model_type": "phi3",
        "hidden_size": 5120,
        "intermediate_size": 17920,
        "num_hidden_layers": 40,
        "num_attention_heads": 40,
        "num_key_value_heads": 10,
        "vocab_size": 100352,
        "max_position_embeddings": 16384,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        # AutoRound export in GPTQ format; group size not stated in the case (128 assumed)
        "quantization_config": {"quant_method": "gptq", "bits": 4, "group_size": None},
    },
    "Qwen/Qwen2-7B-Instruct": {**_QWEN25_7B},
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B": {
        "model_type": "qwen2",
        "hidden_size": 5120,
        "intermediate_size": 13824,
        "num_hidden_layers": 48,
        "num_attention_heads": 40,
        "num_key_value_heads": 8,
        "vocab_size": 152064,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
    },
    "nytopop/Qwen3-30B-A3B.w4a16": {
        **(model_config("Qwen/Qwen3-30B-A3B") or {}),
        # llm-compressor's W4A16 scheme: int4, groups of 128, symmetric; lm_head and the
        # MoE gates left 16-bit (the checkpoint's exact ignore list is not in the case)
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "config_groups": {
                "group_0": {
                    "targets": ["Linear"],
                    "weights": {
                        "num_bits": 4,
                        "type": "int",
                        "strategy": "group",
                        "group_size": 128,
                        "symmetric": True,
                    },
                }
            },
            "ignore": ["lm_head", "re:.*mlp.gate$"],
        },
    },
    "Qwen/Qwen2.5-Coder-0.5B-Instruct": {
        "model_type": "qwen2",
        "hidden_size": 896,
        "intermediate_size": 4864,
        "num_hidden_layers": 24,
        "num_attention_heads": 14,
        "num_key_value_heads": 2,
        "vocab_size": 151936,
        "max_position_embeddings": 32768,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
    },
    "meta-llama/Llama-2-7b-hf": {
        "model_type": "llama",
        "hidden_size": 4096,
        "intermediate_size": 11008,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "vocab_size": 32000,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "torch_dtype": "float16",
    },
}


def spec(hf_id: str) -> ModelSpec:
    config = CONFIGS.get(hf_id) or model_config(hf_id)
    assert config is not None, hf_id
    return parse_hf_config(config, name=hf_id, hf_id=hf_id)


def gpu(name: str, gib: float) -> GpuSpec:
    if name in GPUS:
        return with_memory(GPUS[name], gib)
    return GpuSpec(name, gib, "ampere", False, False, form="pcie")  # an uncatalogued card


@dataclass(frozen=True)
class Case:
    id: str
    model: str  # Hugging Face id
    gpu: str
    gib: float  # the total the engine reported (or the card's CUDA total)
    tp: int
    pp: int
    util: float
    framework: str
    version: str | None
    step: int | None  # max_num_batched_tokens / max_num_tokens when the log states it
    context: int | None  # max_model_len
    seqs: int | None  # max_num_seqs / max_batch_size when stated
    chunked: bool | None
    weight_dtype: str
    kv_dtype: str
    logged: int  # KV capacity in tokens, as logged


CALIBRATION = [
    # 1. Llama-3.1-8B bf16, H100, vLLM 0.19.0: "GPU KV cache size: 476,016 tokens"
    # https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/meta-llama-llama-3-1-8b--h100-80gb--tp1pp1dp1--16384.log
    Case(
        "llama31-8b-h100",
        "meta-llama/Llama-3.1-8B-Instruct",
        "H100",
        79.19,
        1,
        1,
        0.95,
        "vllm",
        "0.19.0",
        None,
        16384,
        None,
        None,
        "bf16",
        "bf16",
        476_016,
    ),
    # 2. Llama-3.3-70B FP8-dynamic (runtime --quantization fp8), 4x H100, vLLM 0.19.0
    # https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/fp8dyn-llama-3-3-70b--h100-80gb--tp4pp1dp1--8192.log
    Case(
        "llama33-70b-fp8-tp4",
        "meta-llama/Llama-3.3-70B-Instruct",
        "H100",
        79.19,
        4,
        1,
        0.95,
        "vllm",
        "0.19.0",
        None,
        8192,
        None,
        None,
        "fp8",
        "bf16",
        708_992,
    ),
    # 3. Meta-Llama-3-8B, H100, vLLM V0 (Dec 2024): available_kv_cache_memory 53.29GiB
    # https://github.com/vllm-project/vllm/pull/10511
    Case(
        "llama3-8b-h100-v0",
        "meta-llama/Meta-Llama-3-8B",
        "H100",
        79.22,
        1,
        1,
        0.90,
        "vllm",
        "0.6.5",
        None,
        8192,
        None,
        None,
        "bf16",
        "bf16",
        436_551,
    ),
    # 4. Llama-3.1-8B at 131,072 context, A10, vLLM V0 (Mar 2025): "# CUDA blocks: 2356"
    # https://github.com/oracle-samples/oci-data-science-ai-samples/blob/main/ai-quick-actions/troubleshooting-tips.md
    Case(
        "llama31-8b-a10-131k",
        "meta-llama/Llama-3.1-8B-Instruct",
        "A10",
        22.07,
        1,
        1,
        0.90,
        "vllm",
        "0.7.3",
        2048,
        131072,
        None,
        True,
        "bf16",
        "bf16",
        37_696,
    ),
    # 5. Qwen2.5-32B bf16, 2x L40S, vLLM 0.7.1, 10,000-token steps: "# CUDA blocks: 3947"
    # https://github.com/vllm-project/vllm/issues/15815
    Case(
        "qwen25-32b-2xl40s",
        "Qwen/Qwen2.5-32B-Instruct",
        "L40S",
        44.42,
        2,
        1,
        0.90,
        "vllm",
        "0.7.1",
        10000,
        10000,
        None,
        None,
        "bf16",
        "bf16",
        63_152,
    ),
    # 6. gpt-oss-20b (MXFP4 experts, sliding/full layers), 2x H100, vLLM 0.19.0
    # https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/openai-gpt-oss-20b--h100-80gb--tp2pp1dp1--8192.log
    Case(
        "gptoss-20b-h100-tp2",
        "openai/gpt-oss-20b",
        "H100",
        79.19,
        2,
        1,
        0.90,
        "vllm",
        "0.19.0",
        8192,
        8192,
        1024,
        True,
        "bf16",
        "bf16",
        2_591_776,
    ),
    # 7. Qwen1.5-MoE-A2.7B bf16 (60 experts + shared), H100, vLLM 0.19.0
    # https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/qwen-qwen1-5-moe-a2-7b--h100-80gb--tp1pp1dp1--8192.log
    Case(
        "qwen15-moe-h100",
        "Qwen/Qwen1.5-MoE-A2.7B",
        "H100",
        79.19,
        1,
        1,
        0.95,
        "vllm",
        "0.19.0",
        8192,
        8192,
        None,
        True,
        "bf16",
        "bf16",
        250_304,
    ),
    # 8. Qwen2.5-7B FP8 (compressed-tensors W8A8), H100, vLLM 0.19.0
    # https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/fp8dyn-redhatai-qwen2-5---h100-80gb--tp1pp1dp1--8192.log
    Case(
        "qwen25-7b-fp8-h100",
        "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic",
        "H100",
        79.19,
        1,
        1,
        0.95,
        "vllm",
        "0.19.0",
        8192,
        8192,
        1024,
        True,
        "bf16",
        "bf16",
        1_210_304,
    ),
    # 9. Granite-3.1-8B bf16 (small vocabulary), H100, vLLM 0.19.0
    # https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/granite-3-1-8b--h100-80gb--tp1pp1dp1--8192.log
    Case(
        "granite31-8b-h100",
        "ibm-granite/granite-3.1-8b-instruct",
        "H100",
        79.19,
        1,
        1,
        0.95,
        "vllm",
        "0.19.0",
        8192,
        8192,
        None,
        True,
        "bf16",
        "bf16",
        384_432,
    ),
    # 10. CodeLlama-7B bf16 (multi-head attention), H100, vLLM 0.19.0
    # https://github.com/llm-d-incubation/llm-d-planner/blob/d3121e059da88662db39a926a3ead964be97359b/accuracy/results/v0.19.0/logs/codellama-codellama-7b-h--h100-80gb--tp1pp1dp1--8192.log
    Case(
        "codellama-7b-h100",
        "codellama/CodeLlama-7b-hf",
        "H100",
        79.19,
        1,
        1,
        0.95,
        "vllm",
        "0.19.0",
        8192,
        8192,
        None,
        True,
        "bf16",
        "bf16",
        126_256,
    ),
    # 11. Phi-4 GPTQ int4, 80 GB card (79.25 GiB), vLLM V0 (Dec 2024), util 0.15: 715 blocks
    # https://github.com/xinyuwei-david/david-share/blob/08a013b6a1bf88e30bcb479aad69f4343720ca2a/Deep-Learning/Phi4/readme.md
    Case(
        "phi4-gptq-int4-v0",
        "kaitchup/Phi-4-AutoRound-GPTQ-4bit",
        "H100",
        79.25,
        1,
        1,
        0.15,
        "vllm",
        "0.6.5",
        None,
        2048,
        None,
        False,
        "bf16",
        "bf16",
        11_440,
    ),
    # 12. Qwen2-7B bf16, 2x A100 80GB PCIe (no P2P), vLLM 0.10.1.1, util 0.5
    # https://github.com/dennislee22/vLLM-benchmarking/blob/e514a58512f7c1ced8a2bffb191be171e7ad99b2/log/vllm-7B-2gpuA10080GB-0.5GRAM-same-node.log
    Case(
        "qwen2-7b-2xa100-pcie",
        "Qwen/Qwen2-7B-Instruct",
        "A100-PCIe-80GB",
        79.15,
        2,
        1,
        0.50,
        "vllm",
        "0.10.1.1",
        2048,
        16384,
        None,
        True,
        "bf16",
        "bf16",
        1_192_160,
    ),
    # 13. the same on 2x A100 40GB in two nodes (Ray), vLLM 0.10.1.1
    # https://github.com/dennislee22/vLLM-benchmarking/blob/89771826649777b1127b11adaf18514eb24ff099/log/vllm-7B-2gpuA10040GB-0.5GRAM-diff-nodes.log
    Case(
        "qwen2-7b-2xa100-40g-2nodes",
        "Qwen/Qwen2-7B-Instruct",
        "A100-40GB",
        39.39,
        2,
        1,
        0.50,
        "vllm",
        "0.10.1.1",
        2048,
        16384,
        None,
        True,
        "bf16",
        "bf16",
        412_944,
    ),
    # 14. Qwen2-7B bf16, 1x A100 80GB, vLLM 0.10.1.1, util 0.25 (a small budget)
    # https://github.com/dennislee22/vLLM-benchmarking/blob/391660db66f5a6e44ea8ed82decf48a88e55e992/log/vllm-7B-1gpuA10080GB-0.25GRAM.log
    Case(
        "qwen2-7b-a100-u025",
        "Qwen/Qwen2-7B-Instruct",
        "A100-PCIe-80GB",
        79.15,
        1,
        1,
        0.25,
        "vllm",
        "0.10.1.1",
        2048,
        16384,
        None,
        True,
        "bf16",
        "bf16",
        93_872,
    ),
    # 15. gpt-oss-120b (MXFP4 via Marlin), 4x A100 80GB in four nodes (Ray), vLLM 0.10.1.1
    # https://github.com/dennislee22/vLLM-benchmarking/blob/0787d88e1a6fc0e37a4eaf3d3e691b36eda25352/log/vllm-120B-4gpuA10080GB-0.8GRAM-diff-nodes.log
    Case(
        "gptoss-120b-4xa100-4nodes",
        "openai/gpt-oss-120b",
        "A100-PCIe-80GB",
        79.15,
        4,
        1,
        0.80,
        "vllm",
        "0.10.1.1",
        2048,
        16384,
        None,
        True,
        "bf16",
        "bf16",
        2_640_144,
    ),
    # 16. Llama-3.1-8B, RTX 3090 (23.58 GiB), vLLM 0.6.4, 20,000-token unchunked prefill
    # https://github.com/vllm-project/vllm/issues/10517
    Case(
        "llama31-8b-3090-20k",
        "meta-llama/Llama-3.1-8B-Instruct",
        "RTX-3090",
        23.58,
        1,
        1,
        0.90,
        "vllm",
        "0.6.4",
        None,
        20000,
        None,
        False,
        "bf16",
        "bf16",
        31_232,
    ),
    # 17. the same at 29,000 tokens (a longer unchunked profiling step)
    # https://github.com/vllm-project/vllm/issues/10517
    Case(
        "llama31-8b-3090-29k",
        "meta-llama/Llama-3.1-8B-Instruct",
        "RTX-3090",
        23.58,
        1,
        1,
        0.90,
        "vllm",
        "0.6.4",
        None,
        29000,
        None,
        False,
        "bf16",
        "bf16",
        23_648,
    ),
    # 18. DeepSeek-R1-Distill-Qwen-14B bf16, 2x RTX 4090, vLLM V0 (Feb 2025), util 0.98
    # https://github.com/vllm-project/vllm/issues/13061
    Case(
        "r1-distill-14b-2x4090",
        "deepseek-ai/DeepSeek-R1-Distill-Qwen-14B",
        "RTX-4090",
        23.65,
        2,
        1,
        0.98,
        "vllm",
        "0.7.2",
        None,
        131072,
        None,
        None,
        "bf16",
        "bf16",
        81_536,
    ),
    # 19. Qwen3-30B-A3B W4A16 (int4 MoE), RTX 3090, vLLM 0.8.5 with VLLM_USE_V1=0,
    # max_num_seqs 8: "the rest of the memory reserved for KV Cache is 5.34GiB" (the block
    # count is cut off in the source: 5.34 GiB / 98,304 B per token, in 16-token blocks)
    # https://github.com/vllm-project/vllm/issues/17327
    Case(
        "qwen3-30b-w4a16-3090",
        "nytopop/Qwen3-30B-A3B.w4a16",
        "RTX-3090",
        23.56,
        1,
        1,
        0.90,
        "vllm",
        "0.8.5 V0",
        None,
        40960,
        8,
        None,
        "bf16",
        "bf16",
        58_320,
    ),
    # 20. TensorRT-LLM, Llama-2-7B-shaped SmoothQuant int8, A100 80GB, max_batch_size 1:
    # "Using 132608 tokens in paged KV cache"
    # https://github.com/NVIDIA/TensorRT-LLM/issues/1400
    Case(
        "trt-7b-int8-a100",
        "meta-llama/Llama-2-7b-hf",
        "A100-80GB",
        79.15,
        1,
        1,
        0.90,
        "trtllm",
        "0.8",
        4096,
        5120,
        1,
        None,
        "int8",
        "fp16",
        132_608,
    ),
    # 21. TensorRT-LLM, Qwen2.5-Coder-0.5B int8, RTX A4000 (16 GB), build limits not stated:
    # "Allocated 4.53 GiB for max tokens in paged KV cache (395776)"
    # https://github.com/NVIDIA/TensorRT-LLM/issues/1188
    Case(
        "trt-qwen-05b-a4000",
        "Qwen/Qwen2.5-Coder-0.5B-Instruct",
        "RTX-A4000",
        15.72,
        1,
        1,
        0.90,
        "trtllm",
        None,
        None,
        None,
        None,
        None,
        "int8",
        "fp16",
        395_776,
    ),
    # 22. TensorRT-LLM (Oct 2023), Llama-2-7B fp16, A10, max_batch_size 25, fraction 0.95:
    # "Using 10718 tokens in paged KV cache"
    # https://github.com/NVIDIA/TensorRT-LLM/issues/224
    Case(
        "trt-llama2-7b-a10",
        "meta-llama/Llama-2-7b-hf",
        "A10",
        22.07,
        1,
        1,
        0.95,
        "trtllm",
        "0.5",
        None,
        None,
        25,
        None,
        "fp16",
        "fp16",
        10_718,
    ),
    # 23. Qwen3-235B-A22B FP8, 4x H100, vLLM ~0.9 (not stated), LMCache KV connector:
    # "GPU KV cache size: 178,880 tokens"
    # https://github.com/vllm-project/vllm/issues/21348
    Case(
        "qwen3-235b-fp8-tp4-lmcache",
        "Qwen/Qwen3-235B-A22B-FP8",
        "H100",
        79.19,
        4,
        1,
        0.90,
        "vllm",
        None,
        None,
        40960,
        None,
        None,
        "bf16",
        "bf16",
        178_880,
    ),
]

# Cases the model does not bring within 10%, and why (strict: a fix shows up as XPASS).
KNOWN_MISSES = {
    "llama31-8b-a10-131k": "the log's activation peak is 0.22 GiB where every other vLLM V0 log "
    "shows the profiling sampler's ~1 GiB for a 128k vocabulary; its max_num_seqs is not in "
    "the log (the estimate's range, up to a small max_num_seqs, reaches 35,440)",
    "trt-qwen-05b-a4000": "TensorRT-LLM's runtime and decoder buffers (8.6 GiB here) follow the "
    "engine's build limits, which the log does not state",
    "trt-llama2-7b-a10": "TensorRT-LLM 0.5's buffers for its build limits (max_input_len, "
    "max_num_tokens) are not in the issue",
}
# Cases whose log shows something outside the model.
EXCLUDED = {
    "qwen3-235b-fp8-tp4-lmcache": "an LMCache KV connector (kv_both) shares the GPU, and the "
    "vLLM version is not given",
}
# Not in the table: vLLM issue 34076 (PP=2 over an RTX 5070 Ti and an RTX 5090 D with a custom
# layer partition): two different GPUs in one replica are outside a profile's model.


def estimate(case: Case) -> tuple[int, float]:
    mem = replica_memory(
        spec(case.model),
        gpu_memory_bytes=case.gib * GIB,
        gpus=case.tp * case.pp,
        tensor_parallel=case.tp,
        pipeline_parallel=case.pp,
        weight_dtype=case.weight_dtype,
        kv_dtype=case.kv_dtype,
        memory_fraction=case.util,
        step_tokens=case.step,
        framework=case.framework,
        engine_version=case.version,
        max_num_seqs=case.seqs,
        max_model_len=case.context,
        chunked_prefill=case.chunked,
        gpu=gpu(case.gpu, case.gib),
        gpus_per_node=1 if "nodes" in case.id else 8,
    )
    return mem.kv_capacity_tokens, mem.kv_capacity_tokens / case.logged - 1


def _param(case: Case) -> Any:
    if case.id in KNOWN_MISSES:
        return pytest.param(
            case, id=case.id, marks=pytest.mark.xfail(reason=KNOWN_MISSES[case.id], strict=True)
        )
    return pytest.param(case, id=case.id)


@pytest.mark.parametrize("case", [_param(c) for c in CALIBRATION if c.id not in EXCLUDED])
def test_kv_capacity_within_ten_percent_of_the_logged_one(case: Case) -> None:
    _, error = estimate(case)
    assert abs(error) < 0.10, f"{case.id}: {error:+.1%}"


def test_the_calibration_spreads_over_what_users_run() -> None:
    counted = [c for c in CALIBRATION if c.id not in EXCLUDED]
    assert len(counted) >= 17
    models = {c.model: spec(c.model) for c in counted}
    assert any(m.quant and m.quant.weight_dtype == "fp8" for m in models.values())
    assert any(m.quant and m.quant.weight_dtype == "int4" for m in models.values())
    assert any(m.moe for m in models.values())
    assert any(c.tp > 1 for c in counted) and any(c.weight_dtype == "fp8" for c in counted)
    assert any(GPUS.get(c.gpu) and GPUS[c.gpu].form == "consumer" for c in counted)
    assert any(c.chunked is False and (c.context or 0) >= 16384 for c in counted)


def test_the_goal_of_five_percent_holds_on_the_cases_within_the_bar() -> None:
    within = [
        abs(estimate(c)[1])
        for c in CALIBRATION
        if c.id not in EXCLUDED and c.id not in KNOWN_MISSES
    ]
    assert sum(within) / len(within) < 0.05
    assert sum(e < 0.05 for e in within) >= len(within) - 3


@pytest.mark.parametrize("case_id", sorted(EXCLUDED))
def test_excluded_cases_are_still_computed(case_id: str) -> None:
    case = next(c for c in CALIBRATION if c.id == case_id)
    tokens, _ = estimate(case)
    assert tokens > 0
