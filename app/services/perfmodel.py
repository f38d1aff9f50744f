"""The one adapter around aiconfigurator-core: step latencies of a model on a GPU and framework.

aiconfigurator-core is pre-1.0 and pinned exactly (pyproject.toml); everything tokenshape asks
of it passes through `StepModel`, and tests/unit/app/services/test_perfmodel_contract.py fixes a
few of its predictions so an upgrade that changes them fails loudly. What is taken from it:
- a request's prefill alone: `run_static(batch 1, mode="static_ctx")`, its context latency;
- the time per output token under continuous batching: `run_agg(batch, ctx_tokens=step)`, its
  TPOT (decode steps with prefill chunks mixed in, as vLLM/TensorRT-LLM schedule them).
Its own TTFT under load is a fixed heuristic, so app/sizing/perf.py adds a queueing term instead.

GPUs with measured kernel data (the library's systems) are answered from it ("silicon"). Others
get the library's speed-of-light mode from a system spec written from the catalog's spec-sheet
figures, scaled point by point by measured ÷ speed-of-light on a covered GPU of the same
generation ("roofline"); the source says which.
"""

from __future__ import annotations

import atexit
import copy
import hashlib
import json
import logging
import math
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib.metadata import version as _dist_version
from pathlib import Path
from typing import Any

from app.sizing.perf import Step

log = logging.getLogger(__name__)

LIBRARY = "aiconfigurator-core"
# tokenshape's framework names → the library's back ends. A NIM serving a Hugging Face
# checkpoint (NIM_MODEL_PATH=hf://…, the commands tokenshape writes) runs vLLM; a NIM running
# one of its optimised TensorRT-LLM profiles is described as framework "trtllm".
BACKENDS = {"trtllm": "trtllm", "nim": "vllm", "vllm": "vllm", "sglang": "sglang"}
# What the library calls a weight / KV dtype.
GEMM_MODES = {
    "bf16": "bfloat16",
    "fp16": "bfloat16",
    "fp8": "fp8",
    "int8": "int8_wo",
    "int4": "int4_wo",
    "fp4": "nvfp4",
}
KV_MODES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "int8": "int8"}
# Architectures the library has no family for but which are the same layers as one it has.
SAME_LAYERS = {"MistralForCausalLM": "LlamaForCausalLM"}


# Steps one build keeps (a whole engine grid is 1,764); beyond, the caches start over.
MAX_CACHED_STEPS = 20_000


class PerfModelError(ValueError):
    """The library cannot answer for this configuration; the message says what and why."""


_PATH = re.compile(r"(?:/[\w.+-]+)+/(?:site-packages|dist-packages)/\S*|/tmp/tokenshape-\S*")
_MISSING_QUANT = re.compile(r"perf data missing for quant '([\w]+)'", re.I)


def library_words(exc: BaseException) -> str:
    """The library's error without its file paths (they say nothing to a user, and leak the
    install), with the common cases in words."""
    text = str(exc)
    if m := _MISSING_QUANT.search(text):
        return f"the library has no kernel data for {m.group(1)} weights here: use bf16 or fp8"
    if "MLA data missing" in text or "MoE data missing" in text:
        kind = "MLA attention" if "MLA" in text else "MoE"
        return f"the library has no {kind} kernel data for this dtype on this GPU and framework"
    if "ContextKey" in text or "GenerationKey" in text:
        return (
            "the library has no attention kernel data for this KV cache dtype on this GPU and "
            "framework: use a bf16 or fp8 KV cache"
        )
    if isinstance(exc, KeyError):
        return f"config.json lacks {text}"
    return _PATH.sub("<library data>", text)[:300]


@dataclass(frozen=True)
class GpuFigures:
    """What the speed-of-light mode needs of a GPU without measured kernel data."""

    name: str
    memory_bytes: int
    bandwidth_bytes_s: float
    bf16_flops: float
    fp8_flops: float
    fp4_flops: float
    sm_version: int
    pcie: bool


@dataclass(frozen=True)
class Target:
    """Where a prediction is made: the library's system, back end and version, and how."""

    system: str  # the library's system name (a generated one for roofline GPUs)
    backend: str
    version: str
    mode: str  # "silicon" or "roofline"
    reference: str | None  # the covered system a roofline result is scaled from

    @property
    def source(self) -> str:
        """Words for where the figures come from."""
        if self.mode == "silicon":
            return f"measured kernel data, {self.backend} {self.version} on {self.system}"
        return (
            f"roofline from the GPU's spec sheet, scaled by measured/roofline on {self.reference} "
            f"({self.backend} {self.version})"
        )


