"""Which Hugging Face config.json the performance model reads for a model id.

Order: the profile's pasted config; the library's bundled config for the id; the bundled config
of a checkpoint with the same layers (an Instruct model and its base, Llama 3.3 and 3.1 70B);
the config tokenshape's catalog knows for it (app/sizing/catalog.py). Otherwise the model needs
its config pasted: nothing is downloaded.
"""

from __future__ import annotations

import re
from typing import Any

from app.services import perfmodel
from app.sizing import catalog
from app.sizing.profile import EngineProfile

# Same layers, so the same latency; the weights' values do not matter to a performance model.
SAME_ARCHITECTURE = {
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Meta-Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Meta-Llama-3-8B": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-70B": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Meta-Llama-3.1-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.3-70B-Instruct": "meta-llama/Meta-Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B-Instruct": "meta-llama/Meta-Llama-3.1-405B",
    "meta-llama/Meta-Llama-3.1-405B-Instruct": "meta-llama/Meta-Llama-3.1-405B",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    "mistralai/Mixtral-8x22B-Instruct-v0.1": "mistralai/Mixtral-8x22B-v0.1",
    "Qwen/Qwen3-8B-Instruct": "Qwen/Qwen3-8B",
}


# Hugging Face model types whose layers the library has a family for; tokenshape's own configs
# (app/sizing/catalog.py) carry a model_type, the library wants an architecture name. Mistral
# without a sliding window is Llama's layers.
ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "LlamaForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}


def _known(hf_id: str) -> tuple[str, str] | None:
    """A config tokenshape knows for the id, made loadable by the library, or None."""
    config = catalog.model_config(hf_id)
    if config is None:
        return None
    config = dict(config)
    if not config.get("architectures"):
        arch = ARCHITECTURES.get(str(config.get("model_type")))
        if arch is None:
            raise perfmodel.PerfModelError(
                f"the library has no model family for {hf_id} (model type "
                f"{config.get('model_type')!r}): latency cannot be predicted for it"
            )
        config["architectures"] = [arch]
    path = perfmodel.model_path(hf_id, config)
    return path, f"{hf_id}'s config.json as tokenshape knows it"


_SUFFIX = re.compile(r"-(Instruct|Chat|it)(-v[\d.]+)?$", re.I)


def resolve(hf_id: str, pasted: dict[str, Any] | None) -> tuple[str, str]:
    """(the path the library loads, words for where the architecture came from)."""
    if pasted:
        return perfmodel.model_path(hf_id, pasted), "the config.json pasted into the profile"
    bundled = perfmodel.bundled_models()
    if hf_id in bundled:
        return hf_id, f"{hf_id}'s config.json as the library bundles it"
    alias = SAME_ARCHITECTURE.get(hf_id)
    if alias is None:
        base = _SUFFIX.sub("", hf_id)
        alias = base if base != hf_id else None
    if alias and alias in bundled:
        return alias, f"the bundled config.json of {alias} (the same layers as {hf_id})"
    for name in (hf_id, alias):
        shipped = perfmodel.bundled_config(name) if name else None
        if shipped is not None:  # a file the library ships without listing it as a default
            words = f"{name}'s config.json as the library ships it"
            return perfmodel.model_path(name or hf_id, shipped), words
    known = _known(hf_id)
    if known is not None:
        return known
    # Raises, naming what to do.
    return perfmodel.model_path(hf_id, None), ""


def resolve_profile(profile: EngineProfile) -> tuple[str, str]:
    """The library path for a profile's architecture: its pasted config, its catalog model's
    checkpoint (hf_model then only names what is served), or its Hugging Face id."""
    if profile.hf_config is not None:
        return resolve(profile.model_id, profile.hf_config)
    if profile.model == "custom":
        raise perfmodel.PerfModelError(
            "a custom model is described by a few numbers, not its layers: paste its "
            "config.json (hf_config) to predict its latency"
        )
    if profile.model in catalog.MODELS:
        return resolve(catalog.MODELS[profile.model].hf_id, None)
    return resolve(profile.model_id, None)
