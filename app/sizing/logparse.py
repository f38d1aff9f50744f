"""What an engine's own startup log says about its memory (vLLM or TensorRT-LLM).

`parse_startup_log` gives the KV capacity in tokens (the figure that beats any estimate), with
the per-GPU weights the same log states; `parse_log_facts` gives every memory figure it finds
(weights, non-torch memory, activation peak, KV memory, the GPU's total, the utilisation, the
engine version), for a profile's `weights_gib_logged` and `engine_version` and for the page.

vLLM prints "GB" in some lines where it means GiB (it divides by 2^30); both are read as GiB.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """KV capacity read from a log, and the line it came from (and what else the log said)."""

    kv_tokens: int
    framework: str
    line: str
    weights_gib: float | None = None  # per GPU
    engine_version: str | None = None


@dataclass(frozen=True)
class LogFacts:
    """Memory figures a startup log states (per GPU rank; the smallest rank's for KV)."""

    kv_tokens: int | None = None
    kv_gib: float | None = None
    weights_gib: float | None = None
    non_torch_gib: float | None = None
    activation_gib: float | None = None
    cuda_graph_gib: float | None = None
    total_gpu_gib: float | None = None
    gpu_memory_utilization: float | None = None
    engine_version: str | None = None
    framework: str | None = None
    block_size: int | None = None
    line: str | None = None  # the KV capacity line


def _int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


_NUM = r"([\d,]*\.?\d+)"
_GIB = r"\s*(GiB|GB|MiB|MB)"
_VLLM_TOKENS = re.compile(r"GPU KV cache size:\s*([\d,_]+)\s*tokens", re.I)
_VLLM_BLOCKS = re.compile(r"#\s*(?:GPU|cuda) blocks:\s*([\d,_]+)", re.I)
_VLLM_MAX_TOKENS = re.compile(
    r"maximum number of tokens that can be stored in KV cache\s*\(([\d,_]+)\)", re.I
)
_VLLM_BLOCK_SIZE = re.compile(r"block[_ ]size[=:\s]+(\d+)", re.I)
_TRT_TOKENS = re.compile(r"max tokens in paged KV cache\s*(?:\(|:)\s*([\d,_]+)", re.I)
_TRT_USING = re.compile(r"Using\s+([\d,_]+)\s+tokens in paged KV cache", re.I)
_TRT_BLOCKS = re.compile(r"Number of blocks in KV cache primary pool:\s*([\d,_]+)", re.I)
_TRT_PER_BLOCK = re.compile(r"Number of tokens per block:\s*(\d+)", re.I)
VLLM_DEFAULT_BLOCK = 16

_WEIGHTS = (
    re.compile(r"model weights take\s*" + _NUM + _GIB, re.I),
    re.compile(r"weights memory:\s*" + _NUM + _GIB, re.I),
    re.compile(r"Loading (?:model )?weights took\s*" + _NUM + _GIB, re.I),
    re.compile(r"Model loading took\s*" + _NUM + _GIB, re.I),
    re.compile(r"Loaded engine size:\s*" + _NUM + _GIB, re.I),
)
_KV_GIB = (
    re.compile(r"Available KV cache memory:\s*" + _NUM + _GIB, re.I),
    re.compile(r"reserved for KV Cache is\s*" + _NUM + _GIB, re.I),
    re.compile(r"kv_cache_size=\s*" + _NUM + _GIB, re.I),
    re.compile(r"available_kv_cache_memory\s*" + _NUM + _GIB, re.I),
    re.compile(r"Allocated\s*" + _NUM + _GIB + r"\s*for max tokens in paged KV cache", re.I),
)
_NON_TORCH = (
    re.compile(r"non_torch_memory(?:\s+takes|=|\s)\s*" + _NUM + _GIB, re.I),
    re.compile(r"non-torch forward increase memory:\s*" + _NUM + _GIB, re.I),
)
_ACTIVATION = (
    re.compile(r"activation peak memory(?:\s+takes)?\s*" + _NUM + _GIB, re.I),
    re.compile(r"torch peak memory increase:\s*" + _NUM + _GIB, re.I),
    re.compile(_NUM + r"\s*GiB for peak activation", re.I),
)
_GRAPHS = (
    re.compile(r"Estimated CUDA graph memory:\s*" + _NUM + _GIB, re.I),
    re.compile(_NUM + r"\s*GiB for CUDAGraph memory", re.I),
)
_TOTAL = (
    re.compile(r"total_gpu_memory\s*[(=]\s*" + _NUM + _GIB, re.I),
    re.compile(r"total_memory=\s*" + _NUM + _GIB, re.I),
    re.compile(r"Free memory on device[^(]*\(\s*[\d.]+\s*/\s*" + _NUM + _GIB, re.I),
    re.compile(r"total_gpu_memory\s+" + _NUM + _GIB, re.I),
)
_UTIL = (
    re.compile(r"gpu_memory_utilization\s*[(=]\s*([01]?\.\d+)", re.I),
    re.compile(r"Requested memory:\s*([01]?\.\d+)\s*\(util\)", re.I),
    re.compile(r"'gpu_memory_utilization':\s*([01]?\.\d+)", re.I),
    re.compile(r"gpu-memory-utilization[= ]+([01]?\.\d+)", re.I),
    re.compile(r"Desired GPU memory utilization is \(([01]?\.\d+)", re.I),
)
_VERSION = (
    re.compile(r"Initializing an? (V[01]) LLM engine \(v?(\d+\.\d+[\w.+-]*)\)", re.I),
    re.compile(r"vLLM API server version\s+v?(\d+\.\d+[\w.+-]*)", re.I),
    re.compile(r"version\s+v?(\d+\.\d+\.\d+[\w.+-]*)\s*$", re.I),
    re.compile(r"TensorRT-LLM version:\s*v?(\d+\.\d+[\w.+-]*)", re.I),
)


def _gib(value: str, unit: str) -> float:
    number = float(value.replace(",", ""))
    return number / 1024 if unit.upper().startswith("M") else number


def _first(patterns: tuple[re.Pattern[str], ...], line: str) -> float | None:
    for pattern in patterns:
        if m := pattern.search(line):
            return _gib(m.group(1), m.group(2) if pattern.groups >= 2 else "GiB")
    return None


def _kv_lines(text: str) -> list[Measured]:
    found: list[Measured] = []
    for line in text.splitlines():
        if m := _VLLM_TOKENS.search(line):
            found.append(Measured(_int(m.group(1)), "vllm", line.strip()))
        elif m := _TRT_TOKENS.search(line) or _TRT_USING.search(line):
            found.append(Measured(_int(m.group(1)), "trtllm", line.strip()))
    if found:
        return found
    size = _VLLM_BLOCK_SIZE.search(text)
    per = int(size.group(1)) if size else VLLM_DEFAULT_BLOCK
    for line in text.splitlines():
        if m := _VLLM_BLOCKS.search(line):
            found.append(Measured(_int(m.group(1)) * per, "vllm", line.strip()))
    if found:
        return found
    trt_blocks, trt_per = _TRT_BLOCKS.search(text), _TRT_PER_BLOCK.search(text)
    if trt_blocks and trt_per:
        line = next(ln for ln in text.splitlines() if _TRT_BLOCKS.search(ln)).strip()
        blocks = _int(trt_blocks.group(1)) * int(trt_per.group(1))
        return [Measured(blocks, "trtllm", line)]
    for line in text.splitlines():
        if m := _VLLM_MAX_TOKENS.search(line):
            found.append(Measured(_int(m.group(1)), "vllm", line.strip()))
    return found


def parse_log_facts(text: str) -> LogFacts:
    """Every memory figure a pasted startup log states (None where it states none). With
    several ranks, the smallest KV capacity and the largest weights are the engine's."""
    weights: list[float] = []
    kv: list[float] = []
    non_torch: list[float] = []
    act: list[float] = []
    graphs: list[float] = []
    total = util = None
    version = None
    for line in text.splitlines():
        if (w := _first(_WEIGHTS, line)) is not None:
            weights.append(w)
        if (k := _first(_KV_GIB, line)) is not None:
            kv.append(k)
        if (n := _first(_NON_TORCH, line)) is not None:
            non_torch.append(n)
        if (a := _first(_ACTIVATION, line)) is not None:
            act.append(a)
        if (g := _first(_GRAPHS, line)) is not None:
            graphs.append(g)
        if total is None:
            total = _first(_TOTAL, line)
        if util is None:
            for pattern in _UTIL:
                if m := pattern.search(line):
                    util = float(m.group(1))
                    break
        if version is None:
            for pattern in _VERSION:
                if m := pattern.search(line):
                    groups = [g for g in m.groups() if g]
                    version = groups[-1]
                    if len(groups) == 2 and groups[0].upper() == "V0":
                        version = f"{version} V0"
                    break
    kv_found = _kv_lines(text)
    smallest = min(kv_found, key=lambda f: f.kv_tokens) if kv_found else None
    size = _VLLM_BLOCK_SIZE.search(text)
    return LogFacts(
        kv_tokens=smallest.kv_tokens if smallest else None,
        kv_gib=min(kv) if kv else None,
        weights_gib=max(weights) if weights else None,
        non_torch_gib=max(non_torch) if non_torch else None,
        activation_gib=max(act) if act else None,
        cuda_graph_gib=max(graphs) if graphs else None,
        total_gpu_gib=total,
        gpu_memory_utilization=util,
        engine_version=version,
        framework=smallest.framework if smallest else None,
        block_size=int(size.group(1)) if size else None,
        line=smallest.line if smallest else None,
    )


def parse_startup_log(text: str) -> Measured | None:
    """The KV capacity in tokens stated by a pasted log, or None when no known line is there.

    When a log has several (one per rank or worker), the smallest is the engine's capacity.
    The per-GPU weights and the engine version the log states come along."""
    found = _kv_lines(text)
    if not found:
        return None
    smallest = min(found, key=lambda f: f.kv_tokens)
    facts = parse_log_facts(text)
    return Measured(
        smallest.kv_tokens,
        smallest.framework,
        smallest.line,
        facts.weights_gib,
        facts.engine_version,
    )
