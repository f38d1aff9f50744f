"""The measured KV-cache capacity from an engine's own startup log (vLLM or TensorRT-LLM)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Measured:
    """KV capacity read from a log, and the line it came from."""

    kv_tokens: int
    framework: str
    line: str


def _int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


_VLLM_TOKENS = re.compile(r"GPU KV cache size:\s*([\d,_]+)\s*tokens", re.I)
_VLLM_BLOCKS = re.compile(r"#\s*(?:GPU|cuda) blocks:\s*([\d,_]+)", re.I)
_VLLM_BLOCK_SIZE = re.compile(r"block[_ ]size[=:\s]+(\d+)", re.I)
_TRT_TOKENS = re.compile(r"max tokens in paged KV cache\s*(?:\(|:)\s*([\d,_]+)", re.I)
_TRT_BLOCKS = re.compile(r"Number of blocks in KV cache primary pool:\s*([\d,_]+)", re.I)
_TRT_PER_BLOCK = re.compile(r"Number of tokens per block:\s*(\d+)", re.I)
VLLM_DEFAULT_BLOCK = 16


def parse_startup_log(text: str) -> Measured | None:
    """The KV capacity in tokens stated by a pasted log, or None when no known line is there.

    When a log has several (one per rank or worker), the smallest is the engine's capacity."""
    found: list[Measured] = []
    for line in text.splitlines():
        if m := _VLLM_TOKENS.search(line):
            found.append(Measured(_int(m.group(1)), "vllm", line.strip()))
        elif m := _TRT_TOKENS.search(line):
            found.append(Measured(_int(m.group(1)), "trtllm", line.strip()))
    if found:
        return min(found, key=lambda f: f.kv_tokens)
    size = _VLLM_BLOCK_SIZE.search(text)
    per = int(size.group(1)) if size else VLLM_DEFAULT_BLOCK
    for line in text.splitlines():
        if m := _VLLM_BLOCKS.search(line):
            found.append(Measured(_int(m.group(1)) * per, "vllm", line.strip()))
    if found:
        return min(found, key=lambda f: f.kv_tokens)
    trt_blocks, trt_per = _TRT_BLOCKS.search(text), _TRT_PER_BLOCK.search(text)
    if trt_blocks and trt_per:
        line = next(ln for ln in text.splitlines() if _TRT_BLOCKS.search(ln)).strip()
        return Measured(_int(trt_blocks.group(1)) * int(trt_per.group(1)), "trtllm", line)
    return None