def library_version() -> str:
    """The installed aiconfigurator-core version."""
    return _dist_version(LIBRARY)


_lock = threading.RLock()  # the library's caches are plain dicts: one caller at a time


def _sdk() -> Any:
    """The library's modules, imported on first use (about 1 s) and quietened."""
    from aiconfigurator_core.sdk import common, config, perf_database
    from aiconfigurator_core.sdk.backends import factory
    from aiconfigurator_core.sdk.models import get_model

    # It logs every low-fidelity fallback table it loads at WARNING; they are its business.
    logging.getLogger("aiconfigurator_core").setLevel(logging.ERROR)
    return common, config, perf_database, factory, get_model


_supported: dict[tuple[str, ...], Any] = {}
_systems_dir: Path | None = None


@lru_cache(maxsize=128)
def latest_version(system: str, backend: str) -> str | None:
    """The newest version with measured data of `backend` on `system`, or None.

    The library answers by listing every system's databases (parsing each system's YAML),
    about 4 s per call on this machine, and the answer only changes when its systems folders
    do: the listing is made once per set of folders and handed to it for the other systems."""
    with _lock:
        _, _, pdb, _, _ = _sdk()
        # Keyed by the library's own folders: the roofline specs tokenshape adds in its private
        # folder hold no measured data, so they never change which version is the newest.
        ours = str(_systems_dir) if _systems_dir is not None else None
        paths = tuple(p for p in pdb.get_systems_paths() if p != ours)
        original = pdb.get_supported_databases
        if paths not in _supported:
            _supported[paths] = original(list(paths))
        listing = _supported[paths]

        def supported(systems_paths: Any = None) -> Any:
            return listing if systems_paths is None else original(systems_paths)

        pdb.get_supported_databases = supported
        try:
            return pdb.get_latest_database_version(system, backend) or None
        except Exception:  # a system it does not know: no data
            return None
        finally:
            pdb.get_supported_databases = original


