"""Layer maps for every supported architecture family: `build_layer_map(config) -> LayerMap`.

One module per family; each has `MODEL_TYPES` and `build(view) -> FamilyResult`. Only the module a
config needs is imported, so `bringup inspect` stays fast.
"""

from __future__ import annotations

import importlib

from bringup.core.errors import UserError
from bringup.core.families._assemble import assemble
from bringup.core.families._view import ConfigView
from bringup.core.layermap.vocabulary import LayerMap

# model_type -> module under bringup.core.families (kept in step with each module's MODEL_TYPES).
FAMILY_MODULES: dict[str, str] = {
    "nemotron_h": "nemotron_h",
    "qwen3_next": "qwen3_next", "qwen3_5": "qwen3_next", "qwen3_5_text": "qwen3_next",
    "qwen3_5_moe": "qwen3_next", "qwen3_5_moe_text": "qwen3_next",
    "kimi_linear": "kimi_linear",
    "minimax": "minimax", "minimax_m1": "minimax", "minimax_text_01": "minimax",
    "falcon_h1": "falcon_h1",
    "lfm2": "lfm2",
    "granitemoehybrid": "granite_hybrid", "bamba": "granite_hybrid",
    "jamba": "jamba",
    "zamba2": "zamba2",
    "gpt_oss": "sliding", "gemma2": "sliding", "gemma3": "sliding", "gemma3_text": "sliding",
    "gemma4": "gemma4", "gemma4_text": "gemma4",
    "llama": "dense", "mistral": "dense", "qwen2": "dense", "qwen3": "dense", "granite": "dense",
    "mixtral": "dense", "qwen2_moe": "dense", "qwen3_moe": "dense",
}
# What the error message lists when a model_type is unknown.
FAMILY_NAMES = {
    "nemotron_h": "NemotronH",
    "qwen3_next": "Qwen3-Next / Qwen3.5",
    "kimi_linear": "Kimi-Linear",
    "minimax": "MiniMax-M1 / Text-01",
    "falcon_h1": "Falcon-H1",
    "lfm2": "LFM2",
    "granite_hybrid": "Granite-4.0-H / Bamba",
    "jamba": "Jamba",
    "zamba2": "Zamba2",
    "sliding": "gpt-oss / Gemma 2-3",
    "gemma4": "Gemma 4",
    "dense": "dense (Llama, Mistral, Qwen2/3, Granite, Mixtral, Qwen-MoE)",
}


def supported_model_types() -> list[str]:
    return sorted(FAMILY_MODULES)


def text_config(config: dict) -> tuple[dict, bool]:
    """The decoder's config: multimodal wrappers (Qwen3.5, Gemma 3/4, VL models) nest it in text_config."""
    inner = config.get("text_config")
    if isinstance(inner, dict) and inner:
        merged = dict(inner)
        # Wrappers keep some facts only at the top level (tied embeddings, architectures).
        for key in ("architectures", "tie_word_embeddings"):
            if key not in merged and key in config:
                merged[key] = config[key]
        if "model_type" not in merged and isinstance(config.get("model_type"), str):
            merged["model_type"] = config["model_type"]
        return merged, True
    return config, False


def _unsupported(model_type, label: str) -> UserError:
    families = ", ".join(FAMILY_NAMES.values())
    shown = repr(model_type) if model_type is not None else "missing"
    return UserError(
        f"{label}: model_type {shown} is not a supported architecture. Supported families: {families} "
        f"(model_type one of {', '.join(supported_model_types())}), any model_type the installed transformers "
        "knows (read through its config class, no remote code), or any config with a 'layer_types' list "
        "of full_attention / sliding_attention / linear_attention / mamba / conv. Pick a supported model, install a "
        "transformers release that has this model, or add a family module under core/families/"
    )


def _module_for(cfg: dict, label: str, reader: str = "auto"):
    """The module that reads this config: its family module, else transformers, else its layer_types list."""
    model_type = cfg.get("model_type")
    if reader in ("auto", "family") and isinstance(model_type, str) and model_type in FAMILY_MODULES:
        return importlib.import_module(f"bringup.core.families.{FAMILY_MODULES[model_type]}")
    if reader == "family":
        raise _unsupported(model_type, label)
    # Only past this point may torch and transformers be imported: known families stay fast.
    from bringup.core.families import generic

    if generic.knows(model_type):
        return generic
    if reader == "transformers":
        raise UserError(f"{label}: the installed transformers has no config class for model_type {model_type!r}")
    from bringup.core.families import layer_types

    if layer_types.applies(cfg):
        return layer_types
    raise _unsupported(model_type, label)


def reads_through_transformers(config) -> bool:
    """Whether `build_layer_map` would take the generic path (seconds: torch, transformers, a meta build)."""
    if not isinstance(config, dict):
        return False
    model_type = text_config(config)[0].get("model_type")
    if isinstance(model_type, str) and model_type in FAMILY_MODULES:
        return False
    from bringup.core.families import generic

    return generic.knows(model_type)


def build_layer_map(config: dict, *, name: str = "", source: str = "", pp: int = 1, reader: str = "auto") -> LayerMap:
    """The layer map of a config.json. `reader`: "auto" (family module, else transformers, else layer_types),
    "family" (family modules only) or "transformers" (the generic path, e.g. to cross-check a family)."""
    label = name or source or "model"
    if not isinstance(config, dict):
        raise UserError(f"{label}: the config is a {type(config).__name__}, not a JSON object; point at a model's config.json")
    cfg, nested = text_config(config)
    module = _module_for(cfg, label, reader)
    if getattr(module, "__name__", "").endswith(".generic"):
        top = config if isinstance(config.get("model_type"), str) else dict(config, model_type=cfg.get("model_type"))
        result = module.build_from_config(top, label)
    else:
        result = module.build(ConfigView(cfg, label))
    if nested:
        towers = [k for k in ("vision_config", "audio_config") if isinstance(config.get(k), dict)]
        note = "decoder facts read from the nested text_config"
        if towers:
            note += f"; parameters count the text decoder only, not the {' and '.join(t[:-7] for t in towers)} tower"
        result.notes.insert(0, note)
    reader_name = f"core/families/{module.__name__.rsplit('.', 1)[-1]}.py"
    return assemble(result, cfg, name=name or label, source=source, pp=pp, reader=reader_name)
