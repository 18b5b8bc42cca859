"""Model implementations of the embedded engine, chosen by config.json's model_type.

Every model: `Model(config: dict, ops, layer_map)` (the layer map from `bringup.core.families` says
which mixer and FFN each layer has; stack.py assembles them), `.forward(batch) -> logits [B, vocab]`,
`.cache_spec` (which layers need KV pages and which need state slots, and their shapes),
`.load_weights(iterable of (checkpoint name, tensor))`. Build one with `bringup.core.engine.loader`.
Which class serves which model_type is stated once, in `bringup.core.engine.facts.MODEL_CLASSES`.
"""

from __future__ import annotations

import importlib

from ..facts import MODEL_CLASSES, TEXT_DECODER_WRAPPERS, supported_model_types, unsupported_model_message
from .base import CacheSpec, CausalLM, ModelSizeError, WeightLoadError


class UnsupportedModelError(ValueError):
    pass


def decoder_config(config: dict) -> dict:
    """The config the engine builds from: for a multimodal wrapper whose text decoder it runs
    (facts.TEXT_DECODER_WRAPPERS, e.g. Qwen3.5's `qwen3_5`), the nested text_config merged with the
    wrapper's top-level facts (architectures, tied embeddings); any other config as it is."""
    if config.get("model_type") not in TEXT_DECODER_WRAPPERS or not isinstance(config.get("text_config"), dict):
        return config
    from bringup.core.families import text_config

    merged = text_config(config)[0]
    for key in ("eos_token_id", "bos_token_id", "pad_token_id", "dtype", "torch_dtype"):
        if merged.get(key) is None and config.get(key) is not None:
            merged[key] = config[key]
    return merged


def model_class_for(config: dict) -> type[CausalLM]:
    """The class for config.json's model_type, imported on first use (the list lives in ../facts.py)."""
    model_type = config.get("model_type")
    if model_type not in MODEL_CLASSES:
        raise UnsupportedModelError(unsupported_model_message(model_type, config.get("architectures")))
    module, name = MODEL_CLASSES[model_type].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


__all__ = ["CacheSpec", "CausalLM", "ModelSizeError", "UnsupportedModelError", "WeightLoadError", "decoder_config", "model_class_for",
           "supported_model_types"]