def _private_dir(prefix: str) -> Path:
    """A folder only this user reads (mkdtemp makes it 0700), removed when the process ends:
    it holds pasted configs, which are the user's."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, True)
    return folder


def _roofline_system(gpu: GpuFigures) -> str:
    """A library system spec for a GPU it has no data for, written once per process."""
    global _systems_dir
    name = "ts_" + hashlib.sha256(repr(gpu).encode()).hexdigest()[:12]
    with _lock:
        if _systems_dir is None:
            _systems_dir = _private_dir("tokenshape-systems-")
            _, _, pdb, _, _ = _sdk()
            pdb.set_systems_paths([str(_systems_dir), *pdb.get_systems_paths()])
        path = _systems_dir / f"{name}.yaml"
        if not path.exists():
            (_systems_dir / "data" / name).mkdir(parents=True, exist_ok=True)
            link = 32e9 if gpu.pcie else 450e9  # PCIe 4/5 vs NVLink-class, per direction
            spec = {
                "data_dir": f"data/{name}",
                "gpu": {
                    "mem_bw": gpu.bandwidth_bytes_s,
                    "mem_bw_empirical_scaling_factor": 0.8,
                    "mem_empirical_constant_latency": 3e-6,
                    "mem_capacity": gpu.memory_bytes,
                    "bfloat16_tc_flops": gpu.bf16_flops,
                    "int8_tc_flops": gpu.fp8_flops or 2 * gpu.bf16_flops,
                    "fp8_tc_flops": gpu.fp8_flops or gpu.bf16_flops,
                    "fp4_tc_flops": gpu.fp4_flops or gpu.fp8_flops or gpu.bf16_flops,
                    "power": 300,
                    "sm_version": gpu.sm_version,
                },
                "node": {
                    "num_gpus_per_node": 8,
                    "inter_node_bw": 25e9,
                    "intra_node_bw": link,
                    "pcie_bw": 32e9,
                    "p2p_latency": 1e-5,
                },
                "misc": {
                    "nccl_mem": {1: 0, 2: 358612992, 4: 411041792, 8: 411041792},
                    "other_mem": 3758096384,
                    "nccl_version": "2.27.3",
                },
            }
            import yaml  # the library's own dependency; its Rust side wants integer keys

            tmp = path.with_suffix(".tmp")
            tmp.write_text(yaml.safe_dump(spec))
            os.replace(tmp, path)
    return name


def target_for(
    framework: str,
    aic_system: str | None,
    reference: str | None,
    gpu: Callable[[], GpuFigures],
) -> Target:
    """The library system a GPU is answered from, silicon when it has data, else roofline."""
    backend = BACKENDS.get(framework)
    if backend is None:
        raise PerfModelError(f"unknown framework {framework!r}: use one of {', '.join(BACKENDS)}")
    if aic_system:
        v = latest_version(aic_system, backend)
        if v:
            return Target(aic_system, backend, v, "silicon", None)
    figures = gpu()
    if not reference:
        raise PerfModelError(
            f"no performance data for {figures.name}: the library has no measured kernels for it "
            "and no covered GPU of its generation to scale a roofline from"
        )
    v = latest_version(reference, backend)
    if not v:
        raise PerfModelError(f"the library has no {backend} data on {reference} to scale from")
    return Target(_roofline_system(figures), backend, v, "roofline", reference)


_config_dir: Path | None = None


def model_path(hf_id: str, config: Mapping[str, Any] | None) -> str:
    """What the library loads a model from: a pasted config (written to a private folder), or
    its bundled config for the id. Never the network: an id it does not bundle needs a config."""
    global _config_dir
    if config is not None:
        cfg = copy.deepcopy(dict(config))
        archs = cfg.get("architectures")
        if isinstance(archs, str):
            cfg["architectures"] = archs = [archs]
        if not archs or not all(isinstance(a, str) for a in archs):
            raise PerfModelError(
                "config.json names no model class in 'architectures' (e.g. "
                '["LlamaForCausalLM"]): the library picks its model family from it'
            )
        text_arch = archs[0]
        if text_arch in SAME_LAYERS and not cfg.get("sliding_window"):
            cfg["architectures"] = [SAME_LAYERS[text_arch]]
        blob = json.dumps(cfg, sort_keys=True)
        digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
        with _lock:
            if _config_dir is None:
                _config_dir = _private_dir("tokenshape-models-")
            folder = _config_dir / digest
            if not (folder / "config.json").exists():
                folder.mkdir(exist_ok=True)
                tmp = folder / "config.json.tmp"
                tmp.write_text(blob)
                os.replace(tmp, folder / "config.json")
        return str(folder)
    if hf_id in bundled_models():
        return hf_id
    raise PerfModelError(
        f"no architecture for {hf_id!r}: the library bundles configs for "
        f"{len(bundled_models())} models (tokenshape perf --list); paste the model's "
        "Hugging Face config.json into the profile (hf_config) to model it"
    )


@lru_cache(maxsize=1)
def bundled_models() -> frozenset[str]:
    """Hugging Face ids whose config.json the library ships."""
    with _lock:
        common = _sdk()[0]
        return frozenset(common.DefaultHFModels)


@lru_cache(maxsize=1)
def bundled_config_dir() -> Path:
    """The folder of the library's bundled config.json files."""
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent / "model_configs"


def bundled_config(hf_id: str) -> dict[str, Any] | None:
    """The library's bundled config.json for an id, or None."""
    path = bundled_config_dir() / f"{hf_id.replace('/', '--')}_config.json"
    if not path.is_file():
        return None
    return dict(json.loads(path.read_text()))


def _result(summary: Any) -> Mapping[str, Any]:
    """A summary's figures without building its DataFrame (a millisecond each)."""
    out = summary.get_result_dict()
    if out is None:
        return dict(summary.get_summary_df().iloc[0])
    return dict(out)


