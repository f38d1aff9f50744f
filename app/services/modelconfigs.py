"""Which Hugging Face config.json the performance model reads for a model id.

Order: the profile's pasted config; else the checkpoint app/sizing/catalog.py says has the id's
layers (itself, a base model, an alias), read from the library's own file when it ships one and
from the catalog's config otherwise. Otherwise the model needs its config pasted: nothing is
downloaded.
"""

from __future__ import annotations

import re
from typing import Any

from app.services import perfmodel
from app.sizing import catalog
from app.sizing.profile import EngineProfile

# Hugging Face model types whose layers the library has a family for; tokenshape's own configs
# (app/sizing/catalog.py) carry a model_type, the library wants an architecture name
# (perfmodel.model_path maps the ones it lacks to the same layers it has).
ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "mixtral": "MixtralForCausalLM",
    "qwen2_moe": "Qwen2MoeForCausalLM",
    "qwen3_moe": "Qwen3MoeForCausalLM",
}


def _known(hf_id: str) -> tuple[str, str]:
    """The config the catalog knows for the id, made loadable by the library."""
    config = dict(catalog.model_config(hf_id) or {})
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
    # The catalog knows which checkpoint has an id's layers (an Instruct model and its base,
    # Llama 3.3 and 3.1 70B); an unknown id ending in -Instruct/-Chat tries its base too.
    key = catalog.config_key(hf_id) or catalog.config_key(_SUFFIX.sub("", hf_id))
    if key is None:
        return perfmodel.model_path(hf_id, None), ""  # raises, naming what to do
    same = "" if key == hf_id else f" (the same layers as {hf_id})"
    if key in perfmodel.bundled_models():
        return key, f"{key}'s config.json as the library bundles it{same}"
    shipped = perfmodel.bundled_config(key)
    if shipped is not None:  # a file the library ships without listing it as a default
        return perfmodel.model_path(key, shipped), f"{key}'s config.json as the library ships it"
    return _known(key)


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
