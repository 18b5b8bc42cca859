"""Model implementations of the embedded engine, chosen by config.json's model_type.

Every model: `Model(config: dict, ops, layer_map)` (the layer map from `bringup.core.families` says
which mixer and FFN each layer has; stack.py assembles them), `.forward(batch) -> logits [B, vocab]`,
`.cache_spec` (which layers need KV pages and which need state slots, and their shapes),
`.load_weights(iterable of (checkpoint name, tensor))`. Build one with `bringup.core.engine.loader`.
"""

from __future__ import annotations

from .base import CacheSpec, CausalLM, WeightLoadError
from .llama import LlamaForCausalLM
from .nemotron_h import NemotronHForCausalLM

MODEL_REGISTRY: dict[str, type[CausalLM]] = {
    "nemotron_h": NemotronHForCausalLM,
    "llama": LlamaForCausalLM,
    "mistral": LlamaForCausalLM,
    "qwen2": LlamaForCausalLM,
    "qwen3": LlamaForCausalLM,
    "qwen3_moe": LlamaForCausalLM,
}


class UnsupportedModelError(ValueError):
    pass


def supported_model_types() -> list[str]:
    return sorted(MODEL_REGISTRY)


def model_class_for(config: dict) -> type[CausalLM]:
    model_type = config.get("model_type")
    try:
        return MODEL_REGISTRY[model_type]
    except KeyError:
        archs = ", ".join(config.get("architectures") or []) or "unknown architecture"
        raise UnsupportedModelError(
            f"model_type {model_type!r} ({archs}) is not supported by the embedded engine; it runs "
            f"{', '.join(supported_model_types())}. Serve this model with SGLang instead, or pick a supported one."
        ) from None


__all__ = ["CacheSpec", "CausalLM", "MODEL_REGISTRY", "UnsupportedModelError", "WeightLoadError",
           "model_class_for", "supported_model_types"]