class StepModel:
    """Step latencies of one model build (TP, PP, dtypes) on one target, cached."""

    def __init__(
        self,
        path: str,
        target: Target,
        tp: int,
        pp: int,
        weight_dtype: str,
        kv_dtype: str,
        step_tokens: int,
    ) -> None:
        self.target = target
        self.step_tokens = step_tokens
        self._cache: dict[tuple[int, int, int], Step] = {}
        self._prefill: dict[tuple[int, int], float] = {}
        with _lock:
            common, config, pdb, factory, get_model = _sdk()
            # MoE layers split like the attention (TP, no expert parallelism) unless told.
            mc_kwargs: dict[str, Any] = {
                "tp_size": tp,
                "pp_size": pp,
                "moe_tp_size": tp,
                "moe_ep_size": 1,
            }
            if weight_dtype in GEMM_MODES and weight_dtype not in ("bf16", "fp16"):
                mc_kwargs["gemm_quant_mode"] = common.GEMMQuantMode[GEMM_MODES[weight_dtype]]
            if kv_dtype in KV_MODES and kv_dtype not in ("bf16", "fp16"):
                mc_kwargs["kvcache_quant_mode"] = common.KVCacheQuantMode[KV_MODES[kv_dtype]]
            self._config = config
            self._mc_kwargs = mc_kwargs
            try:
                self._model = get_model(path, config.ModelConfig(**mc_kwargs), target.backend)
            except Exception as exc:  # the library raises many kinds; say which and why
                raise PerfModelError(
                    f"the library cannot model this architecture: {library_words(exc)}"
                ) from exc
            self._db = self._database(target.system, "SOL" if target.mode == "roofline" else None)
            # A back end caches by shape, not by database: one per database.
            self._backend = factory.get_backend(target.backend)
            if target.mode == "roofline":
                assert target.reference is not None
                self._ref_db = self._database(target.reference, None)
                self._ref_sol_db = self._database(target.reference, "SOL")
                self._ref_backend = factory.get_backend(target.backend)
                self._ref_sol_backend = factory.get_backend(target.backend)
                self._ref_backends = (self._ref_backend, self._ref_sol_backend)
                self._ref_model = get_model(path, config.ModelConfig(**mc_kwargs), target.backend)

    def _database(self, system: str, mode: str | None) -> Any:
        _, _, pdb, _, _ = _sdk()
        kwargs: dict[str, Any] = {}
        if mode:
            kwargs.update(database_mode=mode, allow_missing_data=True, allow_unlisted_version=True)
        try:
            db = pdb.get_database_view(system, self.target.backend, self.target.version, **kwargs)
        except Exception as exc:
            raise PerfModelError(
                f"no performance database for {system}: {library_words(exc)}"
            ) from exc
        if db is None:
            raise PerfModelError(f"no performance database for {system}")
        return db

    def _prefill_ms(self, backend: Any, db: Any, isl: int) -> float:
        """One request's prefill alone (ms), from one database; the same at any OSL/batch."""
        key = (id(db), isl)
        hit = self._prefill.get(key)
        if hit is None:
            ctx = backend.run_static(
                self._model,
                db,
                self._config.RuntimeConfig(batch_size=1, isl=isl, osl=1),
                mode="static_ctx",
            )
            hit = self._prefill[key] = float(_result(ctx)["context_latency"])
        return hit

    def _raw(self, backend: Any, db: Any, isl: int, osl: int, batch: int) -> tuple[float, float]:
        """(prefill alone, TPOT at batch) in ms from one database."""
        agg = backend.run_agg(
            self._model,
            db,
            # One output token has no decode step: its ITL is that of the shortest decode.
            self._config.RuntimeConfig(batch_size=batch, isl=isl, osl=max(osl, 2)),
            ctx_tokens=max(self.step_tokens, 1),
        )
        tpot = float(_result(agg)["tpot"])
        return self._prefill_ms(backend, db, isl), tpot

    def step(self, isl: int, osl: int, batch: int) -> Step:
        """The prefill alone and the ITL at `batch` requests decoding (kv_fits: the caller's)."""
        key = (int(isl), int(osl), max(1, int(batch)))
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        with _lock:
            try:
                prefill, tpot = self._raw(self._backend, self._db, *key)
                if self.target.mode == "roofline":
                    m_pre, m_tpot = self._raw(self._ref_backend, self._ref_db, *key)
                    s_pre, s_tpot = self._raw(self._ref_sol_backend, self._ref_sol_db, *key)
                    prefill *= m_pre / s_pre if s_pre > 0 else 1.0
                    tpot *= m_tpot / s_tpot if s_tpot > 0 else 1.0
            except PerfModelError:
                raise
            except Exception as exc:
                raise PerfModelError(
                    f"the library could not predict ISL {key[0]}, OSL {key[1]}, batch {key[2]}: "
                    f"{library_words(exc)}"
                ) from exc
        if not (math.isfinite(prefill) and math.isfinite(tpot)) or tpot <= 0:
            raise PerfModelError(
                f"the library gave no finite latency for ISL {key[0]}, OSL {key[1]}, batch {key[2]}"
            )
        out = Step(prefill, tpot, True)
        if len(self._cache) >= MAX_CACHED_STEPS:
            self._trim()
        self._cache[key] = out
        return out

    def _trim(self) -> None:
        """Forget every cached step, here and in the library's back ends (which keep ~12 KiB
        a point), so a stream of distinct shapes costs bounded memory."""
        self._cache.clear()
        self._prefill.clear()
        for backend in (self._backend, *getattr(self, "_ref_backends", ())):
            cache: Any = getattr(backend, "_agg_cache", None)
            if cache is not None and hasattr(cache, "clear"):
                cache.clear()


# One StepModel per build, kept for the process: its cache is what makes grids fast.
step_model = lru_cache(maxsize=64)(StepModel)
